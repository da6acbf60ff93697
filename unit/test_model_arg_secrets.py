"""`--model-arg` secrets of a `python:` model leave no file and no page in clear (issue 54, items
1 and 5).

An argument whose name says secret (`hf_token`, `password`) or given by `--model-arg-secret` is
handed to the factory as it is, and written nowhere else: not in manifest.json (`command`,
`run.model_args`, `models.*.identity`), the response cache (sqlite), logs, reports, JUnit XML,
error messages, the rerun command or the terminal. The cache identity tells two secrets apart by
a hash keyed with the cache folder's own key (`identity.key`), never by the value.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from support import secrets
from support.secrets import (
    IDENTITY_KEY,
    KEYED,
    REDACTED,
    identity_key,
    keyed_digest,
    recorded_args,
    redact,
    register_args,
    secret_arg,
)

TOKEN, OTHER_TOKEN = "hf_SECRET_x1", "hf_SECRET_y2"
PASSWORD = "hunter2"  # 7 characters: redacted as a whole token only
PHRASE = "opensesame99"  # secret by --model-arg-secret alone: its name says nothing
SECRETS = (TOKEN, OTHER_TOKEN, PASSWORD, PHRASE)
MODULE = "keeper_model"
MODEL = f"python:{MODULE}:Keeper"

# a python: model that records what its factory got (outside the results and cache folders) and
# logs it; it fails about half the requests (errors are never cached: asked again in every run),
# with a message holding its secrets where KEEPER_ECHO is set, and its factory raises one where
# size is "boom"
KEEPER = """
    import json
    import logging
    import os
    import zlib

    class Keeper:
        def __init__(self, hf_token, password, seed_phrase, size):
            self.secrets = (hf_token, password, seed_phrase)
            got = {"hf_token": hf_token, "password": password, "seed_phrase": seed_phrase,
                   "size": size}
            with open(os.environ["KEEPER_LOG"], "a") as f:
                f.write(json.dumps(got) + "\\n")
            logging.getLogger("keeper").warning("built with %s", got)
            if size == "boom":
                raise ValueError("cannot load with " + " / ".join(self.secrets))

        def generate(self, request):
            if zlib.crc32(b"".join(p.image for p in request.images)) % 2 == 0:
                echo = os.environ.get("KEEPER_ECHO")
                raise RuntimeError("cannot answer" + (" with " + " / ".join(self.secrets)
                                                      if echo else ""))
            return "1.5"
