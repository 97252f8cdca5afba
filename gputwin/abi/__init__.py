"""gputwin.abi: the interfaces between a userspace driver and the kernel/GPU it drives, as data shared by both sides
(gputwin.runtime and gputwin.mock). See README.md."""
