"""The loopback server itself: protocols, auth, faults, self-stop, models lists, answers by rule
and its command line (raw HTTP, no SDK)."""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.doubles.loopback import (
    FAULT_KINDS,
    Faults,
    LoopbackServer,
    ScriptRequest,
    answers_script,
    main,
)

REPO = Path(__file__).resolve().parents[2]

KEY = "k-test-123456"


def echo(r: ScriptRequest) -> str:
    return f"{r.protocol}|{r.model}|{r.system}|{'/'.join(r.texts)}|{r.n_images}|{r.prefill}"


def post(url: str, path: str, body: dict, headers: dict) -> tuple[int, bytes]:
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={**headers, "Content-Type": "a/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


OPENAI = {
    "model": "m",
    "n": 2,
    "messages": [
        {"role": "system", "content": "S"},
        {"role": "user", "content": [
            {"type": "text", "text": "a"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
            {"type": "text", "text": "b"},
        ]},
        {"role": "assistant", "content": "pre"},
    ],
}  # fmt: skip
ANTHROPIC = {
    "model": "m",
    "max_tokens": 5,
    "system": "S",
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "a"},
            {"type": "image",
             "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
        ]},
        {"role": "assistant", "content": "pre"},
    ],
}  # fmt: skip
GEMINI = {
    "systemInstruction": {"parts": [{"text": "S"}]},
    "contents": [{"role": "user", "parts": [{"text": "a"}, {"inlineData": {"data": "AA"}}]}],
    "generationConfig": {"candidateCount": 3},
}


def test_three_protocols_normalize_and_render():
    with LoopbackServer(echo, api_key=KEY) as s:
        status, body = post(
            s.url, "/v1/chat/completions", OPENAI, {"Authorization": f"Bearer {KEY}"}
        )
        out = json.loads(body)
        assert (
            status == 200
            and [c["message"]["content"] for c in out["choices"]] == ["openai||S|a/b|1|pre"] * 2
        )
        assert out["usage"]["prompt_tokens"] > 0
        status, body = post(s.url, "/v1/messages", ANTHROPIC, {"x-api-key": KEY})
        assert json.loads(body)["content"][0]["text"] == "anthropic||S|a|1|pre"
        path = "/v1beta/models/gem-1:generateContent"
        status, body = post(s.url, path, GEMINI, {"x-goog-api-key": KEY})
        cands = json.loads(body)["candidates"]
        assert [c["content"]["parts"][0]["text"] for c in cands] == ["gemini|gem-1|S|a|1|None"] * 3
        assert s.stats.answered == 3


def test_wrong_key_is_refused():
    with LoopbackServer(echo, api_key=KEY) as s:
        status, _ = post(s.url, "/v1/messages", ANTHROPIC, {"x-api-key": "nope"})
        assert status == 401 and s.stats.answered == 0


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_fault_then_success(kind):
    faults = Faults(rate=1.0, kinds=(kind,), attempts=1, retry_after_s=0.01, slow_s=0.3)
    with LoopbackServer(echo, api_key=KEY, faults=faults) as s:
        headers = {"x-api-key": KEY}
        if kind == "drop":
            with pytest.raises((http.client.RemoteDisconnected, urllib.error.URLError)):
                post(s.url, "/v1/messages", ANTHROPIC, headers)
        else:
            start = time.perf_counter()
            status, body = post(s.url, "/v1/messages", ANTHROPIC, headers)
            expect = {"429": 429, "500": 500, "slow": 200, "malformed": 200}[kind]
            assert status == expect
            if kind == "malformed":
                with pytest.raises(json.JSONDecodeError):
                    json.loads(body)
            if kind == "slow":
                assert time.perf_counter() - start >= 0.3
        status, body = post(s.url, "/v1/messages", ANTHROPIC, headers)  # the retry succeeds
        assert status == 200 and json.loads(body)["content"][0]["text"]
        assert s.stats.faults[kind] == 1 and s.stats.attempts == 2


