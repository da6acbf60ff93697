"""surgvqa's scorer files checked at configure (issue 54, "Hostile input III", item 6/7).

The BERTScore and NLI model folders and BERTScore's rescale baseline, which options name, load
only once every answer is in; a file that cannot work used to fail there, at the session's end,
reported as a bug of the suite. Now (support/evaluations/surgvqa/scorer_files.py): a model folder
that cannot load (a pickle `.bin` that torch.load(weights_only=True) refuses, a config.json nested
100,000 deep, a truncated safetensors file) or a baseline row that cannot rescale (b = 1 divides by
zero, nan, inf, a missing or unparseable row) is a usage error (exit 4) naming the option, the
file and the row or field, before any request is sent: two child runs of the quick subset show it
end to end with a scripted model that marks every call; the other triggers are checked at
configure in-process. What only loading shows fails at scoring time as a ScorerInputError naming
the option and the folder, which the terminal reports as that input's fault.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from support.contract.evaluation import OptionError
from support.evaluations.surgvqa.semantic import BERTSCORE_ID, shipped_baseline
from support.evaluations.surgvqa.spec import configure
from support.settings import OutputSettings, RunSettings

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bert_score") is None
    or importlib.util.find_spec("sentence_transformers") is None,
    reason="the surgvu26 extra (bert-score, sentence-transformers) is not installed",
)

BERT, NLI, BASELINE = (
    "--surgvqa-bertscore-model",
    "--surgvqa-nli-model",
    "--surgvqa-bertscore-baseline",
)
LAYER = 17  # roberta-large's, bert_score's table: the baseline row rescaled by
MARKER = "SCORER_CHECKS_CALLED"  # env: the file the scripted model writes when called
# the scripted model of the child runs: it answers, and says it was called
MARKED_MODEL = f"""
import os
from pathlib import Path


def answer(request):
    Path(os.environ["{MARKER}"]).write_text("called")
    return "yes"
"""


SYSTEM = f"{os.system.__module__}.system"  # posix.system: what Evil's pickle calls


class Evil:
    """Pickled, it calls os.system when loaded: what torch.load(weights_only=True) refuses."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo pwned",))


# ---- scorer files -------------------------------------------------------------------------------
def safetensors(tensors: dict[str, tuple[str, list[int], int]] | None = None) -> bytes:
    """A safetensors file: name -> (dtype, shape, bytes of data), the data zeros."""
    header, offset = {}, 0
    for name, (dtype, shape, size) in (tensors or {}).items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    head = json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + bytes(offset)


def model_folder(
    path: Path, config: str | None = None, weights: dict[str, bytes] | None = None
) -> Path:
    """A model folder: config.json (default: a roberta's) and weights files (default: an empty
    model.safetensors, which the checks accept; loading would give random weights)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(config or json.dumps({"model_type": "roberta"}))
    for name, data in (weights or {"model.safetensors": safetensors()}).items():
        (path / name).write_bytes(data)
    return path


def torch_zip(path: Path, pickled: bytes) -> bytes:
    """torch.save's zip layout (archive/data.pkl, archive/version) around `pickled`."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickled)
        z.writestr("archive/version", "3\n")
    return path.read_bytes()


def baseline_tsv(path: Path, bad: str | None = None, row: int = LAYER) -> Path:
    """The shipped roberta-large baseline with line `row + 2` (the row of layer `row`) replaced
    by `bad` (None: kept; "" : the file ends before it)."""
    lines = shipped_baseline(BERTSCORE_ID).read_text().splitlines()  # type: ignore[union-attr]
    if bad == "":
        lines = lines[: row + 1]
    elif bad is not None:
        lines[row + 1] = bad
    path.write_text("\n".join(lines) + "\n")
    return path


def settings_of(**values: Any) -> Any:
    """surgvqa's configure on option values by dest (surgvqa_<name>), --surgvqa-metrics 2026."""
    return configure(
        {"surgvqa_metrics": "2026"} | {f"surgvqa_{k}": v for k, v in values.items()}, RunSettings()
    )


