"""The evaluation contract: what an evaluation declares (evaluation.py: its spec, options and
class), how one case runs (runner.py), what its summary is given and returns (summary.py), which
parser rule read each answer (provenance.py) and the checks of its data-path options
(data_paths.py)."""
