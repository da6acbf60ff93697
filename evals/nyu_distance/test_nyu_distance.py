"""NYU Depth V2: the 3D distance in metres between two marked points of an indoor image.

Cases are image x point pair x model:

pytest evals/nyu_distance --model=oracle
pytest evals/nyu_distance --nyu-mat /data/nyu_depth_v2_labeled.mat --samples 10 --model gpt-4o
"""

import pytest

pytestmark = pytest.mark.evaluation("nyu_distance")


def test_nyu_distance(outcome, judge):
    judge(outcome)
