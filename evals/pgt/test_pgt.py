"""PGT: is the image real or AI-generated? One case per image x phrase x mode x n x model.

pytest evals/pgt --model=qwen25-vl-7b --pgt-dataset df40 --pgt-root DATA
"""

import pytest

pytestmark = pytest.mark.evaluation("pgt")


def test_pgt(outcome, judge):
    judge(outcome)
