"""Paired comparisons: stats.py (paired cluster bootstrap, McNemar, permutation, Holm, power),
pairing.py (which outcomes pair; comparisons.csv of an evaluation). Two runs paired by case id:
support/compare_runs.py (`vlmbench-compare RUN_A RUN_B`), above the evaluations it reads."""
