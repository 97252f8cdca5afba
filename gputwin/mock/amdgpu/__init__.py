"""Virtual AMD GPUs behind the mock KFD: PM4 command processor and SDMA engines (gpu), dispatches on the emulator
(dispatch), packet formats shared with the runtime (packets). See ../README.md."""
