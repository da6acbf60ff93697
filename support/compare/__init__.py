"""The after-the-run tool, `vlmbench-compare` (`python -m support.compare`): two runs paired by
case (runs.py), their comparison page (page.py) and a leaderboard of runs (leaderboard.py). It
reads run folders; the pytest reporter never imports it."""
