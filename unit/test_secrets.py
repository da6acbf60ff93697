"""Secrets in every form leave the process in no artifact, logs included; URL credentials never
replace the API key.

A run against a server on 127.0.0.1 that echoes the request's headers in an error body, with
`user:pass@` in `--api-base`, a 7-character key and DEBUG logs: no file and neither stream holds
the key, the password or the Basic-auth encoding of the credentials.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support import secrets as api_keys
from support.backends.base import BackendError
from support.backends.redacted_logs import install_log_redaction
from support.backends.registry import BackendOptions, availability, create_backend
from support.doubles.loopback import LoopbackServer
from support.secrets import redact, register_url
from support.types import Part, Request
from unit.helpers.api_runs import api_env, run_evaluation
from unit.helpers.suite_runs import files_following_links

pytest.importorskip("openai")
pytest.importorskip("anthropic")

SHORT_KEY = "k7Zq9xW"  # 7 characters: below the old minimum of 8
OPENAI_KEY = "sk-the-users-own-openai-key-0123"  # for api.openai.com only
SERVER_KEY = "srv-key-9d2e71"  # a self-hosted server's --api-key (VLMBENCH_API_KEY)
USER, PASSWORD = "user", "pass"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
KEY_VARS = list(api_keys.key_variables())  # every provider's, once the registry is imported


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    # the secrets registered here ("pass" among them) are forgotten after each test
    monkeypatch.setattr(api_keys, "_secrets", set())


def test_redact_knows_every_form_of_a_secret(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SHORT_KEY)
    register_url(f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1")
    key_b64 = base64.b64encode(SHORT_KEY.encode()).decode()
    text = (
        f"GET http://{USER}:{PASSWORD}@127.0.0.1:9/v1 Authorization: Basic {BASIC} "
        f"Authorization: Bearer {SHORT_KEY} x-api-key: {SHORT_KEY}; {key_b64}; pw={PASSWORD}"
    )
    clean = redact(text)
    for secret in (SHORT_KEY, BASIC, key_b64, f":{PASSWORD}", f"={PASSWORD}"):
        assert secret not in clean, (secret, clean)
    assert clean.count(api_keys.REDACTED) >= 5
    # short secrets go as whole tokens only: ordinary words that hold them stay
    assert redact("a password, a passage") == "a password, a passage"


def test_the_placeholder_key_is_no_secret():
    api_keys.register_secret(api_keys.PLACEHOLDER_KEY)
    assert redact("EMPTY") == "EMPTY"


def test_log_records_are_redacted_in_every_handler(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SHORT_KEY)
    install_log_redaction()
    install_log_redaction()  # idempotent
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(self.format(record))

    handler = Keep()
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.DEBUG)
    try:
        log = logging.getLogger("httpx._client.child")
        log.debug("HTTP Request: POST %s %r", f"http://u:{SHORT_KEY}@h/v1", {"k": SHORT_KEY})
        try:
            raise ValueError(f"Bearer {SHORT_KEY}")
        except ValueError:
            log.exception("failed")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert len(seen) == 2
    assert all(SHORT_KEY not in s for s in seen), seen
    assert "HTTP Request: POST http://***@h/v1" in seen[0]


# --- end to end through the SDKs ------------------------------------------------------------------


class EchoServer:
    """Answers every POST with a 400 whose body echoes the request's headers; records them."""

    def __init__(self, status: int = 400) -> None:
        self.headers: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = dict(self.headers.items())
                owner.headers.append({k.lower(): v for k, v in headers.items()})
                body = json.dumps({"error": {"message": f"bad request, headers: {headers}"}})
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]

    def __enter__(self) -> EchoServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def ask_compatible(url: str) -> str:
    """One request of `openai-compatible:m` to `url` (the echo server answers 400): the text
    of the error it ends in."""
    backend = create_backend("openai-compatible:m", BackendOptions(api_base=url, max_retries=0))
    request = Request(parts=(Part.of_text("hello"),), max_tokens=5)
    with pytest.raises(BackendError) as raised:
        asyncio.run(backend.generate(request))
    return str(raised.value)


def test_the_openai_key_never_reaches_an_openai_compatible_server(monkeypatch):
    """`openai-compatible:` sends VLMBENCH_API_KEY, else the placeholder: never OPENAI_API_KEY,
    whatever server --api-base names."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    with EchoServer() as server:
        url = f"http://127.0.0.1:{server.port}/v1"
        assert availability("openai-compatible:m", BackendOptions(api_base=url)) is None
        ask_compatible(url)
        monkeypatch.setenv("VLMBENCH_API_KEY", SERVER_KEY)
        error = ask_compatible(url)
    sent = [h.get("authorization") for h in server.headers]
    assert sent == [f"Bearer {api_keys.PLACEHOLDER_KEY}", f"Bearer {SERVER_KEY}"]
    assert not any(OPENAI_KEY in json.dumps(h) for h in server.headers)
    # the server's key is a secret: its echo in the error body is redacted
    assert "bad request, headers" in error and SERVER_KEY not in error
    assert api_keys.REDACTED in error


def test_a_refused_key_says_which_variable_openai_compatible_sends(monkeypatch):
    """A user who relied on OPENAI_API_KEY for a server started with --api-key gets a 401: the
    error says the suite sent a placeholder, and which variable to set."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.delenv("VLMBENCH_API_KEY", raising=False)
    with EchoServer(status=401) as server:
        error = ask_compatible(f"http://127.0.0.1:{server.port}/v1")
        monkeypatch.setenv("VLMBENCH_API_KEY", SERVER_KEY)
        second = ask_compatible(f"http://127.0.0.1:{server.port}/v1")
    assert "placeholder" in error and "Set VLMBENCH_API_KEY" in error
    assert "never sends $OPENAI_API_KEY" in error and OPENAI_KEY not in error
    assert "sends $VLMBENCH_API_KEY;" in second and SERVER_KEY not in second


