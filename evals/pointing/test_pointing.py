"""CholecSeg8k pointing: presence and a point on the 768x768 canvas.

Cases are sample x organ x condition x model:

pytest evals/pointing -k liver -n 8
pytest evals/pointing --model=gpt-4o-mini -m quick
"""

import pytest

pytestmark = pytest.mark.evaluation("pointing")


def test_pointing(outcome, judge):
    judge(outcome)
