"""Virtual AMD GPUs behind the mock KFD: PM4 command processor and SDMA engines (gpu), dispatches on the emulator
(dispatch); the packet formats are gputwin.abi.pm4, shared with the runtime. See ../README.md."""
