"""`--dry-run` through the vendors' SDKs against the loopback server: it sends nothing, stores
nothing, and counts exactly the requests the real run then sends; its token estimate against the
usage the loopback server reports (synthetic usage: len(text) // 4 + 85 per image, not a
provider's tokenizer, so the 10%-of-real-usage check needs a real provider)."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from support.backends import tokens
from support.backends.api_models import batch_cost_usd, cost_usd
from support.doubles.loopback import LoopbackServer, ScriptRequest
from support.types import Usage
from unit.helpers.api_runs import api_env, run_evaluation

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

KEY = "sk-loopback-SECRET-d2c81f07aa"
PROVIDERS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google": "GEMINI_API_KEY",
}


def script(request: ScriptRequest) -> str:
    return '{"name": "Liver", "present": 0, "point_canvas": null}'


def run(provider: str, url: str, data: Path, tmp: Path, run_id: str, *extra: str, shared: Path):
    """pointing's quick subset, zero-shot, through `provider`'s SDK."""
    args = (f"--cholecseg8k={data}", "-k", "zero_shot", *extra)
    return run_eval("pointing", provider, url, tmp, run_id, *args, shared=shared)


def run_eval(
    evaluation: str, provider: str, url: str, tmp: Path, run_id: str, *extra: str, shared: Path
):
    """`evaluation`'s quick subset through `provider`'s SDK; the cache's data and derived parts
    are the session's (`shared`, SHARED_PARTS)."""
    env = api_env({PROVIDERS[provider]: KEY})
    model = f"{provider}:loop-model"
    options = [f"--api-base={url}", *extra]
    return run_evaluation(evaluation, model, tmp, run_id, options, env=env, shared_cache=shared)


def stored_responses(tmp: Path) -> int:
    path = tmp / "cache" / "responses.sqlite"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


@pytest.mark.slow
@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_dry_run_sends_nothing_and_counts_what_the_run_sends(
    provider, synthetic_cholecseg8k, shared_cache, tmp_path
):
    with LoopbackServer(script, api_key=KEY, lifetime_s=240) as server:
        dry = run(
            provider,
            server.url,
            synthetic_cholecseg8k,
            tmp_path,
            "dry",
            "--dry-run",
            shared=shared_cache,
        )
        assert dry.returncode == 0, dry.stdout[-3000:]
        assert server.stats.attempts == 0  # nothing reached the server
        assert stored_responses(tmp_path) == 0  # nothing cached
        folder = tmp_path / "results" / "pointing" / "dry"
        assert sorted(p.name for p in folder.iterdir()) == ["dry_run.csv"]  # no results
        estimate = pd.read_csv(folder / "dry_run.csv").iloc[0]
        assert "dry run: requests to send" in dry.stdout and KEY not in dry.stdout

        real = run(
            provider, server.url, synthetic_cholecseg8k, tmp_path, "real", shared=shared_cache
        )
        assert real.returncode == 0, real.stdout[-3000:]
        sent = server.stats.attempts
        assert estimate["requests_to_send"] == sent == server.stats.answered > 0
        assert estimate["cached"] == 0

        again = run(
            provider,
            server.url,
            synthetic_cholecseg8k,
            tmp_path,
            "again",
            "--dry-run",
            shared=shared_cache,
        )
        assert again.returncode == 0, again.stdout[-3000:]
        assert server.stats.attempts == sent
    rerun = pd.read_csv(tmp_path / "results" / "pointing" / "again" / "dry_run.csv").iloc[0]
    assert rerun["requests_to_send"] == 0 and rerun["cached"] == sent
    assert rerun["input_tokens"] == 0

    raw = tmp_path / "results" / "pointing" / "real" / "raw_results.jsonl"
    usage = [json.loads(line)["usage"] for line in raw.read_text().splitlines()]
    reported = sum(u["input_tokens"] for u in usage)
    # the loopback server counts 85 tokens an image and floor(chars / 4) of the joined user
    # text; every provider's image rule gives an image at least 85 tokens, and the estimate
    # counts the system prompt too: never below the synthetic count
    assert estimate["input_tokens"] >= reported > 0
    assert estimate["max_output_tokens"] >= sum(u["output_tokens"] for u in usage)
    assert str(estimate["text_counted_by"]) == tokens.text_method(provider)


