"""Statistics: binary metrics and cluster-bootstrap intervals (metrics.py), paired tests of two
conditions on the same cases (paired.py: bootstrap, McNemar, permutation, Holm, power) and which
outcomes pair into comparisons.csv (pairing.py)."""