def test_the_server_key_variable_is_redacted_like_the_vendors(monkeypatch):
    monkeypatch.setenv("VLMBENCH_API_KEY", SERVER_KEY)
    b64 = base64.b64encode(SERVER_KEY.encode()).decode()
    assert redact(f"Authorization: Bearer {SERVER_KEY}; {b64}") == (
        f"Authorization: Bearer {api_keys.REDACTED}; {api_keys.REDACTED}"
    )


def run(
    tmp: Path,
    cholecseg8k: Path,
    model: str,
    api_base: str,
    key: str | None,
    *extra: str,
    shared: Path,
):
    """The pointing evaluation's liver cases, in a subprocess with only `key` set."""
    keys = dict(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", MPLBACKEND="Agg")
    if key is not None:
        keys[
            {
                "openai": "OPENAI_API_KEY",
                "anthropic": "ANTHROPIC_API_KEY",
                "openai-compatible": "VLMBENCH_API_KEY",
            }[model.split(":")[0]]
        ] = key
    options = [
        f"--cholecseg8k={cholecseg8k}",
        "-k",
        "zero_shot and liver",
        f"--api-base={api_base}",
        "--api-retries=0",
        *extra,
    ]
    env = api_env(keys)
    return run_evaluation("pointing", model, tmp, "r", options, env=env, shared_cache=shared)


def leaks(tmp: Path, proc: subprocess.CompletedProcess, secrets: list[str]) -> list[str]:
    """'where: secret' for each secret found in a file under `tmp` (the cache's links to the
    shared parts followed) or in the streams."""
    found = []
    for path in files_following_links(tmp):
        data = path.read_bytes()
        found += [f"{path.name}: {s}" for s in secrets if s.encode() in data]
    for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        found += [f"{name}: {s}" for s in secrets if s in text]
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("openai:loop", SHORT_KEY),
        ("openai-compatible:loop", None),
        ("openai-compatible:loop", SHORT_KEY),  # VLMBENCH_API_KEY
    ],
)
def test_echoed_secrets_reach_no_artifact(
    model, key, synthetic_cholecseg8k, shared_cache, tmp_path
):
    out = tmp_path / "out"
    out.mkdir()
    with EchoServer() as server:
        proc = run(
            out,
            synthetic_cholecseg8k,
            model,
            f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/v1",
            key,
            "--log-level=DEBUG",
            f"--log-file={out / 'run.log'}",
            f"--junitxml={out / 'junit.xml'}",
            f"--html={out / 'report.html'}",
            "--self-contained-html",
            "-rA",
            shared=shared_cache,
        )
    assert server.headers, proc.stdout[-3000:]  # the requests arrived and were echoed
    assert "bad request, headers" in (out / "results/pointing/r/raw_results.jsonl").read_text()
    for name in ("run.log", "junit.xml", "report.html"):
        assert (out / name).stat().st_size > 0, name
    if key is not None:  # the key went as the key header; the URL's credentials were dropped
        assert all(h.get("authorization") == f"Bearer {key}" for h in server.headers)
    else:  # no key: the URL's credentials went as Basic auth
        assert all(h.get("authorization") == f"Basic {BASIC}" for h in server.headers)
    secrets = [f":{PASSWORD}@", BASIC, *([key] if key else [])]
    assert leaks(out, proc, secrets) == []
    manifest = json.loads((out / "results/pointing/r/manifest.json").read_text())
    # the endpoint that answered, without the URL's credentials
    assert manifest["models"][model]["endpoint"] == f"http://127.0.0.1:{server.port}/v1"


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_url_credentials_do_not_replace_the_key(
    provider, synthetic_cholecseg8k, shared_cache, tmp_path
):
    with LoopbackServer(lambda _r: '{"present": 0}', api_key=SHORT_KEY, lifetime_s=120) as srv:
        url = srv.url.replace("http://", f"http://{USER}:{PASSWORD}@")
        model = f"{provider}:loop"
        proc = run(tmp_path, synthetic_cholecseg8k, model, url, SHORT_KEY, shared=shared_cache)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert srv.stats.answered > 0
    assert "credentials" in proc.stdout + proc.stderr  # the one-line warning
