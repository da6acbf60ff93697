"""The loopback server itself: protocols, auth, faults, self-stop (raw HTTP, no SDK)."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request

import pytest

from support.testing.loopback import FAULT_KINDS, Faults, LoopbackServer, ScriptRequest

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
