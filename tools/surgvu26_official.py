"""Run SurgVU 2026's official category-2 evaluator, unmodified, on a fixed set of answers.

The golden file of unit/evaluations/surgvqa/test_surgvqa_agreement.py is this script's output. The
official code is not in this repository: point --evaluation at the `evaluation/` folder of a
checkout of isi-challenges/surgvu26-category-2-eval-public and run this with a Python that has the
packages its Dockerfile installs (CPU torch, then requirements.txt unpinned: bert-score,
sentence-transformers, nltk, rouge-score, psutil). The models are the stand-ins of
support/doubles/tiny_scorers.py, installed in a Hugging Face cache under the official ids (their
--hub-cache), so evaluate.py loads
"roberta-large" and "cross-encoder/nli-deberta-v3-base" offline exactly as in its container:

    python -m support.doubles.tiny_scorers --out /tmp/ts --hub-cache /tmp/hf/hub
    python -m venv /tmp/official26 && /tmp/official26/bin/pip install torch==2.13.0 \\
        bert-score sentence-transformers nltk rouge-score psutil
    HF_HOME=/tmp/hf /tmp/official26/bin/python tools/surgvu26_official.py \\
        --evaluation CHECKOUT/evaluation --commit REV \\
        --out unit/evaluations/surgvqa/data/surgvu26_official.json

It lays the answers out as the grand-challenge platform gives them to the evaluator
(input/predictions.json with one job per case, input/<pk>/output/visual-context-response.json,
ground_truth/<case>.json; the layout of the repository's generate_test_input.py), points the
module's three folders at them and calls its `main()`: phase 1 (BLEU, ROUGE) in its process pool,
phase 2 (BERTScore, NLI) batched per case, metrics.json. Answers that are not strings crash the
official run (`normalize` calls str.translate), and so do empty ones (see ALONE), so each is run
alone afterwards and its error kept.
This script imports nothing from vlmbench (the official environment has none of its packages).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import traceback
from importlib import metadata
from pathlib import Path

# Reference sets: the official repository's mock case001, the write-up's "no" example (write-up
# 003), and answers in the style of the synthetic sample (support/evaluations/surgvqa/synthetic.py).
REFERENCES = {
    "instrument": [
        "Yes",
        "Yes, a surgical instrument was used.",
        "A surgical instrument was utilized.",
        "The procedure involved using a surgical instrument.",
        "There is clear evidence that a surgical instrument was used.",
    ],
    "needle_no": [
        "No",
        "No, a large needle driver was not used.",
        "A large needle driver was not used.",
        "No large needle driver was utilized.",
        "There is no indication a large needle driver was used.",
    ],
    "forceps_yes": [
        "Yes",
        "Yes, a cadiere forceps was used.",
        "A cadiere forceps was used.",
        "A cadiere forceps was utilized.",
        "There is clear evidence a cadiere forceps was used.",
    ],
    "tools_open": [
        "The tools used are a needle driver, a cadiere forceps and a monopolar curved scissor.",
        "A needle driver, a cadiere forceps and a monopolar curved scissor are used.",
        "Needle driver, cadiere forceps, monopolar curved scissor.",
        "The surgeon uses a needle driver, cadiere forceps and monopolar curved scissors.",
        "Three tools: needle driver, cadiere forceps, monopolar curved scissor.",
    ],
    "organ_open": [
        "The uterine horn.",
        "The uterine horn is being operated on.",
        "Uterine horn",
        "The procedure is on the uterine horn.",
        "It is the uterine horn.",
    ],
    "tip_up": [
        "A tip-up fenestrated grasper was used.",
        "Yes, the tip-up fenestrated grasper.",
        "Tip-up fenestrated grasper",
        "Yes",
        "The tip-up fenestrated grasper is visible.",
    ],
}
LONG = " ".join(["the needle driver was used"] * 130)  # 650 words: past 512 model tokens
CANDIDATES = {  # reference set -> answers
    "instrument": [
        "Yes",
        "yes",
        "Yes, a surgical instrument was used.",
        "No, no surgical instrument was used.",
        "A surgical instrument was not utilized.",
        "Sample answer for demonstration purposes.",
        "The procedure involved using a surgical instrument.",
        "It is unclear from the video.",
        "YES!!!",
        "Yes — a surgical instrument.",
    ],
    "needle_no": [
        "no",
        "No",
        "No.",
        "NO!",
        "No, a large needle driver was utilized.",
        "Yes, a large needle driver was used.",
        "There is no indication a large needle driver was used.",
        "A large needle driver was not used",
        "no no no no no no no no",
        "“No”",
    ],
    "forceps_yes": [
        "Yes, cadiere forceps were used.",
        "A cadiere forceps was used.",
        "Forceps.",
        "I cannot tell.",
        "The cadiere forceps is not visible.",
        "Yes\n\nA cadiere forceps was used in this clip.",
        "yes\tcadiere\tforceps",
        "<answer>Yes</answer>",
    ],
    "tools_open": [
        "A needle driver, a cadiere forceps and a monopolar curved scissor.",
        "needle driver",
        "The tools used are a needle driver and a force bipolar.",
        "Monopolar curved scissors, cadiere forceps, needle driver.",
        "No tools are used.",
        "The tools used are a needle driver, a cadiere forceps and a monopolar curved scissor.",
        LONG,
        "1. needle driver\n2. cadiere forceps\n3. monopolar curved scissor",
    ],
    "organ_open": [
        "The uterine horn.",
        "uterine horn",
        "The liver.",
        "It is the uterus.",
        "The uterine horn is being operated on by the surgeon.",
        "子宫角",
        "The organ is the uterine horn 🙂",
        "horn uterine the",
    ],
    "tip_up": [
        "A tip-up fenestrated grasper was used.",
        "tipup fenestrated grasper",
        "tip up fenestrated grasper",
        "Yes",
        "A grasper.",
        "The tip/up fenestrated grasper.",
    ],
}
EDGES = {  # hostile answers, scored against the "instrument" references
    "punctuation": "...",
    "control": "Yes\x00\x07 a surgical instrument",
    "html": "<p>Yes, a surgical&nbsp;instrument was used.</p>",
}
# answers run alone, each against the "instrument" references: the official run stops on them
# (a non-string in `normalize`; an empty one in bert_score, whose empty-sentence path calls
# `build_inputs_with_special_tokens`, which transformers 5 tokenizers no longer have)
ALONE = {
    "empty": "",
    "spaces": "   ",
    "newlines": "\n\n",
    "number": 3,
    "null": None,
    "list": ["Yes"],
    "object": {"answer": "Yes"},
}


def cases() -> list[dict]:
    """Every (case id, candidate, references), case ids in order case001, case002, ..."""
    rows = [(refs, c) for refs, cands in CANDIDATES.items() for c in cands]
    rows += [("instrument", c) for c in EDGES.values()]
    return [
        {"case_id": f"case{k:03d}", "references": REFERENCES[refs], "candidate": cand}
        for k, (refs, cand) in enumerate(rows, start=1)
    ]


def job(pk: str, case_id: str, answer: object) -> dict:
    """One platform job: the video's file name carries the case id, the answer is an output."""
    socket = lambda slug, path, **kind: {"slug": slug, "relative_path": path, **kind}  # noqa: E731
    return {
        "pk": pk,
        "inputs": [
            {
                "socket": socket("endoscopic-robotic-surgery-video", f"{case_id}.mp4"),
                "file": f"https://grand-challenge.org/media/x/{case_id}.mp4",
                "value": None,
            },
            {
                "socket": socket("visual-context-question", "visual-context-question.json"),
                "file": None,
                "value": "question",
            },
        ],
        "outputs": [
            {
                "socket": socket("visual-context-response", "visual-context-response.json"),
                "file": None,
                "value": answer,
            }
        ],
    }


