"""gputwin.verify: first-divergence diff, miscompile bisect, differential fuzzing and the pytest plugin.

  r = runner.run(code, "k", grid=2, block=64, args=[("out", out), ("n", 5)])   # outputs + the emulator's trace
  diverge.first_output_diff(ra, rb), diverge.first_trace_diff(ra, rb)         # where two runs part
"""