"""


def write_nyu_folder(folder: Path, n: int = 2) -> Path:
    """A small extracted NYU folder: rgb/NNNN.png and depth/NNNN.npy (a tilted plane)."""
    (folder / "rgb").mkdir(parents=True)
    (folder / "depth").mkdir()
    v, u = np.mgrid[0:480, 0:640].astype(np.float32)  # the size the folder reader expects
    for i in range(n):
        rgb = np.stack([u / 640 * 255, v / 480 * 255, np.full_like(u, 40 * i)], axis=-1)
        Image.fromarray(rgb.astype(np.uint8)).save(folder / "rgb" / f"{i:04d}.png")
        np.save(folder / "depth" / f"{i:04d}.npy", 1.5 + 2.0 * u / 640 + 0.5 * v / 480)
    return folder


def leaks(folder: Path, values=SECRETS) -> dict[str, list[str]]:
    """{file: the values found in its bytes} for every file under `folder` (links not followed:
    the cache's `synthetic/` is the session's shared data)."""
    found: dict[str, list[str]] = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not Path(root, d).is_symlink()]
        for name in files:
            path = Path(root, name)
            if path.is_symlink():
                continue
            data = path.read_bytes()
            hits = [v for v in values if v.encode() in data]
            if hits:
                found[str(path.relative_to(folder))] = hits
    return found


def manifest(results: Path, run_id: str) -> dict:
    return json.loads((results / "nyu_distance" / run_id / "manifest.json").read_text())


@pytest.fixture
def keeper(run_suite, tmp_path, monkeypatch):
    """run(run_id, token, *args, size="7", echo=False) -> (exit status, terminal output): the
    Keeper on a small NYU folder, given hf_token=token, password=hunter2 (both secret by name),
    seed_phrase=opensesame99 (by --model-arg-secret) and size; its JUnit XML, pytest-html page
    and DEBUG log in the results folder, tmp_path/results; the cache tmp_path/cache."""
    models = tmp_path / "models"
    models.mkdir()
    (models / f"{MODULE}.py").write_text(textwrap.dedent(KEEPER))
    monkeypatch.setenv("PYTHONPATH", str(models))  # the child imports the model from there
    monkeypatch.setenv("KEEPER_LOG", str(tmp_path / "keeper.jsonl"))
    nyu = write_nyu_folder(tmp_path / "nyu")
    results = tmp_path / "results"

    def run(run_id: str, token: str, *args: str, size: str = "7", echo: bool = False):
        if echo:
            monkeypatch.setenv("KEEPER_ECHO", "1")
        else:
            monkeypatch.delenv("KEEPER_ECHO", raising=False)
        result, _ = run_suite(
            "nyu_distance", f"--nyu-dir={nyu}", "--pairs-per-image=3", "--model", MODEL,
            "--model-arg", f"hf_token={token}", "--model-arg", f"password={PASSWORD}",
            "--model-arg-secret", f"seed_phrase={PHRASE}", "--model-arg", f"size={size}",
            f"--junitxml={results / f'{run_id}.xml'}", f"--html={results / f'{run_id}.html'}",
            f"--log-file={results / f'{run_id}.log'}", "--log-file-level=DEBUG",
            *args, run_id=run_id,
        )  # fmt: skip
        return result.ret, result.stdout.str() + result.stderr.str()

    return run


def got_by_factory(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "keeper.jsonl").read_text().splitlines()]


def assert_nothing_in_clear(tmp_path: Path, outputs: dict[str, str]) -> None:
    """No secret in any file of the results folder (manifests, reports, raw rows, JUnit XML,
    logs), of the cache folder (sqlite included) or in the terminal output."""
    assert leaks(tmp_path / "results") == {}
    assert leaks(tmp_path / "cache") == {}
    for run_id, output in outputs.items():
        assert not [s for s in SECRETS if s in output], (run_id, output[-3000:])


@pytest.mark.slow  # three runs of the suite in a subprocess
def test_model_arg_secrets_reach_the_factory_and_no_file(keeper, tmp_path):
    """Also a model error holding its secrets: r3's Keeper puts them in its error messages
    (KEEPER_ECHO), which are recorded and shown without them."""
    results = tmp_path / "results"
    outputs = {}
    for run_id, token, echo, *args in (
        ("r1", TOKEN, False, "-n", "2"),
        ("r2", TOKEN, False),
        ("r3", OTHER_TOKEN, True),
    ):
        ret, outputs[run_id] = keeper(run_id, token, *args, echo=echo)
        assert ret == 1, outputs[run_id][-3000:]  # the failed requests fail their cases
    # the model's errors named its secrets: the terminal shows them redacted
    assert "cannot answer with [redacted] / [redacted] / [redacted]" in outputs["r3"]
    assert "cannot answer with" not in outputs["r1"] + outputs["r2"]  # no echo, no secrets
    first, again, other = (manifest(results, r) for r in ("r1", "r2", "r3"))

    # the factory got every value in clear, in each process that built it
    got = got_by_factory(tmp_path)
    assert len(got) >= 3
    assert {g["hf_token"] for g in got} == {TOKEN, OTHER_TOKEN}
    assert all(g["password"] == PASSWORD and g["seed_phrase"] == PHRASE for g in got)
    assert all(g["size"] == "7" for g in got)

    assert_nothing_in_clear(tmp_path, outputs)
    for output in outputs.values():  # the rerun command: secrets [redacted], the rest kept
        assert "--model-arg size=7" in output and "--model-arg 'hf_token=[redacted]'" in output
        assert "'password=[redacted]'" in output and "'seed_phrase=[redacted]'" in output
    log = (results / "r2.log").read_text()  # serial: the factory's log record is there
    assert "built with" in log and "'size': '7'" in log and "'password': '[redacted]'" in log

    # the manifest: the suite's own records structurally redacted, the plain argument kept
    command = first["command"]
    assert "size=7" in command["args"] and "size=7" in command["line"]
    assert "password=[redacted]" in command["args"] and "password=[redacted]" in command["line"]
    assert "seed_phrase=[redacted]" in command["args"]
    assert first["run"]["model_args"] == [
        ["hf_token", REDACTED],
        ["password", REDACTED],
        ["size", "7"],
        ["seed_phrase", REDACTED],
    ]
    identity = first["models"][MODEL]["identity"]
    assert identity["args"]["size"] == "7"
    for name in ("hf_token", "password", "seed_phrase"):
        assert identity["args"][name].startswith(KEYED), identity
    assert "identities" not in first["models"][MODEL]  # both workers keyed alike

    # the cache: the same secret is the same model (its answers served), another is another
    key = tmp_path / "cache" / IDENTITY_KEY
    assert key.stat().st_size == 32 and key.stat().st_mode & 0o777 == 0o600
    assert again["models"][MODEL]["identity"] == identity
    assert other["models"][MODEL]["identity"]["args"]["hf_token"] != identity["args"]["hf_token"]
    assert other["models"][MODEL]["identity"]["args"]["password"] == identity["args"]["password"]
    rows = (results / "nyu_distance" / "r1" / "raw_results.jsonl").read_text().splitlines()
    n, errors = len(rows), sum(json.loads(r)["status"] == "error" for r in rows)
    assert 0 < errors < n
    sent_hits = {
        run_id: (m["models"][MODEL]["sent"], m["models"][MODEL]["cache_hits"])
        for run_id, m in (("r1", first), ("r2", again), ("r3", other))
    }
    assert sent_hits == {"r1": (n, 0), "r2": (errors, n - errors), "r3": (n, 0)}


@pytest.mark.slow
def test_a_factory_failing_with_its_secrets_fails_the_cases_without_them(keeper, tmp_path):
    ret, output = keeper("boom", TOKEN, size="boom")
    assert ret == 1, output[-3000:]
    assert got_by_factory(tmp_path)[0]["hf_token"] == TOKEN
    assert_nothing_in_clear(tmp_path, {"boom": output})
    # the call as shown: secret arguments [redacted]; the factory's message redacted too
    shown = "Keeper(hf_token='[redacted]', password='[redacted]', size='boom', "
    assert shown in output and "cannot load with [redacted] / [redacted] / [redacted]" in output


# -- the pieces -----------------------------------------------------------------------------------


@pytest.fixture
def no_secrets(monkeypatch):
    monkeypatch.setattr(secrets, "_secrets", set())


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("hf_token", True),
        ("apiKey", True),
        ("DB_PASSWORD", True),
        ("passwd", True),
        ("client_secret", True),
        ("credentials_file", True),
        ("checkpoint", False),
        ("size", False),
        ("seed_phrase", False),
        ("max_tokens", False),  # a count of tokens, not a token
        ("tokenizer_path", False),
        ("max_tokens_and_api_key", True),
    ],
)
def test_the_name_rule(name, secret):
    assert secret_arg(name) is secret
    assert secret_arg(name, given=("seed_phrase",)) is (secret or name == "seed_phrase")


def test_registered_args_are_redacted_short_ones_as_whole_tokens(no_secrets):
    pairs = (("password", PASSWORD), ("size", "7"), ("seed_phrase", PHRASE))
    register_args(pairs, given=("seed_phrase",))
    line = f"pytest --model-arg password={PASSWORD} --model-arg-secret seed_phrase={PHRASE} size=7"
    assert redact(line) == (
        "pytest --model-arg password=[redacted] --model-arg-secret seed_phrase=[redacted] size=7"
    )
    assert redact(f"['{PASSWORD}']") == "['[redacted]']"
    assert recorded_args(pairs, given=("seed_phrase",)) == (
        ("password", REDACTED),
        ("size", "7"),
        ("seed_phrase", REDACTED),
    )


def test_the_keyed_digest_tells_secrets_apart_and_keeps_no_value(tmp_path):
    folder = tmp_path / "cache"
    one = keyed_digest(TOKEN, folder)
    assert one.startswith(KEYED) and len(one) == len(KEYED) + 16
    assert keyed_digest(TOKEN, folder) == one != keyed_digest(OTHER_TOKEN, folder)
    key = folder / IDENTITY_KEY
    assert key.read_bytes() == identity_key(folder) and len(key.read_bytes()) == 32
    assert key.stat().st_mode & 0o777 == 0o600
    assert keyed_digest(TOKEN, tmp_path / "elsewhere") != one  # another folder, another key
    assert keyed_digest(TOKEN, None) == REDACTED  # --no-cache: nothing is keyed
    assert [p.name for p in folder.iterdir()] == [IDENTITY_KEY]  # no temporary file left
    assert TOKEN.encode() not in key.read_bytes()


def test_usage_errors_show_no_secret_value():
    from fixtures.model_options import parse_model_args

    python = ["python:m:F"]
    with pytest.raises(pytest.UsageError, match="--model-arg-secret: expected KEY=VALUE") as e:
        parse_model_args([], python, [PHRASE])  # the name forgotten: the whole text is the secret
    assert PHRASE not in str(e.value)
    with pytest.raises(pytest.UsageError, match=r"'hf token=\.\.\.': expected KEY=VALUE") as e:
        parse_model_args([f"hf token={TOKEN}"], python)
    assert TOKEN not in str(e.value)
    with pytest.raises(pytest.UsageError, match="--model-arg-secret: seed_phrase is given twice"):
        parse_model_args([f"seed_phrase={PHRASE}"], python, ["seed_phrase=other-value"])
    assert parse_model_args(["a=1"], python, [f"s={PHRASE}"]) == (("a", "1"), ("s", PHRASE))


def test_the_manifest_line_redacts_a_secret_that_quoting_splits(no_secrets):
    from reports.manifest import command_section, redacted

    value = "Zq'9xW-long-secret"  # shlex quotes it as 'password=Zq'"'"'9xW-long-secret'
    register_args([("password", value)])
    section = redacted(command_section(["--model-arg", f"password={value}", "size=7"], "/w"))
    assert section["args"] == ["--model-arg", "password=[redacted]", "size=7"]
    assert section["line"] == "pytest --model-arg 'password=[redacted]' size=7"


USER_MODEL = """
    class Plain:
        def __init__(self, **kwargs):
            if kwargs.get("size") == "boom":
                raise ValueError("no")

        def generate(self, request):
            return "x"