def run_official(evaluate, rows: list[dict], work: Path) -> dict:
    """evaluate.main() on `rows` laid out under `work`; its metrics.json."""
    inp, out, truth = work / "input", work / "output", work / "ground_truth"
    for folder in (inp, out, truth):
        folder.mkdir(parents=True)
    jobs = []
    for k, row in enumerate(rows):
        pk = f"{k:08d}-0000-4000-8000-000000000000"
        (inp / pk / "output").mkdir(parents=True)
        (inp / pk / "output" / "visual-context-response.json").write_text(
            json.dumps(row["candidate"])
        )
        (truth / f"{row['case_id']}.json").write_text(json.dumps(row["references"]))
        jobs.append(job(pk, row["case_id"], row["candidate"]))
    (inp / "predictions.json").write_text(json.dumps(jobs))
    evaluate.INPUT_DIRECTORY, evaluate.OUTPUT_DIRECTORY = inp, out
    evaluate.GROUND_TRUTH_DIRECTORY = truth
    evaluate.main()
    return json.loads((out / "metrics.json").read_text())


def cpu_vendor() -> str:
    """/proc/cpuinfo's vendor_id ("AuthenticAMD", "GenuineIntel"), else "unknown"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


# what forces torch's float kernels below what the CPU offers: ATen's own dispatch, MKL's
# (matrix products) and oneDNN's; set, they make this machine another CPU as far as the bits go
DISPATCH_VARS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR",
                 "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # fmt: skip


def cpu_signature() -> str:
    """What picks the float kernels a model's values come from: the CPU's vendor, torch's CPU
    capability and any dispatch variable set ("AuthenticAMD AVX512", "GenuineIntel AVX2
    MKL_ENABLE_INSTRUCTIONS=AVX2"). The golden records it as `cpu`; the unit test asks for every
    bit only on a machine of the same signature."""
    import torch

    forced = [f"{name}={os.environ[name]}" for name in DISPATCH_VARS if os.environ.get(name)]
    return " ".join([cpu_vendor(), torch.backends.cpu.get_cpu_capability(), *forced])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--evaluation", required=True, type=Path, help="the checkout's evaluation/")
    ap.add_argument("--out", required=True, type=Path, help="the golden JSON file to write")
    ap.add_argument("--commit", default="", help="the checkout's commit, for the record")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(args.evaluation.resolve()))
    evaluate = importlib.import_module("evaluate")
    import torch  # the official environment's (evaluate.py imports it through bert_score)

    rows = cases()
    with tempfile.TemporaryDirectory() as tmp:
        metrics = run_official(evaluate, rows, Path(tmp) / "all")
        alone = {}
        for name, answer in ALONE.items():
            row = {"case_id": f"crash-{name}", "references": REFERENCES["instrument"],
                   "candidate": answer}  # fmt: skip
            try:
                got = run_official(evaluate, [row], Path(tmp) / name)
                alone[name] = {"candidate": answer, "error": None, "results": got["results"]}
            except Exception as exc:  # PredictionProcessingError (phase 1) or the model's error
                text = traceback.format_exception_only(type(exc), exc)[-1].strip()
                alone[name] = {"candidate": answer, "error": text}
    packages = ("bert-score", "sentence-transformers", "transformers", "torch", "nltk",
                "rouge-score", "numpy", "tokenizers")  # fmt: skip
    golden = {
        "evaluator": "isi-challenges/surgvu26-category-2-eval-public evaluation/evaluate.py",
        "commit": args.commit,
        "python": sys.version.split()[0],
        # the NLI logits' last bit depends on torch's CPU thread count (unit test's docstring)
        "torch_threads": torch.get_num_threads(),
        # and on the CPU's vendor and instruction set (the math library's kernels): the unit
        # test asks for every bit only on a machine of this signature
        "cpu": cpu_signature(),
        "packages": {p: metadata.version(p) for p in packages},
        "cases": rows,
        "metrics": {
            "results": sorted(metrics["results"], key=lambda r: r["case_id"]),
            "aggregates": metrics.get("aggregates"),
        },
        "alone": alone,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}: {len(rows)} cases, {len(alone)} answers run alone")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
