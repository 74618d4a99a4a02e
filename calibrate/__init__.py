"""Calibration: time `kernels/` over a shape grid, fit the cost model, report residuals.

Importing the package imports nothing heavy: `calibrate.runner` and `calibrate.timing`
need torch (the `calibrate` extra); the fitter and report do not.
"""
