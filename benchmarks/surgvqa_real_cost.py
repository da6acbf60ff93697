"""The real SurgVU 2026 scoring models' cost per 1,000 answers on CPU, measured on random weights.

    python benchmarks/surgvqa_real_cost.py [--questions 60] [--threads N] [--models-dir DIR]

The official category-2 evaluator scores each answer with roberta-large (BERTScore, layer 17) and
cross-encoder/nli-deberta-v3-base (NLI). Neither can be downloaded here, and their cost does not
depend on their weight values, only on their shapes and on the tokens they read. So this script
builds both architectures at their real sizes in code with random weights (RobertaModel with
roberta-large's config, 355 M parameters; DebertaV2ForSequenceClassification with
deberta-v3-base's config and three labels, 184 M), saves them with the tiny stand-ins' tokenizers
(support/doubles/tiny_scorers.py: RobertaTokenizer and DebertaV2Tokenizer, the real classes), and
times `SemanticScorer.score` per question (one bert_score call and one CrossEncoder.predict a
question, as the official code) after a warm-up. The result is extrapolated to 1,000 answers.

Token counts matter, and the stand-ins' vocabularies are small: a word outside their corpus splits
into many pieces. The inputs are therefore built from words whose pieces are known, so that each
text reads as many tokens in both tokenizers as real English of its length would in the real ones
(TOKENS_PER_WORD, about roberta-large's byte-level BPE on English; deberta-v3's SentencePiece is
close to it): references of 8-25 words, answers of 5-40 words, drawn uniformly. The token counts
fed are measured and printed. The texts are word salad; the models' cost does not read meaning.

Printed: the machine (cores, torch threads, load average, the CPU that other processes used during
the timing), each model's load time, seconds per question (mean, median, p90) split into BERTScore
and NLI, seconds per 1,000 answers, CPU seconds, and the peak RSS (whole process, and its growth
over the RSS before the models loaded). GPU cost is not measured here (no device).

The helpers `measured` (wall, CPU, peak RSS, others' load of a timed block) are also used by
benchmarks/test_surgvqa_semantic_cost.py.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the repository's `support` package
    sys.path.insert(0, str(REPO))

TOKENS_PER_WORD = 1.3  # roberta-large's BPE on English prose (tokens a word)
REFERENCE_WORDS = (8, 25)  # words of a reference, drawn uniformly (inclusive)
ANSWER_WORDS = (5, 40)  # words of an answer
N_REFERENCES = 5  # references a question, as SurgVU
ATTEMPTS = 50  # random texts tried for one of the right token counts
# words of surgical answers outside the stand-ins' corpus; some split into more pieces in the
# NLI stand-in's unigram vocabulary than in the BPE one, which lets `sized_text` match both counts
EXTRA_WORDS = ["ureter", "retracting", "suturing", "ovary", "appears", "after", "while",
               "artery", "dissecting", "peritoneum", "camera", "procedure", "bladder", "vein",
               "near"]  # fmt: skip

# roberta-large's config.json (the hub's), less what RobertaConfig defaults to anyway
ROBERTA_LARGE = {
    "vocab_size": 50265,
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "max_position_embeddings": 514,
    "type_vocab_size": 1,
    "layer_norm_eps": 1e-5,
    "bos_token_id": 0,
    "pad_token_id": 1,
    "eos_token_id": 2,
}
# microsoft/deberta-v3-base's config.json, as cross-encoder/nli-deberta-v3-base extends it
DEBERTA_V3_BASE = {
    "vocab_size": 128100,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "type_vocab_size": 0,
    "relative_attention": True,
    "position_buckets": 256,
    "max_relative_positions": -1,
    "norm_rel_ebd": "layer_norm",
    "share_att_key": True,
    "pos_att_type": ["p2c", "c2p"],
    "position_biased_input": False,
    "layer_norm_eps": 1e-7,
    "pad_token_id": 0,
}
NLI_LABELS = ("contradiction", "entailment", "neutral")


# ---- measuring a block ----------------------------------------------------------------------
def _proc_kb(field_name: str) -> int | None:
    """A field of /proc/self/status in kB (VmRSS, VmHWM); None off Linux."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(rf"^{field_name}:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) if found else None


