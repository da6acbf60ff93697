"""Cost of scoring 10,000 SurgVU 2026 answers: BERTScore and NLI (tiny stand-ins), BLEU and ROUGE.

    pytest benchmarks/test_surgvqa_semantic_cost.py --benchmark-only -s -p no:randomly
    BENCH_SURGVQA_ANSWERS=300 pytest benchmarks/test_surgvqa_semantic_cost.py --benchmark-only -s

Workload: BENCH_SURGVQA_ANSWERS questions (default 10,000), built deterministically from surgical
sentences (the SurgVU tool names, organs and actions): five references each (1-30 words: "Yes",
"Yes, a needle driver was used.", longer sentences) and one answer, most of 1-40 words, with long
ones (2%: 150-400 words, some past the models' 512 tokens), empty and blank ones (2%), refusals,
and 10% repeats of an earlier question (a repeat is scored once a run).

Two paths, each as a run takes it:

- `test_model_metrics_cost`: the controller's `summary.score_outcomes` over the answered outcomes
  with the tiny random-weight stand-ins of roberta-large (24 layers, 32 wide) and the NLI
  cross-encoder (support/doubles/tiny_scorers.py), one bert_score call and one CrossEncoder.predict
  a question, as the official evaluator. The stand-ins are tiny, so this measures the per-question
  overhead of the two libraries and the loop, not the real models' arithmetic
  (benchmarks/surgvqa_real_cost.py times real-size models). No score cache (--no-cache).
- `test_kept_scores_cost`: BENCH_SURGVQA_KEPT_ANSWERS (1,000) of those questions through
  `score_outcomes` with the score cache (score_cache.py) in a fresh cache folder: cold (models
  loaded, every answer scored and kept), then warm in this process (every score read back; no
  model loaded), then warm in a fresh process as a rerun's controller takes it (torch imported
  inside: the device is part of the key); the warm scores must equal the cold ones byte for byte.
- `test_text_metrics_cost`: the workers' `SurgvqaEvaluation.score_vqa` (BLEU against each
  reference, ROUGE-1/2/L, yes/no) and the outcome built from its verdict; ROUGE alone is timed
  again after it, for the split.

Each prints one line: wall seconds, answers/s, CPU seconds, the peak RSS during the scoring and
its growth over the RSS before it (torch's memory is outside tracemalloc's view, so RSS), torch's
threads, and what other processes used of the machine meanwhile (the numbers move with a shared
machine's load). BENCH_TORCH_THREADS sets torch's threads (default: torch's own choice, as a run).
No timed assertion: the checks are that every answer was scored.
"""

from __future__ import annotations

import math
import os
import random

import pytest
from surgvqa_real_cost import measured  # benchmarks/ is on sys.path (pytest's rootdir mode)

from support.types import Outcome

pytest.importorskip("bert_score")
pytest.importorskip("sentence_transformers")

N_ANSWERS = int(os.environ.get("BENCH_SURGVQA_ANSWERS", "10000"))
N_KEPT = int(os.environ.get("BENCH_SURGVQA_KEPT_ANSWERS", "1000"))
THREADS = os.environ.get("BENCH_TORCH_THREADS")
LONG, BLANK, REPEAT = 0.02, 0.02, 0.10  # shares of the answers: long, empty or blank, repeats

TOOLS = ("needle driver", "cadiere forceps", "monopolar curved scissors", "force bipolar",
         "prograsp forceps", "vessel sealer", "clip applier", "stapler", "suction irrigator",
         "tip-up fenestrated grasper", "permanent cautery hook", "bipolar dissector",
         "grasping retractor", "large needle driver")  # fmt: skip
ORGANS = ("uterine horn", "bladder", "peritoneum", "ovary", "small bowel", "rectum", "ureter",
          "vaginal cuff", "round ligament", "mesentery")  # fmt: skip
ACTIONS = ("dissecting", "retracting", "suturing", "cauterizing", "grasping", "cutting",
           "irrigating", "stapling", "clipping", "inspecting")  # fmt: skip
HEDGES = ("It is unclear from the video.", "I cannot tell from these frames.",
          "Sorry, I can't determine that.", "The answer is not visible in the clip.")  # fmt: skip


