"""AnyPoint dynamic evaluation: a budgeted search for a model's failures on generated 3D scenes.

Cases are the rounds of each search x model (`dynamic-lambda0.2-round03-<model>`, `random-round00-
<model>`); each round yields one outcome per task (`...-round03-t034`):

pytest evals/dynamic -m quick
pytest evals/dynamic --model 'planted:where_distance=0.9,*=0.05' --dynamic-lambda 0,0.2,1
pytest evals/dynamic --model gpt-4o-mini --dynamic-data /data/anypoint/objects
"""

import pytest

pytestmark = pytest.mark.evaluation("dynamic")


def test_dynamic(outcomes, judge):
    judge(outcomes)
