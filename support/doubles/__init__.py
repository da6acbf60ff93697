"""Test doubles and test models, shipped for users and for the suite's own tests: the loopback
API server (loopback.py, `python -m support.doubles.loopback`; its batch endpoints in
loopback_batches.py and the vendors' documented request rules it enforces in
loopback_validation.py) and tiny models built in code (tiny_vlm.py, tiny_families.py,
tiny_scorers.py, tiny_pointqa.py). No evaluation imports them."""