def tools_text(rng: random.Random, k: int) -> str:
    names = rng.sample(TOOLS, k)
    return names[0] if k == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def sentence(rng: random.Random) -> str:
    """One surgical sentence of 6-30 words."""
    tool, organ, action = rng.choice(TOOLS), rng.choice(ORGANS), rng.choice(ACTIONS)
    return rng.choice(
        (
            f"A {tool} was used.",
            f"The {tool} is {action} the {organ}.",
            f"The surgeon is {action} the {organ} with the {tool}.",
            f"There is clear evidence a {tool} was used in this clip.",
            f"The tools used are a {tools_text(rng, rng.randint(2, 4))}.",
            f"The {organ} is being operated on while the {tool} is {action} tissue near the "
            f"{rng.choice(ORGANS)} and the camera holds still.",
            f"In this clip the surgeon uses the {tool} in the left arm and the "
            f"{rng.choice(TOOLS)} in the right arm, {action} the {organ} before moving on.",
        )
    )


def question(rng: random.Random) -> tuple[str, list[str], str]:
    """(kind, five references, answer) of one question."""
    tool, organ = rng.choice(TOOLS), rng.choice(ORGANS)
    kind = rng.choice(("yes_no", "tools", "organ", "action"))
    if kind == "yes_no":
        said = rng.choice(("Yes", "No"))
        refs = [
            said,
            f"{said}, a {tool} was used." if said == "Yes" else f"No, a {tool} was not used.",
        ]
    elif kind == "tools":
        refs = [f"The tools used are a {tools_text(rng, rng.randint(1, 4))}."]
    elif kind == "organ":
        refs = [f"The {organ} is being operated on.", f"The {organ}."]
    else:
        refs = [f"The surgeon is {rng.choice(ACTIONS)} the {organ}."]
    while len(refs) < 5:
        refs.append(sentence(rng))
    draw = rng.random()
    if draw < BLANK:
        answer = rng.choice(("", "   ", "\n"))
    elif draw < BLANK + LONG:  # 150-400 words: some past the models' 512 tokens
        words: list[str] = []
        while len(words) < rng.randint(150, 400):
            words += sentence(rng).split()
        answer = " ".join(words)
    elif draw < 0.2:
        answer = rng.choice(refs)  # a reference word for word
    elif draw < 0.27:
        answer = rng.choice(HEDGES)
    elif draw < 0.4:
        answer = rng.choice(("Yes", "No", "yes.", "No."))
    else:  # one to three sentences: 6-40 words mostly
        answer = " ".join(sentence(rng) for _ in range(rng.choice((1, 1, 1, 2, 3))))
    return "open" if kind != "yes_no" else "yes_no", refs, answer


def workload(n: int, seed: int = 0) -> list[tuple[str, list[str], str]]:
    """`n` questions, REPEAT of them copies of an earlier one."""
    rng = random.Random(seed)
    out: list[tuple[str, list[str], str]] = []
    for _ in range(n):
        out.append(rng.choice(out) if out and rng.random() < REPEAT else question(rng))
    return out


def outcome(k: int, kind: str, refs: list[str], answer: str) -> Outcome:
    """An answered VQA outcome as a worker records it (before the controller's model scores)."""
    return Outcome(
        case_id=f"vqa-case{k:05d}-m",
        evaluation="surgvqa",
        model="m",
        status="wrong",
        group={"category": "vqa", "kind": kind},
        cluster=f"video-{k % 50}",
        scores={"bleu": 0.0, "yes_no_correct": None},
        prediction={"answer": answer},
        raw=answer,
        params={"category": "vqa", "case": f"case{k:05d}", "answers": refs, "kind": kind},
    )


@pytest.fixture(scope="module")
def questions() -> list[tuple[str, list[str], str]]:
    return workload(N_ANSWERS)


def describe(questions: list[tuple[str, list[str], str]]) -> str:
    answers = [a for _, _, a in questions]
    words = sorted(len(a.split()) for a in answers)
    refs = [len(r.split()) for _, rs, _ in questions for r in rs]
    return (
        f"{len(answers):,} answers: words median {words[len(words) // 2]}, max {words[-1]}, "
        f"{sum(not a.strip() for a in answers)} blank; reference words mean "
        f"{sum(refs) / len(refs):.1f}"
    )