def test_fault_choice_is_seeded_by_the_body():
    f = Faults(rate=0.5, seed=7)
    a, b = LoopbackServer(echo, api_key=KEY, faults=f), LoopbackServer(echo, api_key=KEY, faults=f)
    picks_a = [a.fault_for(f"body{i}") for i in range(40)]
    picks_b = [b.fault_for(f"body{i}") for i in range(40)]
    assert picks_a == picks_b and 5 < sum(p is not None for p in picks_a) < 35


def test_server_stops_by_itself():
    s = LoopbackServer(echo, api_key=KEY, lifetime_s=0.3).start()
    url = s.url
    time.sleep(0.8)
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        post(url, "/v1/messages", ANTHROPIC, {"x-api-key": KEY})


def test_stats_route_and_recorded_bodies(tmp_path):
    with LoopbackServer(echo, api_key=KEY, record_dir=tmp_path / "bodies") as s:
        status, _ = post(s.url, "/v1/chat/completions", OPENAI, {"Authorization": f"Bearer {KEY}"})
        assert status == 200
        with urllib.request.urlopen(s.url + "/_loopback/stats", timeout=10) as resp:
            stats = json.loads(resp.read())
    assert stats["answered"] == 1 and stats["peak_in_flight"] == 1
    assert stats["first_request_at"] <= stats["last_response_at"]
    (recorded,) = (tmp_path / "bodies").iterdir()
    assert json.loads(recorded.read_bytes()) == OPENAI  # the body as sent, once


# ---- the models lists (what a client's preflight reads) ----------------------------------------
def get(url: str, path: str, headers: dict) -> tuple[int, bytes]:
    req = urllib.request.Request(url + path, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_models_lists_in_each_protocol_after_the_key_check():
    with LoopbackServer(echo, api_key=KEY, models=("m1", "m2")) as s:
        status, body = get(s.url, "/v1/models", {"Authorization": f"Bearer {KEY}"})
        assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["m1", "m2"]
        anthropic = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
        status, body = get(s.url, "/v1/models", anthropic)
        assert status == 200 and json.loads(body)["last_id"] == "m2"
        status, body = get(s.url, "/v1beta/models", {"x-goog-api-key": KEY})
        assert [m["name"] for m in json.loads(body)["models"]] == ["models/m1", "models/m2"]
        assert get(s.url, "/v1/models", {"Authorization": "Bearer nope"})[0] == 401
        assert get(s.url, "/v1/models", {"x-api-key": "nope"})[0] == 401
        assert (
            get(s.url, "/v1/chat/completions/models", {"Authorization": f"Bearer {KEY}"})[0] == 404
        )
        assert get(s.url, "/models", {"Authorization": f"Bearer {KEY}"})[0] == 200  # any prefix
        assert s.stats.listed == 6 and s.stats.attempts == 0  # not model requests


# ---- answers by rule (--answers) ---------------------------------------------------------------
def ask(url: str, text: str) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "first part"}, {"type": "text", "text": text}]}]}  # fmt: skip
    status, out = post(url, "/v1/chat/completions", body, {"Authorization": f"Bearer {KEY}"})
    assert status == 200, out
    return json.loads(out)["choices"][0]["message"]["content"]


def write_rules(path, *rows: str):
    path.write_text("\n".join(rows) + "\n")
    return path


def test_rules_answer_the_last_user_text_first_match_wins_else_the_default(tmp_path):
    rules = write_rules(
        tmp_path / "rules.jsonl",
        '{"pattern": "liver", "answer": "yes"}',
        "",
        '{"pattern": "^Which (organ|tool)", "answer": "B"}',
        '{"pattern": "organ", "answer": "never: an earlier rule matched"}',
    )
    script = answers_script(str(rules), "default")
    with LoopbackServer(script, api_key=KEY) as s:
        assert ask(s.url, "is the liver present?") == "yes"
        assert ask(s.url, "Which organ is it?") == "B"
        assert ask(s.url, "nothing matches") == "default"
        assert ask(s.url, "first part") == "default"  # only the last text part is matched