@pytest.fixture(scope="module")
def scorers(shared_cache: Path) -> tuple[Path, Path]:
    """The tiny stand-ins of both scoring models (BERTScore's, the NLI's), built once a run."""
    from support.doubles.tiny_scorers import ensure_scorers

    return ensure_scorers(shared_cache)


@pytest.fixture
def nli(tmp_path: Path) -> Path:
    """An NLI model folder the checks pass (loading it would give random weights)."""
    return model_folder(tmp_path / "nli")


def refused(bert: Path, nli: Path, **values: Any) -> OptionError:
    with pytest.raises(OptionError) as err:
        settings_of(bertscore_model=str(bert), nli_model=str(nli), **values)
    return err.value


# ---- child runs: exit 4, nothing sent -----------------------------------------------------------
@pytest.fixture
def child(run_suite, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """child(*args) -> (exit code, output, results folder, called): the surgvqa quick subset with
    a scripted model that writes a marker file when called (called: whether it was)."""
    pytester.makepyfile(marked_model=MARKED_MODEL)
    marker = tmp_path / "called"
    monkeypatch.setenv(MARKER, str(marker))

    def _run(*args: str):
        result, results = run_suite(
            "surgvqa",
            "--model=scripted:marked_model:answer",
            "-m",
            "quick",
            "--surgvqa-metrics=2026",
            *args,
        )
        text = result.stdout.str() + result.stderr.str()
        return result.ret, text, results / "surgvqa" / "r1", marker.exists()

    return _run


@pytest.mark.slow
def test_a_pickle_bin_model_stops_the_run_at_configure(child, tmp_path: Path, nli: Path) -> None:
    bert = model_folder(
        tmp_path / "pickled",
        weights={"pytorch_model.bin": pickle.dumps({"embeddings.weight": Evil()}, protocol=2)},
    )
    ret, text, out, called = child(f"{BERT}={bert}", f"{NLI}={nli}", f"{BASELINE}=roberta-large")
    assert ret == pytest.ExitCode.USAGE_ERROR, text[-3000:]
    assert f"{BERT}: {bert / 'pytorch_model.bin'}: " in text, text[-3000:]
    assert f"{SYSTEM}" in text  # what loading it would have run
    assert "weights_only=True" in text and "bug of the suite" not in text
    assert not called and not (out / "raw_results.jsonl").exists()


@pytest.mark.slow
def test_a_baseline_row_of_ones_stops_the_run_at_configure(
    child, tmp_path: Path, scorers: tuple[Path, Path]
) -> None:
    """With models that load (the tiny stand-ins), so that only the baseline is wrong: rescaled
    by b = 1, BERTScore divides by zero (the run used to end with +-inf in summary.csv)."""
    tsv = baseline_tsv(tmp_path / "ones.tsv", f"{LAYER},1.0,1.0,1.0")
    bert, nli = scorers
    ret, text, out, called = child(
        f"{BERT}={bert}", f"{NLI}={nli}", f"{BASELINE}={tsv}", f"--surgvqa-bertscore-layers={LAYER}"
    )
    assert ret == pytest.ExitCode.USAGE_ERROR, text[-3000:]
    assert f"{BASELINE}: {tsv}: line {LAYER + 2} (the row of layer {LAYER}), field P: 1.0" in text
    assert "divides by zero" in text and "bug of the suite" not in text
    assert not called and not (out / "raw_results.jsonl").exists()


# ---- model folders at configure ---------------------------------------------------------------
def test_a_config_json_nested_100000_deep_is_named(tmp_path: Path, nli: Path) -> None:
    deep = model_folder(tmp_path / "deep", config='{"a":' * 100_000 + "1" + "}" * 100_000)
    err = refused(deep, nli, bertscore_baseline="roberta-large")
    assert err.option == BERT and str(err).startswith(f"{BERT}: {deep / 'config.json'}: ")
    assert "RecursionError" in str(err)
    shallow = json.dumps({"model_type": "roberta", "x": json.loads("[" * 70 + "]" * 70)})
    err = refused(
        model_folder(tmp_path / "nested", config=shallow), nli, bertscore_baseline="roberta-large"
    )
    assert "nested 71 deep, past 64" in str(err)
    for k, (config, why) in enumerate(
        (
            ("[1]", "a JSON list"),
            ("{}", '"model_type" is None'),
            ("{'model_type': 1}", "not UTF-8 JSON"),
        )
    ):
        err = refused(
            model_folder(tmp_path / f"config{k}", config=config),
            nli,
            bertscore_baseline="roberta-large",
        )
        assert err.option == BERT and why in str(err), str(err)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")  # torch's, protocol 5
def test_a_bin_is_read_as_torch_load_weights_only_reads_it(tmp_path: Path, nli: Path) -> None:
    import torch

    ok = model_folder(tmp_path / "saved", weights={})
    torch.save(
        {"w": torch.zeros(2), "p": torch.nn.Parameter(torch.ones(1))}, ok / "pytorch_model.bin"
    )
    legacy = model_folder(tmp_path / "legacy", weights={})
    torch.save(
        {"w": torch.zeros(2, dtype=torch.bfloat16)},
        legacy / "pytorch_model.bin",
        _use_new_zipfile_serialization=False,
    )
    for folder in (ok, legacy):  # what torch.load(weights_only=True) loads passes
        torch.load(folder / "pytorch_model.bin", weights_only=True)
        got = settings_of(
            bertscore_model=str(folder), nli_model=str(nli), bertscore_baseline="roberta-large"
        )
        assert got.scoring is not None and got.scoring.bertscore == str(folder)

    zipped = torch_zip(tmp_path / "z.bin", pickle.dumps({"w": Evil()}, protocol=2))
    garbage = b"\x80\x02garbage that is no pickle"
    newer = pickle.dumps({"w": 1}, protocol=5)  # opcodes the weights_only unpickler lacks
    cases = {
        "zip": (zipped, f"unsupported GLOBAL {SYSTEM}"),
        "garbage": (garbage, "Unsupported operand 103"),
        "protocol5": (newer, "Unsupported operand 149"),
    }
    for name, (data, why) in cases.items():
        folder = model_folder(tmp_path / name, weights={"pytorch_model.bin": data})
        with pytest.raises(Exception):  # noqa: B017 (torch refuses it too, in its own words)
            torch.load(folder / "pytorch_model.bin", weights_only=True)
        err = refused(folder, nli, bertscore_baseline="roberta-large")
        text = str(err)
        assert err.option == BERT and text.startswith(f"{BERT}: {folder / 'pytorch_model.bin'}: ")
        assert why in text, (name, text)


def test_a_truncated_or_broken_safetensors_file_is_named(tmp_path: Path, nli: Path) -> None:
    whole = safetensors({"a": ("F32", [2, 3], 24), "b": ("BF16", [4], 8)})
    good = model_folder(tmp_path / "good", weights={"model.safetensors": whole})
    assert (
        settings_of(
            bertscore_model=str(good), nli_model=str(nli), bertscore_baseline="roberta-large"
        ).scoring
        is not None
    )
    cases = {
        "cut": (whole[:-5], "a truncated download"),
        "header": (whole[:20], "not a safetensors file"),
        "shape": (safetensors({"a": ("F32", [2, 3], 20)}), "not a safetensors file"),
    }
    for name, (data, why) in cases.items():
        folder = model_folder(tmp_path / name, weights={"model.safetensors": data})
        err = refused(folder, nli, bertscore_baseline="roberta-large")
        assert err.option == BERT and str(err).startswith(
            f"{BERT}: {folder / 'model.safetensors'}: "
        )
        assert why in str(err), (name, str(err))
    err = refused(
        good,
        model_folder(tmp_path / "nli-cut", weights={"model.safetensors": whole[:-1]}),
        bertscore_baseline="roberta-large",
    )
    assert err.option == NLI and str(tmp_path / "nli-cut" / "model.safetensors") in str(err)


def test_a_layer_past_the_models_depth_is_named(tmp_path: Path, nli: Path) -> None:
    shallow = model_folder(
        tmp_path / "two-layers",
        config=json.dumps({"model_type": "roberta", "num_hidden_layers": 2}),
    )
    err = refused(shallow, nli, bertscore_baseline="roberta-large")
    assert err.option == "--surgvqa-bertscore-layers"
    assert f"{shallow / 'config.json'}: layer 17 asked for, but the model has 2" in str(err)


# ---- the rescale baseline at configure ----------------------------------------------------------
BAD_ROWS = {  # the row of layer 17 (line 19): what it says -> what the error says
    f"{LAYER},0.8,nan,0.8": "field R: nan is not finite",
    f"{LAYER},0.8,0.8,inf": "field F: inf is not finite",
    f"{LAYER},0.8,0.8,-1e999": "field F: -1e999 is not finite",
    f"{LAYER},0.8,0.8,1.5": "field F: 1.5: the rescale (x - b) / (1 - b) needs a baseline b",
    f"{LAYER},0.8,abc,0.8": "field R: 'abc' is not a number",
    f"{LAYER},0.8,0.8": "3 fields, not 4",
    f"{LAYER},0.8,0.8,": "field F: '' is not a number",
    f"{LAYER + 1},0.8,0.8,0.8": "field LAYER: 18, not 17",
}


def test_a_baseline_row_that_cannot_rescale_is_named_with_its_line_and_field(
    tmp_path: Path, nli: Path
) -> None:
    bert = model_folder(tmp_path / "bert")
    for k, (row, why) in enumerate(BAD_ROWS.items()):
        tsv = baseline_tsv(tmp_path / f"bad{k}.tsv", row)
        err = refused(bert, nli, bertscore_baseline=str(tsv), bertscore_layers=LAYER)
        assert err.option == BASELINE, row
        assert str(err).startswith(f"{BASELINE}: {tsv}: line {LAYER + 2} (the row of layer 17)")
        assert why in str(err), (row, str(err))
    elsewhere = baseline_tsv(tmp_path / "nan-at-3.tsv", "3,nan,0.5,0.5", row=3)  # any row
    assert "line 5 (the row of layer 3), field P: nan" in str(
        refused(bert, nli, bertscore_baseline=str(elsewhere), bertscore_layers=LAYER)
    )


def test_a_baseline_without_the_layers_row_or_a_header_is_named(tmp_path: Path, nli: Path) -> None:
    bert = model_folder(tmp_path / "bert")
    short = baseline_tsv(tmp_path / "short.tsv", "")  # rows of layers 0-16 only
    err = refused(bert, nli, bertscore_baseline=str(short), bertscore_layers=LAYER)
    assert err.option == BASELINE and str(short) in str(err)
    assert "no row for layer 17" in str(err) and "its 17 rows cover layers 0-16" in str(err)
    header_only = tmp_path / "header.tsv"
    header_only.write_text("LAYER,P,R,F\n")
    assert "no rows below the header" in str(
        refused(bert, nli, bertscore_baseline=str(header_only), bertscore_layers=LAYER)
    )
    headless = tmp_path / "headless.tsv"
    headless.write_text("".join(f"{k},0.5,0.5,0.5\n" for k in range(25)))
    assert "line 1: header '0,0.5,0.5,0.5'" in str(
        refused(bert, nli, bertscore_baseline=str(headless), bertscore_layers=LAYER)
    )
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    assert f"{empty}: empty" in str(
        refused(bert, nli, bertscore_baseline=str(empty), bertscore_layers=LAYER)
    )


def test_every_baseline_bert_score_ships_passes(tmp_path: Path, nli: Path) -> None:
    """The checks refuse no file bert-score ships (65 TSVs, each a row per layer)."""
    from support.evaluations.surgvqa.scorer_files import check_baseline

    shipped = shipped_baseline(BERTSCORE_ID).parent.parent  # type: ignore[union-attr]
    tsvs = sorted(shipped.glob("*/*.tsv"))
    assert len(tsvs) > 10
    for tsv in tsvs:
        rows = sum(1 for line in tsv.read_text().splitlines()[1:] if line.strip())
        check_baseline(tsv, rows - 1)  # its last layer
    bert = model_folder(tmp_path / "bert")
    got = settings_of(
        bertscore_model=str(bert),
        nli_model=str(nli),
        bertscore_baseline=str(baseline_tsv(tmp_path / "copy.tsv")),
        bertscore_layers=LAYER,
    )
    assert got.scoring is not None and got.scoring.layers == LAYER


def test_auto_leaves_a_broken_default_model_out_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, nli: Path
) -> None:
    """Under `auto` with no model option, a default model broken in the hub cache is left out
    (as a missing one), with the reason; asked for by an option, it is a usage error."""
    import huggingface_hub.constants

    from support.doubles.tiny_scorers import install_in_hub_cache

    hub = tmp_path / "hub"
    broken = model_folder(tmp_path / "broken", config='{"a":' * 100_000 + "}" * 100_000)
    install_in_hub_cache(hub, BERTSCORE_ID, broken)
    install_in_hub_cache(hub, "cross-encoder/nli-deberta-v3-base", nli)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    got = configure({}, RunSettings())
    assert got.scoring is None and got.left_out is not None
    assert BERT in got.left_out and "config.json" in got.left_out
    with pytest.raises(OptionError, match="RecursionError"):
        configure({"surgvqa_bertscore_model": BERTSCORE_ID}, RunSettings())