def _reset_peak() -> bool:
    """Reset the process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0); False if not."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _busy_s() -> float | None:
    """CPU seconds all cores of the machine have been busy since boot (/proc/stat)."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    ticks = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    """What a timed block cost: `wall_s`, `cpu_s` (this process), `peak_rss_mb` (the process's
    peak during the block; since start where it cannot be reset, `peak_reset` False),
    `rss_before_mb`, `others_cores` (mean cores busy with other processes during the block), and
    the 1-minute load average before and after."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    rss_before_mb: float = 0.0
    peak_reset: bool = False
    others_cores: float | None = None
    load_before: float = 0.0
    load_after: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rss_growth_mb(self) -> float:
        return self.peak_rss_mb - self.rss_before_mb

    def line(self, label: str, n: int) -> str:
        """One summary line for `n` answers."""
        others = "?" if self.others_cores is None else f"{self.others_cores:.2f}"
        peak = "peak RSS" if self.peak_reset else "peak RSS (since start)"
        return (
            f"{label}: {n:,} answers in {self.wall_s:.1f} s wall ({n / self.wall_s:,.1f} "
            f"answers/s, {1000 * self.wall_s / n:.2f} ms an answer), {self.cpu_s:.1f} s CPU; "
            f"{peak} {self.peak_rss_mb:,.0f} MB (+{self.rss_growth_mb:,.0f} MB over "
            f"{self.rss_before_mb:,.0f}); machine: {os.cpu_count()} cores, load "
            f"{self.load_before:.2f} -> {self.load_after:.2f}, other processes busy {others} "
            "cores on average"
        )


@contextmanager
def measured() -> Iterator[Usage]:
    """Measure the block: wall and CPU time, peak RSS (reset at entry where Linux allows; torch's
    memory is outside tracemalloc's view, RSS sees it) and what other processes used meanwhile."""
    import gc

    gc.collect()
    usage = Usage(load_before=os.getloadavg()[0])
    usage.peak_reset = _reset_peak()
    rss = _proc_kb("VmRSS")
    if rss is None:  # not Linux: the lifetime peak is all there is
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    usage.rss_before_mb = rss / 1024
    busy0, cpu0, t0 = _busy_s(), time.process_time(), time.perf_counter()
    try:
        yield usage
    finally:
        usage.wall_s = time.perf_counter() - t0
        usage.cpu_s = time.process_time() - cpu0
        busy1 = _busy_s()
        if busy0 is not None and busy1 is not None:
            usage.others_cores = max(busy1 - busy0 - usage.cpu_s, 0.0) / usage.wall_s
        peak = _proc_kb("VmHWM")
        if peak is None:
            import resource

            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        usage.peak_rss_mb = peak / 1024
        usage.load_after = os.getloadavg()[0]


class Timed:
    """A callable that adds the wall seconds its calls take to `seconds`."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


# ---- the real-size models ---------------------------------------------------------------------
def build_models(out: Path, tokenizers: tuple[Path, Path]) -> tuple[Path, Path]:
    """Random-weight roberta-large and nli-deberta-v3-base under `out` (built once), each saved
    with the matching stand-in tokenizer from `tokenizers` (roberta's folder, the NLI's)."""
    from support.storage.files import build_once

    def roberta(folder: Path) -> None:
        import torch
        from transformers import AutoTokenizer, RobertaConfig, RobertaModel

        torch.manual_seed(0)
        RobertaModel(RobertaConfig(**ROBERTA_LARGE)).eval().save_pretrained(folder)
        AutoTokenizer.from_pretrained(tokenizers[0]).save_pretrained(folder)

    def nli(folder: Path) -> None:
        import torch
        from transformers import AutoTokenizer, DebertaV2Config, DebertaV2ForSequenceClassification

        config = DebertaV2Config(
            **DEBERTA_V3_BASE,
            id2label=dict(enumerate(NLI_LABELS)),
            label2id={label: i for i, label in enumerate(NLI_LABELS)},
        )
        torch.manual_seed(0)
        DebertaV2ForSequenceClassification(config).eval().save_pretrained(folder)
        AutoTokenizer.from_pretrained(tokenizers[1]).save_pretrained(folder)

    return build_once(out / "roberta-large-random", roberta), build_once(
        out / "nli-deberta-v3-base-random", nli
    )


def _build_in_child(out: str, tokenizers: tuple[str, str]) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    build_models(Path(out), (Path(tokenizers[0]), Path(tokenizers[1])))


# ---- inputs of realistic token counts -------------------------------------------------------
def _piece_counts(tokenizers: Sequence[Any], words: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """Each word's tokens in each tokenizer when it follows a space (mid-sentence)."""
    return {
        w: tuple(len(tok.tokenize("a " + w)) - len(tok.tokenize("a")) for tok in tokenizers)
        for w in words
    }


def sized_text(rng: random.Random, pieces: dict[str, tuple[int, ...]], target: int) -> str:
    """Random words from `pieces` whose tokens add up to `target` in every tokenizer (up to
    ATTEMPTS tries of random words that overshoot no count; the closest kept)."""
    words = list(pieces)
    best: list[str] = []
    best_miss = None
    for _ in range(ATTEMPTS):
        left = [target] * len(pieces[words[0]])
        out: list[str] = []
        # words that overshoot no tokenizer's count
        while fits := [w for w in words if all(map(int.__le__, pieces[w], left))]:
            word = rng.choice(fits)
            left = [a - c for a, c in zip(left, pieces[word], strict=True)]
            out.append(word)
        if best_miss is None or sum(left) < best_miss:
            best, best_miss = out, sum(left)
        if best_miss == 0:
            break
    return " ".join(best)


def questions(
    n: int, tokenizers: Sequence[Any], seed: int = 0
) -> list[tuple[str, list[str], int, list[int]]]:
    """`n` questions: (answer, references, the answer's words at TOKENS_PER_WORD, the
    references' words)."""
    from support.doubles.tiny_scorers import corpus

    vocab = sorted({w.strip(".,?!").lower() for line in corpus() for w in line.split()} - {""})
    vocab += EXTRA_WORDS  # outside the stand-ins' corpus: more pieces in deberta's vocabulary
    pieces = _piece_counts(tokenizers, vocab)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ref_words = [rng.randint(*REFERENCE_WORDS) for _ in range(N_REFERENCES)]
        answer_words = rng.randint(*ANSWER_WORDS)
        refs = [sized_text(rng, pieces, round(TOKENS_PER_WORD * w)) for w in ref_words]
        answer = sized_text(rng, pieces, round(TOKENS_PER_WORD * answer_words))
        out.append((answer, refs, answer_words, ref_words))
    return out


def token_stats(tok: Any, texts: Sequence[str]) -> str:
    """Tokens of `texts` without special tokens: mean (min-max)."""
    counts = [len(tok.tokenize(t)) for t in texts]
    return f"{statistics.mean(counts):.1f} ({min(counts)}-{max(counts)})"


# ---- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python benchmarks/surgvqa_real_cost.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--questions", type=int, default=60, help="questions timed (default 60)")
    ap.add_argument("--warmup", type=int, default=3, help="questions scored before timing")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    ap.add_argument(
        "--models-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "vlmbench-real-size-scorers",
        help="where the random real-size models are built once (~2.2 GB)",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.questions < 1 or args.warmup < 0:
        ap.error("--questions must be >= 1 and --warmup >= 0")
    if args.threads is not None and args.threads < 1:
        ap.error(f"--threads {args.threads}: expected a whole number >= 1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from support.doubles.tiny_scorers import ensure_scorers

    tiny = ensure_scorers(args.models_dir / "stand-ins")
    t0 = time.perf_counter()
    # built in a child process, so that this one's RSS holds no copy of them
    child = multiprocessing.get_context("spawn").Process(
        target=_build_in_child, args=(str(args.models_dir), (str(tiny[0]), str(tiny[1])))
    )
    child.start()
    child.join()
    if child.exitcode != 0:
        print(f"building the models failed (exit {child.exitcode})", file=sys.stderr)
        return 1
    roberta_dir, nli_dir = build_models(args.models_dir, tiny)  # built: only the paths
    print(f"models: {roberta_dir}, {nli_dir} (ready in {time.perf_counter() - t0:.1f} s)")

    import torch
    from transformers import AutoTokenizer

    from support.evaluations.surgvqa.semantic import SemanticScorer, find_models

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    tokenizers = [AutoTokenizer.from_pretrained(d) for d in (roberta_dir, nli_dir)]
    work = questions(args.warmup + args.questions, tokenizers, args.seed)
    timed = work[args.warmup :]
    answers = [a for a, _, _, _ in timed]
    refs = [r for _, rs, _, _ in timed for r in rs]
    print(
        f"inputs ({args.questions} questions, {N_REFERENCES} references each): answer words "
        f"{statistics.mean(w for *_, w, _ in timed):.1f}, reference words "
        f"{statistics.mean(w for *_, ws in timed for w in ws):.1f} (uniform {ANSWER_WORDS} and "
        f"{REFERENCE_WORDS}), at {TOKENS_PER_WORD} tokens a word"
    )
    for name, tok in zip(("roberta BPE", "deberta unigram"), tokenizers, strict=True):
        print(
            f"  {name} tokens fed, without special tokens: an answer {token_stats(tok, answers)}, "
            f"a reference {token_stats(tok, refs)}"
        )

    models = find_models(str(roberta_dir), str(nli_dir), baseline="roberta-large")
    scorer = SemanticScorer(models)
    with measured() as loading:
        scorer.load()
    params = {
        "bertscore": sum(p.numel() for p in scorer._bert._model.parameters()),
        "nli": sum(p.numel() for p in scorer._nli.parameters()),
    }
    print(
        f"loaded in {loading.wall_s:.1f} s: BERTScore model {params['bertscore'] / 1e6:.0f} M "
        f"parameters (layers 1-{models.layers} of 24 kept, as bert_score), NLI model "
        f"{params['nli'] / 1e6:.0f} M (their weights are memory-mapped: RSS counts them once "
        "read, in the peak below)"
    )
    for answer, rs, _, _ in work[: args.warmup]:
        scorer.score(answer, rs)
    bert = scorer._bert.score = Timed(scorer._bert.score)
    nli = scorer._nli.predict = Timed(scorer._nli.predict)
    per_question: list[float] = []
    with measured() as scoring:
        for answer, rs, _, _ in timed:
            start = time.perf_counter()
            scorer.score(answer, rs)
            per_question.append(time.perf_counter() - start)
    n = len(timed)
    q = statistics.quantiles(per_question, n=10) if n > 1 else per_question * 9
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads "
        f"({'--threads' if args.threads else 'torch default'}), {os.cpu_count()} cores"
    )
    print(
        f"per question: mean {scoring.wall_s / n:.2f} s, median "
        f"{statistics.median(per_question):.2f} s, p90 {q[8]:.2f} s; "
        f"BERTScore {bert.seconds / n:.2f} s, NLI {nli.seconds / n:.2f} s, "
        f"the rest {(scoring.wall_s - bert.seconds - nli.seconds) / n:.3f} s"
    )
    print(
        f"per 1,000 answers on CPU: {1000 * scoring.wall_s / n:,.0f} s "
        f"({1000 * scoring.wall_s / n / 60:.1f} min): BERTScore {1000 * bert.seconds / n:,.0f} s, "
        f"NLI {1000 * nli.seconds / n:,.0f} s; CPU {1000 * scoring.cpu_s / n:,.0f} s"
    )
    print(scoring.line("real-size scoring", n))
    print(
        f"peak RSS: {max(loading.peak_rss_mb, scoring.peak_rss_mb):,.0f} MB with both models "
        f"loaded (process RSS before loading {loading.rss_before_mb:,.0f} MB)"
    )
    print("GPU: unmeasured (no device on this machine)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
