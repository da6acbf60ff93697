"""Paired comparisons: stats.py (paired cluster bootstrap, McNemar, permutation, Holm, power),
pairing.py (which outcomes pair; comparisons.csv of an evaluation), cli.py (two runs paired by
case id: `python -m support.comparisons.stats RUN_A RUN_B`, `vlmbench-compare`)."""
