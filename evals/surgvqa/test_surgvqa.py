"""SurgVU: surgical VQA scored by max sentence-BLEU, and tool detection scored by COCO mAP.

Cases are question x model (`vqa-case122-<model>`) and frame x model (`tools-v1-f00042-<model>`):

pytest evals/surgvqa -m quick
pytest evals/surgvqa -k vqa --surgvqa-root /data/surgvu --model gemini-2.0-flash
"""

import pytest

pytestmark = pytest.mark.evaluation("surgvqa")


def test_surgvqa(outcome, judge):
    judge(outcome)