"""


def test_the_identity_keys_secret_arguments_and_their_files(tmp_path, monkeypatch):
    from support.backends import python_model
    from support.backends.base import BackendBuildError, BackendOptions
    from support.backends.registry import create_backend
    from support.secrets import SECRET_ARGS

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "plain_user_model.py").write_text(textwrap.dedent(USER_MODEL))
    token_file = tmp_path / "token.txt"
    token_file.write_text(TOKEN)
    cache = tmp_path / "cache"

    def identity(cache_dir: Path | None, **args: str) -> dict:
        extra = (("model_args", tuple(args.items())), (SECRET_ARGS, ("seed_phrase",)))
        opts = BackendOptions(extra=extra, cache_dir=str(cache_dir) if cache_dir else None)
        return dict(create_backend("python:plain_user_model:Plain", opts).identity)

    try:
        one = identity(cache, hf_token=TOKEN, seed_phrase=PHRASE, token_path=str(token_file))
        assert one["args"]["hf_token"] == keyed_digest(TOKEN, cache)
        assert one["args"]["seed_phrase"] == keyed_digest(PHRASE, cache)
        assert one["args"]["token_path"] == keyed_digest(str(token_file), cache)
        assert one["files"]["token_path"].startswith(KEYED)  # the file's sha256, keyed
        memo = (
            (cache / "file-hashes.json").read_text()
            if (cache / "file-hashes.json").exists()
            else ""
        )
        assert str(token_file) not in memo  # not memoised under its path: the path is the value
        assert (
            identity(cache, hf_token=TOKEN, seed_phrase=PHRASE, token_path=str(token_file)) == one
        )
        two = identity(cache, hf_token=OTHER_TOKEN, seed_phrase=PHRASE, token_path=str(token_file))
        assert two["args"]["hf_token"] != one["args"]["hf_token"]
        none = identity(None, hf_token=TOKEN, size="7")  # --no-cache: nothing is keyed
        assert none["args"] == {"hf_token": REDACTED, "size": "7"}
        with pytest.raises(BackendBuildError) as e:
            identity(None, hf_token=TOKEN, size="boom")
        assert "Plain(hf_token='[redacted]', size='boom') raised ValueError: no" in str(e.value)
        assert TOKEN not in str(e.value)
    finally:
        sys.modules.pop("plain_user_model", None)
        python_model.factory_of.cache_clear()