@pytest.mark.slow
def test_pgt_stage_two_is_counted_from_placeholder_answers(tmp_path, shared_cache):
    """pgt's stage 2 always follows stage 1, n requests for n samples: the count is exact."""
    from support.evaluations.pgt.synthetic import build_pgt_sample

    sample = build_pgt_sample(tmp_path / "pgt")
    args = (f"--pgt-dataset={sample}", "--pgt-phrase=cot", "--pgt-mode=prompt", "--pgt-n=1,3")
    # each answer its own text, so no two stage-2 requests are the same request (one sent
    # while its twin is in flight, or after it is cached, would be answered without a call)
    answers = itertools.count()
    with LoopbackServer(
        lambda r: f"The answer is A ({next(answers)})", api_key=KEY, lifetime_s=240
    ) as server:
        dry = run_eval(
            "pgt", "openai", server.url, tmp_path, "dry", *args, "--dry-run", shared=shared_cache
        )
        assert dry.returncode == 0, dry.stdout[-3000:]
        assert server.stats.attempts == 0
        real = run_eval("pgt", "openai", server.url, tmp_path, "real", *args, shared=shared_cache)
        assert real.returncode == 0, real.stdout[-3000:]
    estimate = pd.read_csv(tmp_path / "results" / "pgt" / "dry" / "dry_run.csv").iloc[0]
    # 6 quick cases at n=1 (2 requests each) and 6 at n=3 (1 + 3 each)
    assert estimate["requests_to_send"] == server.stats.attempts == 6 * 2 + 6 * 4


@pytest.mark.slow
def test_dynamic_rounds_are_counted_from_placeholder_answers(tmp_path, shared_cache):
    """dynamic's later rounds follow from the answers; its quick search asks K tasks a round
    whatever they are. Its real run sends some requests again before the cache holds them (40
    sent, 30 distinct bodies): the dry run counts each repeat too."""
    with LoopbackServer(lambda r: '{"point": [10, 10]}', api_key=KEY, lifetime_s=240) as server:
        dry = run_eval(
            "dynamic", "openai", server.url, tmp_path, "dry", "--dry-run", shared=shared_cache
        )
        assert dry.returncode == 0, dry.stdout[-3000:]
        assert server.stats.attempts == 0
        real = run_eval("dynamic", "openai", server.url, tmp_path, "real", shared=shared_cache)
        assert real.returncode == 0, real.stdout[-3000:]
    estimate = pd.read_csv(tmp_path / "results" / "dynamic" / "dry" / "dry_run.csv").iloc[0]
    assert estimate["requests_to_send"] == server.stats.attempts > 0


def test_image_rules_match_the_providers_published_examples():
    # OpenAI's guide: 1024x1024 high detail -> 768x768, 4 tiles: 85 + 4*170 = 765 tokens;
    # 2048x4096 -> 1024x2048 -> 768x1536, 6 tiles: 1105 tokens
    assert tokens.openai_image_tokens(1024, 1024) == 765
    assert tokens.openai_image_tokens(2048, 4096) == 1105
    # gpt-4o-mini's image tokens are priced apart: 2833 base and 5667 a tile
    assert tokens.openai_image_tokens(1024, 1024, "gpt-4o-mini") == 2833 + 4 * 5667
    # Anthropic's table: 1092x1092 (1.19 megapixels) is about 1590 tokens
    assert tokens.anthropic_image_tokens(1092, 1092) == 1590
    assert tokens.anthropic_image_tokens(3000, 3000) == tokens.anthropic_image_tokens(1568, 1568)
    # Gemini: within 384x384 one 258-token image, else 258 a 768x768 tile
    assert tokens.gemini_image_tokens(384, 384) == 258
    assert tokens.gemini_image_tokens(1000, 700) == 2 * 258


