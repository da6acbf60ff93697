"""--compat as rules: configure picks each evaluation's WRITEUP or SOURCE rules once, and the
rules modules import nothing heavy at start-up (configure runs for every evaluation)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.evaluations.nyu_distance import rules as nyu_rules
from support.evaluations.nyu_distance.spec import configure as nyu_configure
from support.evaluations.pointing import rules as pointing_rules
from support.evaluations.pointing.spec import configure as pointing_configure
from support.settings import COMPAT_PROFILES, RunSettings


@pytest.mark.parametrize("compat", COMPAT_PROFILES)
def test_configure_picks_the_profiles_rules(compat) -> None:
    run = RunSettings(compat=compat)
    pointing = pointing_configure({}, run)
    nyu = nyu_configure({"pairs_per_image": 3}, run)
    assert pointing.rules is pointing_rules.PROFILES[compat]
    assert pointing.rules.compat == compat
    assert nyu.rules is nyu_rules.PROFILES[compat] and nyu.compat == compat


def test_the_profiles_differ_in_each_rule_but_the_name() -> None:
    for module in (pointing_rules, nyu_rules):
        w, s = vars(module.WRITEUP), vars(module.SOURCE)
        same = [k for k in w if w[k] == s[k]]
        assert same == [], f"{module.__name__}: {same} are the same in both profiles"


def test_the_specs_import_no_data_code() -> None:
    heavy = (
        "PIL.ImageDraw",
        "scipy",
        "support.evaluations.pointing.prepare",
        "support.evaluations.pointing.task",
        "support.evaluations.nyu_distance.task",
    )
    code = (
        "import sys, support.evaluations.pointing.spec, support.evaluations.nyu_distance.spec; "
        f"print(sorted(set({heavy!r}) & set(sys.modules)))"
    )
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr
