"""Tiny random-weight stand-ins of SurgVU 2026's scoring models, built in code, saved as the hub.

The official category-2 evaluator (isi-challenges/surgvu26-category-2-eval-public,
evaluation/evaluate.py) scores with `roberta-large` (BERTScore, layer 17 as bert_score's table)
and `cross-encoder/nli-deberta-v3-base` (NLI). Neither can be downloaded here, so the tests run
both the official code and vlmbench on these:

- `build_roberta(out)`: a RobertaModel of roberta-large's depth (24 layers, so bert_score's layer
  17 exists) but 32 wide, with the family's real tokenizer class (`RobertaTokenizer`: byte-level
  BPE, `<s>`/`</s>`/`<pad>`/`<unk>`/`<mask>`, 512 tokens) over a BPE vocabulary trained on CORPUS.
- `build_nli(out)`: a DebertaV2ForSequenceClassification shaped as deberta-v3-base (relative
  attention, p2c/c2p, 256 position buckets) but 2 layers 32 wide, three labels in the model card's
  order (0 contradiction, 1 entailment, 2 neutral), with `DebertaV2Tokenizer` (a unigram
  vocabulary of `▁`-prefixed pieces, [CLS]/[SEP]/[PAD]/[UNK]/[MASK]).

Weights are drawn from a fixed seed with a wide initializer (0.2), so that different sentences get
visibly different scores; the answers they give are meaningless. `install_in_hub_cache` lays a
folder out as the Hugging Face cache holds a download (models--org--name/snapshots/<rev>/,
refs/main), so that code asking for the official ids offline (the official evaluator unmodified,
vlmbench's defaults) finds the stand-ins.

    python -m support.doubles.tiny_scorers --out DIR [--hub-cache HF_HOME/hub]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from support.storage.files import build_once

VERSION = "v2"  # bump when a model or tokenizer changes: it names the cache folder
ROBERTA_ID = "roberta-large"  # the official BERTScore model
NLI_ID = "cross-encoder/nli-deberta-v3-base"  # the official NLI model
NLI_LABELS = ("contradiction", "entailment", "neutral")  # the model card's label order
MAX_TOKENS = 512  # model_max_length of both real tokenizers (tokens)
INIT_RANGE = 0.2  # weight init std: wide, so random outputs differ between sentences
REVISION = "0" * 40  # the commit name of the stand-ins' snapshot in a hub cache
_SHAPE = {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}

# Training text of the vocabularies: surgical VQA answers and questions, and plain English.
CORPUS = (
    "Yes, a needle driver was used. No, a large needle driver was not utilized.",
    "There is clear evidence a cadiere forceps was used. A monopolar curved scissor was used.",
    "The tools used are a needle driver, a force bipolar and a prograsp forceps.",
    "What organ is being operated on? The uterine horn is being operated on.",
    "Was a vessel sealer used during the surgery? Which tools are used in this clip?",
    "The surgeon cauterizes tissue with bipolar forceps. A clip applier and a stapler.",
    "suction irrigator, grasping retractor, tip-up fenestrated grasper, permanent cautery hook",
    "I cannot tell from the video. It is not visible. The answer is unclear to me.",
    "the a an and or of in on at to with by for from is are was were be been it this that",
    "0 1 2 3 4 5 6 7 8 9 one two three four five left right upper lower organ tissue blood",
)


def corpus() -> list[str]:
    return [line for text in CORPUS for line in (text, text.lower(), text.upper())]


def _pieces() -> list[tuple[str, float]]:
    """A unigram vocabulary: every printable ASCII character alone and after `▁`, then every
    corpus word after `▁`; scores rise with length, so whole words win over their letters."""
    chars = [chr(c) for c in range(33, 127)]
    seen: dict[str, float] = {"▁": -2.0}
    for ch in chars:
        seen.setdefault(ch, -10.0)
        seen.setdefault("▁" + ch, -9.0)
    for text in corpus():
        for word in text.split():
            for piece in (word, word.strip(".,?!")):
                if piece:
                    seen.setdefault("▁" + piece, -1.0 - 1.0 / len(piece))
    return list(seen.items())


def build_roberta(out: Path, seed: int = 0) -> Path:
    """The BERTScore stand-in: RobertaModel (24 layers, 32 wide) and RobertaTokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # ids 0-3 as roberta-large's vocab
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus(), trainer=trainer)
    state = bpe.model.__getstate__()
    model_state = json.loads(state.decode() if isinstance(state, bytes) else state)
    vocab = model_state["vocab"]
    merges = [tuple(m.split(" ") if isinstance(m, str) else m) for m in model_state["merges"]]
    tokenizer = RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=MAX_TOKENS)
    config = RobertaConfig(
        vocab_size=len(vocab),
        num_hidden_layers=24,  # roberta-large's depth: bert_score takes layer 17
        max_position_embeddings=MAX_TOKENS + 2,  # RoBERTa's positions start after the pad id
        type_vocab_size=1,
        initializer_range=INIT_RANGE,
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
        pad_token_id=vocab["<pad>"],
        **_SHAPE,
    )
    torch.manual_seed(seed)
    model = RobertaModel(config, add_pooling_layer=True).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # vocab.json and merges.txt too, as the hub's roberta-large has them: transformers 4's
    # RobertaTokenizer (bert_score asks for the slow one) reads only these
    bpe.model.save(str(out))
    return out