def test_model_metrics_cost(benchmark, questions, tmp_path_factory) -> None:
    import torch

    from support.contract.summary import SummaryContext
    from support.doubles.tiny_scorers import ensure_scorers
    from support.evaluations.surgvqa.semantic import SemanticScorer, find_models
    from support.evaluations.surgvqa.spec import SurgvqaSettings
    from support.evaluations.surgvqa.summary import score_outcomes
    from support.settings import OutputSettings

    if THREADS:
        torch.set_num_threads(int(THREADS))
    roberta, nli = ensure_scorers(tmp_path_factory.mktemp("scorers"))
    models = find_models(str(roberta), str(nli), baseline="roberta-large")
    ctx = SummaryContext.of(
        settings=SurgvqaSettings(metrics="2026", scoring=models),
        output=OutputSettings(use_cache=False),
    )
    outcomes = [outcome(k, *q) for k, q in enumerate(questions)]
    score_outcomes(outcomes[:2], ctx)  # import the libraries; each call loads its own models
    with measured() as loading:
        SemanticScorer(models).load()

    def run() -> list[Outcome]:
        with measured() as usage:
            scored = score_outcomes(outcomes, ctx)
        run.usage = usage  # type: ignore[attr-defined]
        return scored

    scored = benchmark.pedantic(run, rounds=1, iterations=1)
    usage = run.usage  # type: ignore[attr-defined]
    print(f"\n{describe(questions)}; loading both models alone: {loading.wall_s:.1f} s")
    print(usage.line(f"BERTScore + NLI (tiny stand-ins, models loaded inside, torch "
                     f"{torch.get_num_threads()} threads)", len(scored)))  # fmt: skip
    f1 = [o.scores["bertscore_f1"] for o in scored]
    assert len(f1) == N_ANSWERS and all(math.isfinite(v) for v in f1)
    blank = [o for o in scored if not o.prediction["answer"].strip()]
    assert all(o.scores["nli_bertscore_f1"] == 0.0 for o in blank)


# the warm run of a rerun: a fresh process (nothing imported but what a run's controller has),
# the same outcomes (pickled) and cache folder
WARM_CHILD = """
import json, pickle, sys, time
from pathlib import Path
from support.contract.summary import SummaryContext
from support.evaluations.surgvqa.semantic import SemanticScorer, find_models
from support.evaluations.surgvqa.spec import SurgvqaSettings
from support.evaluations.surgvqa.summary import score_outcomes
from support.settings import OutputSettings

roberta, nli, cache, pickled = sys.argv[1:5]
models = find_models(roberta, nli, baseline="roberta-large")
ctx = SummaryContext.of(settings=SurgvqaSettings(metrics="2026", scoring=models),
                        output=OutputSettings(cache_dir=Path(cache)))
outcomes = pickle.loads(Path(pickled).read_bytes())
SemanticScorer.load = None  # a call would fail: a warm run loads no model
torch_before = "torch" in sys.modules
t0 = time.perf_counter()
scored = score_outcomes(outcomes, ctx)
took = time.perf_counter() - t0
print(json.dumps({"wall_s": took, "torch_before": torch_before,
                  "scores": [json.dumps(o.scores) for o in scored]}))
"""


