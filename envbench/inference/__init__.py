"""What the figures may be said to show: the statistics every verdict stands on, pure Python
and torch-free, below every stage that reports or decides.

verdicts.py  the calibrated test of two sets of repeats, Holm's step-down, MIN_REPEATS
looks.py     repeats: auto as a sequential design: each look's share of the 5%
tdist.py     Student's t (tails, critical values) and its power
stats.py     medians, spreads and the bootstraps the calibration harness compares against
"""