def build_nli(out: Path, seed: int = 0) -> Path:
    """The NLI stand-in: DebertaV2ForSequenceClassification (3 labels) and DebertaV2Tokenizer."""
    import torch
    from transformers import (
        DebertaV2Config,
        DebertaV2ForSequenceClassification,
        DebertaV2Tokenizer,
    )

    special = [("[PAD]", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[UNK]", 0.0)]  # ids 0-3
    vocab = special + _pieces() + [("[MASK]", 0.0)]
    tokenizer = DebertaV2Tokenizer(vocab=vocab, unk_id=3, model_max_length=MAX_TOKENS)
    config = DebertaV2Config(
        vocab_size=len(vocab),
        num_hidden_layers=2,
        max_position_embeddings=MAX_TOKENS,
        type_vocab_size=0,
        relative_attention=True,  # as deberta-v3-base's config
        position_buckets=256,
        max_relative_positions=-1,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        initializer_range=INIT_RANGE,
        pad_token_id=0,
        id2label=dict(enumerate(NLI_LABELS)),
        label2id={label: i for i, label in enumerate(NLI_LABELS)},
        **_SHAPE,
    )
    torch.manual_seed(seed)
    model = DebertaV2ForSequenceClassification(config).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def ensure_scorers(cache_dir: Path, seed: int = 0) -> tuple[Path, Path]:
    """The two stand-ins under `cache_dir/models` (BERTScore's, the NLI's), built once (safe
    across processes)."""
    models = Path(cache_dir) / "models"
    roberta = build_once(
        models / f"tiny-roberta-seed{seed}-{VERSION}", lambda d: build_roberta(d, seed)
    )
    nli = build_once(models / f"tiny-nli-seed{seed}-{VERSION}", lambda d: build_nli(d, seed))
    return roberta, nli


def install_in_hub_cache(hub_cache: Path, repo_id: str, folder: Path) -> Path:
    """Lay `folder` out in `hub_cache` (HF_HOME/hub) as a download of model `repo_id` at
    revision REVISION: models--org--name/refs/main names it, snapshots/REVISION/ links to the
    files. Returns the snapshot folder."""
    repo = Path(hub_cache) / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    for path in Path(folder).iterdir():
        link = snapshot / path.name
        if not link.exists():
            link.symlink_to(path.resolve())
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    return snapshot


def install_official_ids(hub_cache: Path, cache_dir: Path, seed: int = 0) -> tuple[Path, Path]:
    """The stand-ins, built under `cache_dir`, installed in `hub_cache` under the official ids
    (ROBERTA_ID, NLI_ID); returns their snapshot folders."""
    roberta, nli = ensure_scorers(cache_dir, seed)
    return (
        install_in_hub_cache(hub_cache, ROBERTA_ID, roberta),
        install_in_hub_cache(hub_cache, NLI_ID, nli),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m support.doubles.tiny_scorers", description=__doc__)
    ap.add_argument("--out", required=True, type=Path, help="folder for the two checkpoints")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hub-cache", type=Path, help="also install them there under the official ids")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: all is built here
    t0 = time.perf_counter()
    roberta, nli = ensure_scorers(args.out, args.seed)
    print(f"BERTScore stand-in: {roberta}\nNLI stand-in: {nli}")
    if args.hub_cache:
        for path in install_official_ids(args.hub_cache, args.out, args.seed):
            print(f"installed: {path}")
    print(f"in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