# ---- at scoring time: an input error, named as such -------------------------------------------
def test_a_model_failing_only_at_loading_is_an_input_error_naming_it(
    tmp_path: Path, nli: Path
) -> None:
    """A folder the checks pass that bert_score cannot load (its config.json leaves roberta's 12
    layers, layer 17 is asked for): score_outcomes raises a ScorerInputError naming the option
    and the folder at once, and the terminal says it is that input, not a bug of the suite."""
    from reports.evaluation_files import SummaryFailure
    from reports.result import EvaluationResult, RunResult
    from reports.terminal_summary import write_summary
    from support.contract.summary import SummaryContext
    from support.evaluations.surgvqa.semantic import ScorerInputError
    from support.evaluations.surgvqa.summary import score_outcomes
    from support.types import Outcome

    bert = model_folder(tmp_path / "twelve-layers")
    ctx = SummaryContext.of(
        settings=settings_of(
            bertscore_model=str(bert), nli_model=str(nli), bertscore_baseline="roberta-large"
        ),
        output=OutputSettings(cache_dir=tmp_path / "cache"),
    )
    refs = ["Yes", "Yes, it was."]
    outcome = Outcome(
        case_id="vqa-case001-m",
        evaluation="surgvqa",
        model="m",
        status="wrong",
        group={"category": "vqa", "kind": "open"},
        cluster="video-case001",
        scores={"bleu": 0.0},
        prediction={"answer": "yes"},
        params={"category": "vqa", "case": "case001", "answers": refs},
    )
    with pytest.raises(ScorerInputError) as err:
        score_outcomes([outcome] * 3, ctx)
    assert err.value.option == BERT and err.value.path == str(bert)
    assert str(err.value).startswith(f"{BERT}: {bert}: bert_score cannot load it: ")

    lines: list[str] = []

    class Terminal:
        class config:
            class option:
                verbose = 0

            class invocation_params:
                args = ()
                dir = tmp_path

        def write_line(self, line: str, **_: Any) -> None:
            lines.append(line)

        def write_sep(self, sep: str, title: str, **_: Any) -> None:
            lines.append(title)

    run = RunSettings(output=OutputSettings(results_dir=tmp_path / "results", run_id="r1"))
    bug = "RuntimeError: planted"
    failed = SummaryFailure.of(err.value)
    result = RunResult(
        evaluations=(
            EvaluationResult(
                "surgvqa", (), failure=failed.failure, failed_input=failed.failed_input
            ),
            EvaluationResult("pgt", (), failure=bug),
        )
    )
    write_summary(Terminal(), result, run)
    said = "\n".join(lines)
    assert f"surgvqa: its summary could not use an input: {BERT}: {bert}: " in said, said
    assert "surgvqa: its summary failed" not in said
    assert "pgt: its summary failed (RuntimeError: planted)" in said  # a real bug stays one
    assert said.count("This is a bug of the suite") == 1
