"""`printable`: text as a terminal may show it, for every line the suite prints.

pytest's terminal (reports.terminal) and the command-line tools (vlmbench-compare, its
leaderboard) print model names, answers, errors, summary labels, manifest fields and folder
names, any of which may come from a model, a server or a shared results folder: each goes
through `printable` first, so none can set the window title (OSC 0), plant a link (OSC 8),
write the clipboard (OSC 52) or clear the screen.
"""

from __future__ import annotations

import re

# ECMA-48 sequences, removed whole: CSI (`ESC [` or 0x9b, parameters, final byte), a terminated
# OSC/DCS/APC/PM/SOS string (`ESC ]` ... BEL or ST), a two-character escape (`ESC x`); then every
# other C0/C1 control but tab and newline (DEL too), e.g. what is left of an unterminated string
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -~]"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` as the terminal may show it: escape sequences and C0/C1 control characters removed
    (tab and newline kept), so a server's or a model's text cannot drive the terminal."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))