def test_a_function_answers_with_the_last_user_text(tmp_path, monkeypatch):
    (tmp_path / "my_answers.py").write_text(
        "def reply(text):\n    return text.upper()\n\ndef broken(text):\n    return 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with LoopbackServer(answers_script("my_answers:reply", "d"), api_key=KEY) as s:
        assert ask(s.url, "point at it") == "POINT AT IT"
    with LoopbackServer(answers_script("my_answers:broken", "d"), api_key=KEY) as s:
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        status, out = post(s.url, "/v1/chat/completions", body, {"Authorization": f"Bearer {KEY}"})
        assert status == 400 and b"my_answers:broken returned int, not str" in out


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        (['{"pattern": "a", "answer": "b"}', "{not json"], ":2: not JSON"),
        (['{"pattern": "a"}'], ':1: expected {"pattern": REGEX, "answer": TEXT}'),
        (['{"pattern": "a", "answer": 3}'], ":1: expected"),
        (['{"pattern": "a", "answer": "b", "extra": 1}'], ":1: expected"),
        (['["a", "b"]'], ":1: expected"),
        (["", '{"pattern": "(", "answer": "b"}'], ":2: bad pattern '('"),
        ([""], ": no rules"),
    ],
)
def test_a_bad_rules_file_is_a_usage_error_naming_file_and_line(tmp_path, capsys, rows, error):
    rules = write_rules(tmp_path / "rules.jsonl", *rows)
    with pytest.raises(SystemExit) as raised:
        main(["--api-key", KEY, "--answers", str(rules)])
    assert raised.value.code == 2
    assert f"--answers {rules}{error}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("no/such/file.jsonl", "no/such/file.jsonl: no such file, and not module:function"),
        ("no_such_module_vlmbench:f", "cannot import no_such_module_vlmbench"),
        ("json:no_such_function", "json has no no_such_function"),
        ("json:__doc__", "__doc__ is not a function"),
    ],
)
def test_a_bad_answers_value_is_a_usage_error_naming_it(capsys, spec, error):
    with pytest.raises(SystemExit) as raised:
        main(["--api-key", KEY, "--answers", spec])
    assert raised.value.code == 2 and error in capsys.readouterr().err


# ---- the command line: --port, defaults in --help, a visible lifetime --------------------------
def loopback_cli(*args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "support.doubles.loopback", "--api-key", KEY, *args]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)


def test_help_shows_the_defaults():
    out = subprocess.run(
        [sys.executable, "-m", "support.doubles.loopback", "--help"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    entries = {  # option -> its help entry, flattened
        entry.split()[0]: " ".join(entry.split())
        for entry in re.split(r"\n  (?=-)", out.split("options:", 1)[1])
        if entry.strip()
    }
    for option, default in (("--port", "0"), ("--lifetime", "600.0"), ("--answer", "A")):
        assert entries[option].endswith(f"(default: {default})"), entries[option]
    assert "(default" not in entries["--answers"]  # off by default: nothing to show


def test_port_answers_and_a_lifetime_that_says_when_it_ends(tmp_path):
    with socket.socket() as probe:  # a port free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rules = write_rules(tmp_path / "rules.jsonl", '{"pattern": "liver", "answer": "yes"}')
    proc = loopback_cli("--port", str(port), "--lifetime", "2", "--answers", str(rules))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url == f"http://127.0.0.1:{port}"
        assert "stops in 2 s (--lifetime)" in proc.stdout.readline()
        assert ask(url, "the liver?") == "yes" and ask(url, "the spleen?") == "A"
        start = time.perf_counter()
        assert proc.wait(timeout=30) == 0  # it stops by itself
        assert time.perf_counter() - start < 10
        assert "stopped: its lifetime of 2 s ended" in proc.stdout.read()
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_port_zero_takes_a_free_port_and_a_taken_port_is_a_usage_error():
    first = loopback_cli("--port", "0", "--lifetime", "30")
    try:
        assert first.stdout is not None
        url = first.stdout.readline().strip()
        port = int(url.rsplit(":", 1)[1])
        assert port > 0
        taken = subprocess.run(
            [sys.executable, "-m", "support.doubles.loopback", "--api-key", KEY, "--port",
             str(port)], cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert taken.returncode == 2 and f"--port {port}: cannot listen there" in taken.stderr
    finally:
        first.kill()
        first.wait(timeout=10)