def test_openai_text_is_counted_by_o200k_where_bpe_openai_is_installed():
    pytest.importorskip("bpe_openai")  # the `tokens` extra
    assert tokens.text_method("openai") == "o200k_base (bpe-openai)"
    assert tokens.text_tokens("openai", "hello world, how are you?") == 7
    assert tokens.text_method("anthropic").startswith("estimate")


def test_batch_price_is_half_the_list_price():
    usage = Usage(1_000_000, 1_000_000)
    assert cost_usd("gpt-4o", usage) == 12.5
    assert batch_cost_usd("openai", "gpt-4o", usage) == 6.25
    assert batch_cost_usd("anthropic", "claude-sonnet-4-20250514", usage) == 9.0
    assert batch_cost_usd("google", "gemini-2.0-flash", usage) == pytest.approx(0.25)
    assert batch_cost_usd("openai", "no-such-model", usage) is None


@pytest.mark.slow
def test_a_dry_run_needs_no_key(tmp_path, shared_cache):
    """The estimate comes before the key: nothing is sent, so a missing key is no usage error
    (the same command without --dry-run is one, exit 4, naming the variable)."""
    models = "gpt-4o,claude-sonnet-4-20250514,gemini-2.0-flash"
    dry = run_evaluation(
        "nyu_distance",
        models,
        tmp_path,
        "dry",
        ["--dry-run"],
        env=api_env(),
        shared_cache=shared_cache,
    )
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-2000:]
    table = pd.read_csv(tmp_path / "results" / "nyu_distance" / "dry" / "dry_run.csv")
    assert set(table["model"]) == {
        "gpt-4o", "claude-sonnet-4-20250514", "gemini-2.0-flash", "total"
    }  # fmt: skip
    total = table.set_index("model").loc["total"]
    each = table[table["model"] != "total"]
    assert total["requests_to_send"] == each["requests_to_send"].sum()
    assert total["cost_usd"] == pytest.approx(each["cost_usd"].sum())
    assert (table["requests_to_send"] > 0).all() and (table["cost_usd"] > 0).all()
    real = run_evaluation("nyu_distance", models, tmp_path, "real", env=api_env())
    assert real.returncode == pytest.ExitCode.USAGE_ERROR
    assert "OPENAI_API_KEY is not set" in real.stderr + real.stdout


def test_the_totals_sum_each_evaluations_models_and_the_session():
    """dry_run.csv's total row sums its models; the grand total row (several evaluations) and
    the terminal's last line sum every evaluation's; USD over the models with a price."""
    import pandas as pd

    from reports.terminal import dry_run_total_lines
    from support.client.dry_run import GRAND_TOTAL, total_row, with_totals

    def table(rows):
        columns = ["model", "requests_to_send", "cached", "input_tokens", "text_counted_by",
                   "max_output_tokens", "thinking_room", "cost_usd", "batch_cost_usd"]  # fmt: skip
        return pd.DataFrame(rows, columns=columns)

    a = table([["gpt-4o", 10, 2, 1000, "x", 500, 0, 0.5, 0.25],
               ["oracle", 10, 0, 900, "x", 500, 0, None, None]])  # fmt: skip
    b = table([["gpt-4o", 4, 0, 400, "x", 200, 0, 0.2, 0.1]])
    grand = total_row([a, b], GRAND_TOTAL)
    written = with_totals(a, grand)
    assert list(written["model"]) == ["gpt-4o", "oracle", "total", GRAND_TOTAL]
    total = written.set_index("model").loc["total"]
    assert (total["requests_to_send"], total["input_tokens"], total["cost_usd"]) == (20, 1900, 0.5)
    assert grand["requests_to_send"] == 24 and grand["cost_usd"] == pytest.approx(0.7)
    assert list(with_totals(b)["model"]) == ["gpt-4o", "total"]  # one evaluation: no grand row
    lines = dry_run_total_lines({"a": a, "b": b})
    assert lines[0].startswith("vlmbench: dry run total over 2 evaluation(s) and 2 model(s): 24")
    assert "$0.7 at list price" in lines[0] and "oracle" in lines[1]
