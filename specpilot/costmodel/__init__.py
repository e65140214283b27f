"""Cost model of a decode step (issue 5): roofline floors per component and the gap to them.

  counts.py   analytic HBM bytes and FLOPs per component of an ar or stock step, and the floors
  profile.py  the same components timed on the device (hooks and wrappers, no engine change)
  report.py   floors vs measured, largest gap first, speedup ceiling (verify_batching.md 4.3)
  __main__.py python -m specpilot.costmodel

Nothing in the runtime imports this package.
"""
