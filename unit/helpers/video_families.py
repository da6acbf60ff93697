"""The tiny families that take a clip, and the mark of the tests that process one.

A family's video processor imports torchvision, which the unit lane's venv lacks (the CPU torch it
pins has no matching torchvision on its index: docs/local-models.md); the real-engine lane's venv
has it. `needs_torchvision` marks a test `vllm` (so .ci/vllm selects it; no vLLM is used) and
`slow` (tiny checkpoints built and loaded, seconds), and skips it where torchvision is missing.
"""

from __future__ import annotations

import importlib.util

import pytest

VIDEO_FAMILIES = ("qwen2_5_vl", "qwen3_vl", "llava_onevision")  # support/doubles/tiny_families.py


def needs_torchvision(test):
    """`test` marked for the real-engine lane's venv (module docstring)."""
    skip = pytest.mark.skipif(
        importlib.util.find_spec("torchvision") is None,
        reason="the family's video processor imports torchvision (the real-engine lane has it)",
    )
    return pytest.mark.vllm(pytest.mark.slow(skip(test)))
