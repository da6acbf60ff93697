"""--compat as rules: configure picks each evaluation's WRITEUP or SOURCE rules once, and the
rules modules import nothing heavy at start-up (configure runs for every evaluation)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from support.settings import COMPAT_PROFILES, RunSettings

EVALUATIONS = {  # name -> the options configure needs beyond the defaults
    "pointing": {},
    "nyu_distance": {"pairs_per_image": 3},
    "pgt": {},
    "dynamic": {},
    "surgvqa": {},
}


def _module(name: str, part: str):
    return importlib.import_module(f"support.evaluations.{name}.{part}")


@pytest.mark.parametrize("compat", COMPAT_PROFILES)
@pytest.mark.parametrize("name", EVALUATIONS)
def test_configure_picks_the_profiles_rules(name: str, compat) -> None:
    settings = _module(name, "spec").configure(EVALUATIONS[name], RunSettings(compat=compat))
    assert settings.profile is _module(name, "profiles").PROFILES[compat]
    assert settings.profile.compat == compat


@pytest.mark.parametrize("name", EVALUATIONS)
def test_the_profiles_differ_in_each_rule(name: str) -> None:
    rules = _module(name, "profiles")
    w, s = vars(rules.WRITEUP), vars(rules.SOURCE)
    assert [k for k in w if w[k] == s[k]] == [], f"{name}: a rule the same in both profiles"


def test_the_specs_import_no_data_code() -> None:
    heavy = ("PIL", "scipy", *(f"support.evaluations.{n}.task" for n in EVALUATIONS))
    heavy += ("support.evaluations.pointing.prepare", "support.evaluations.dynamic.prompts")
    specs = ", ".join(f"support.evaluations.{n}.spec" for n in EVALUATIONS)
    code = f"import sys, {specs}; print(sorted(set({heavy!r}) & set(sys.modules)))"
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr or out.stdout