def test_kept_scores_cost(benchmark, tmp_path_factory) -> None:
    import json
    import pickle
    import subprocess
    import sys

    import torch

    from support.contract.summary import SummaryContext
    from support.doubles.tiny_scorers import ensure_scorers
    from support.evaluations.surgvqa.semantic import SemanticScorer, find_models
    from support.evaluations.surgvqa.spec import SurgvqaSettings
    from support.evaluations.surgvqa.summary import score_outcomes
    from support.settings import OutputSettings

    if THREADS:
        torch.set_num_threads(int(THREADS))
    roberta, nli = ensure_scorers(tmp_path_factory.mktemp("scorers"))
    models = find_models(str(roberta), str(nli), baseline="roberta-large")
    cache = tmp_path_factory.mktemp("kept") / "cache"
    settings = SurgvqaSettings(metrics="2026", scoring=models)
    ctx = SummaryContext.of(settings=settings, output=OutputSettings(cache_dir=cache))
    questions = workload(N_KEPT)
    outcomes = [outcome(k, *q) for k, q in enumerate(questions)]
    warm_up = SummaryContext.of(settings=settings, output=OutputSettings(use_cache=False))
    score_outcomes(outcomes[:2], warm_up)  # import the libraries, as the other test

    with measured() as cold:
        scored = score_outcomes(outcomes, ctx)
    loads = []
    real_load = SemanticScorer.load
    SemanticScorer.load = lambda self: loads.append(self) or real_load(self)  # type: ignore
    try:

        def run() -> list[Outcome]:
            with measured() as usage:
                again = score_outcomes(outcomes, ctx)
            run.usage = usage  # type: ignore[attr-defined]
            return again

        warm_scored = benchmark.pedantic(run, rounds=1, iterations=1)
    finally:
        SemanticScorer.load = real_load  # type: ignore[method-assign]
    warm = run.usage  # type: ignore[attr-defined]
    pickled = cache.parent / "outcomes.pickle"
    pickled.write_bytes(pickle.dumps(outcomes))
    child = subprocess.run(
        [sys.executable, "-c", WARM_CHILD, str(roberta), str(nli), str(cache), str(pickled)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    fresh = json.loads(child.stdout.strip().splitlines()[-1])
    size = sum(p.stat().st_size for p in (cache / "scores").iterdir())
    print(f"\n{describe(questions)}; score cache {size / 1e6:.1f} MB")
    print(cold.line("cold: BERTScore + NLI scored and kept (models loaded inside)", N_KEPT))
    print(warm.line("warm: every score read back, this process", N_KEPT))
    print(f"warm in a fresh process as a rerun's controller (torch imported inside, for the "
          f"device in the key): {fresh['wall_s']:.2f} s")  # fmt: skip
    print(f"cold {cold.wall_s:.1f} s; warm {warm.wall_s:.3f} s in process "
          f"({warm.wall_s / cold.wall_s:.2%} of cold), {fresh['wall_s']:.2f} s fresh "
          f"({fresh['wall_s'] / cold.wall_s:.2%}); goal <= 1%")  # fmt: skip
    cold_scores = [json.dumps(o.scores) for o in scored]
    assert not loads
    assert [json.dumps(o.scores) for o in warm_scored] == cold_scores
    assert fresh["scores"] == cold_scores and not fresh["torch_before"]


def test_text_metrics_cost(benchmark, questions) -> None:
    from support.contract.runner import CallLog, outcomes_of
    from support.evaluations.surgvqa.rouge import rouge_scores
    from support.evaluations.surgvqa.spec import SurgvqaSettings
    from support.evaluations.surgvqa.task import SurgvqaEvaluation
    from support.types import Case

    evaluation = SurgvqaEvaluation([], [], SurgvqaSettings(metrics="2026"))
    cases = [
        Case(
            f"vqa-case{k:05d}",
            "surgvqa",
            {"category": "vqa", "case": f"case{k:05d}", "answers": refs, "kind": kind},
            {"category": "vqa", "kind": kind},
            cluster=f"video-{k % 50}",
        )
        for k, (kind, refs, _) in enumerate(questions)
    ]
    answers = [a for _, _, a in questions]
    rouge_scores(["warm up"], "warm up")  # rouge-score's stemmer and tokenizer

    def run() -> list[Outcome]:
        with measured() as usage:
            out = [
                outcomes_of(case, "m", evaluation.score_vqa(case, answer), CallLog())[0]
                for case, answer in zip(cases, answers, strict=True)
            ]
        run.usage = usage  # type: ignore[attr-defined]
        return out

    scored = benchmark.pedantic(run, rounds=1, iterations=1)
    usage = run.usage  # type: ignore[attr-defined]
    with measured() as rouge:
        for _, refs, answer in questions:
            rouge_scores(refs, answer)
    print(f"\n{describe(questions)}")
    print(usage.line("BLEU + ROUGE + yes/no (workers' score_vqa)", len(scored)))
    print(f"of which ROUGE alone: {rouge.wall_s:.1f} s ({rouge.wall_s / usage.wall_s:.0%})")
    assert len(scored) == N_ANSWERS
    assert all(0.0 <= o.scores["rougeL"] <= 1.0 and 0.0 <= o.scores["bleu"] <= 1.0 for o in scored)
