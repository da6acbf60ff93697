"""No stale answers for local models: the revision in a local model's cache identity follows its
weights' content (not only their names and sizes), hashes once per changed file through the
memo, and resolves a hub id offline (support.backends.model_folder)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from support.backends.base import BackendUnavailable
from support.backends.model_folder import (
    folder_revision,
    local_path,
    model_revision,
    revision_for,
)
from support.client.response_cache import cache_key
from support.storage.file_hashes import HASH_MEMO, FileHashes
from support.types import Part, Request

REQUEST = Request(parts=(Part.of_text("Organ: Liver"),), system="be brief", max_tokens=20)
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def write_model(folder: Path, weights: bytes, config: str = '{"model_type": "llava"}') -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(config)
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def rewrite(path: Path, data: bytes) -> None:
    """New bytes in place, with an mtime surely later than before (coarse clocks included)."""
    stamp = path.stat().st_mtime_ns
    path.write_bytes(data)
    later = max(path.stat().st_mtime_ns, stamp + 1_000_000_000)
    os.utime(path, ns=(later, later))


def test_new_weights_of_the_same_size_change_the_revision_and_the_cache_key(tmp_path):
    folder = write_model(tmp_path / "model", b"\x00" * 64)
    before = model_revision(str(folder))
    key_before = cache_key({"provider": "hf", "model": str(folder), "revision": before}, REQUEST)
    assert model_revision(str(folder)) == before  # deterministic
    rewrite(folder / "model.safetensors", b"\x01" * 64)  # same name, same size, same config
    assert (folder / "model.safetensors").stat().st_size == 64
    after = model_revision(str(folder))
    key_after = cache_key({"provider": "hf", "model": str(folder), "revision": after}, REQUEST)
    assert after != before and key_after != key_before


@pytest.mark.parametrize("name", ["model.safetensors", "pytorch_model.bin", "w.pt", "m.gguf"])
def test_every_weight_format_enters_by_content(tmp_path, name):
    folder = write_model(tmp_path / "model", b"")
    (folder / name).write_bytes(b"a" * 16)
    before = model_revision(str(folder))
    rewrite(folder / name, b"b" * 16)
    assert model_revision(str(folder)) != before


def test_config_and_template_still_enter_whole(tmp_path):
    folder = write_model(tmp_path / "model", b"w" * 8)
    base = model_revision(str(folder))
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    with_template = model_revision(str(folder))
    (folder / "config.json").write_text('{"model_type": "llava", "x": 1}')
    assert len({base, with_template, model_revision(str(folder))}) == 3


def test_the_memo_reads_an_unchanged_folder_never_and_a_touched_file_again(tmp_path):
    folder = write_model(tmp_path / "model", b"w" * 1000)
    (folder / "extra.bin").write_bytes(b"v" * 10)
    memo = tmp_path / "cache" / HASH_MEMO
    first = FileHashes(memo)
    revision = model_revision(str(folder), first)
    assert first.hashed == 2  # both weight files read once
    first.save()
    assert memo.is_file()

    again = FileHashes(memo)  # a later run
    assert model_revision(str(folder), again) == revision and again.hashed == 0
    stamp = (folder / "model.safetensors").stat().st_mtime_ns + 1_000_000_000
    os.utime(folder / "model.safetensors", ns=(stamp, stamp))  # touched: read again, alone
    assert model_revision(str(folder), again) == revision and again.hashed == 1

    # the helper the backends call: memo under the cache folder, saved
    assert revision_for(str(folder), tmp_path / "cache") == revision
    fresh = FileHashes(memo)
    assert model_revision(str(folder), fresh) == revision and fresh.hashed == 0
    assert revision_for(str(folder), None) == revision  # --no-cache: hashed without a memo


def test_folder_revision_and_local_path(tmp_path):
    folder = write_model(tmp_path / "model", b"w" * 8)
    assert local_path(str(folder)) == folder and local_path("org/name") is None
    assert folder_revision(folder) == model_revision(str(folder))


@pytest.fixture
def offline_hub(tmp_path, monkeypatch) -> Iterator[Path]:
    """An empty local hub cache under tmp_path, offline, with any network connection recorded
    (and refused)."""
    hub = tmp_path / "hf" / "hub"
    hub.mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    constants = pytest.importorskip("huggingface_hub.constants")  # read at import: patch too
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    connections: list[object] = []

    def refuse(self, address, *args):
        connections.append(address)
        raise OSError("network used in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield hub
    assert connections == []


def test_a_hub_id_without_a_local_snapshot_is_its_own_revision(offline_hub):
    assert model_revision("org/name") == "org/name"
    assert model_revision("name") == "name"
    assert model_revision("not a valid/repo id!") == "not a valid/repo id!"


def test_a_hub_id_with_a_local_snapshot_is_its_commit(offline_hub):
    repo = offline_hub / "models--org--name"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    (repo / "snapshots" / COMMIT).mkdir(parents=True)
    (repo / "snapshots" / COMMIT / "config.json").write_text("{}")
    assert model_revision("org/name") == COMMIT
    assert model_revision("org/other") == "org/other"


def test_the_run_passes_its_cache_folder_unless_no_cache(monkeypatch, tmp_path):
    from fixtures import models
    from fixtures.run_settings import SETTINGS_KEY
    from support.settings import OutputSettings, RunSettings

    seen = []

    def fake_create_backend(name, opts):
        seen.append(opts.cache_dir)
        raise BackendUnavailable("not built here")

    monkeypatch.setattr(models, "create_backend", fake_create_backend)
    for use_cache in (True, False):
        stash = pytest.Stash()
        output = OutputSettings(cache_dir=tmp_path / "cache", use_cache=use_cache)
        stash[SETTINGS_KEY] = RunSettings(output=output)
        config = SimpleNamespace(stash=stash)
        assert models.client_or_reason(config, "hf:x") == "not built here"
    assert seen == [str(tmp_path / "cache"), None]


# --- end to end on the real transformers backend (the tiny model; no generation) -------------


def test_perturbed_weights_of_the_same_size_change_the_backends_identity(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    st = pytest.importorskip("safetensors.torch")
    from safetensors import safe_open

    from support.backends.registry import BackendOptions, create_backend
    from support.client.engine import ModelClient
    from support.doubles.tiny_vlm import ensure_tiny_vlm

    folder = ensure_tiny_vlm(tmp_path / "build")
    cache = tmp_path / "cache"
    opts = BackendOptions(cache_dir=str(cache), extra=(("device", "cpu"),))
    before = create_backend(f"hf:{folder}", opts)
    key_before = ModelClient(before, None, concurrency=1).key(REQUEST)
    assert (cache / HASH_MEMO).is_file()  # the weights' hashes were memoised

    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    with safe_open(str(weights), framework="pt") as f:
        metadata = f.metadata()
    tensors = st.load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] += 1  # one weight moved: the same names, shapes and dtypes
    stamp = weights.stat().st_mtime_ns
    st.save_file(tensors, str(weights), metadata=metadata)
    assert weights.stat().st_size == size
    later = max(weights.stat().st_mtime_ns, stamp + 1_000_000_000)
    os.utime(weights, ns=(later, later))

    after = create_backend(f"hf:{folder}", opts)
    assert after.identity["revision"] != before.identity["revision"]
    assert after.identity != before.identity
    assert ModelClient(after, None, concurrency=1).key(REQUEST) != key_before
    assert before.model is None and after.model is None  # nothing was loaded or generated
