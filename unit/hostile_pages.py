"""Script payloads for the report pages (issue 34), and a headless browser that renders a page.

A payload is markup that, parsed as HTML, runs `document.title = '<marker>'` (each place it is
planted has its own marker), so a page in which one ran has that marker as its title. They are
planted in:

- a model name: `--model "scripted:hostile_pages:<MODEL_PAYLOAD>"`, a function of this module
  under that name (scripted names take no dot, so this one sets `document['title']`);
- a case id: a data file named FILE_PAYLOAD (a SurgVU question folder, see test_report_browser);
- an answer: `answer` returns ANSWER_PAYLOAD; and an error: on one request of the process
  (FAULT_TURN) it raises PageFault with ERROR_PAYLOAD, which also carries terminal escape sequences
  (TERMINAL_ESCAPES: a window title, a screen clear) that the terminal must not receive.

`rendered(page)` is the DOM of a page after its scripts ran, from Chromium's `--dump-dom`
(None when no Chromium is installed); `scan(dom)` says what ran and what shows as text.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from support.types import Request

MARK = "XSS"  # every payload's title starts with it
MODEL_PAYLOAD = f"<img src=x onerror=document['title']='{MARK}-model'>"
FILE_PAYLOAD = f"<img src=x onerror=document.title='{MARK}-file'>"
ANSWER_PAYLOAD = (
    f"<script>document.title='{MARK}-answer'</script>"
    f"<img src=x onerror=document.title='{MARK}-answer'>"
)
TERMINAL_ESCAPES = "\x1b]0;pwned-title\x07\x1b[2J\x1b[31m"  # OSC title, clear screen, red
ERROR_PAYLOAD = f"<img src=x onerror=document.title='{MARK}-error'>{TERMINAL_ESCAPES}"
PAYLOADS = {
    "model": MODEL_PAYLOAD,
    "file": FILE_PAYLOAD,
    "answer": ANSWER_PAYLOAD,
    "error": ERROR_PAYLOAD,
}
MODEL = f"scripted:hostile_pages:{MODEL_PAYLOAD}"
BROWSER_TIMEOUT_S = 60  # one page rendered (~2 s here)
VIRTUAL_TIME_MS = 5000  # the page's timers and loads Chromium lets run before it dumps the DOM
RENDER_TRIES = 3  # renders of a page whose expected text is not shown yet (rendered)
# flags that work in a container without a display, a session bus or a network
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--virtual-time-budget={VIRTUAL_TIME_MS}",
    "--dump-dom",
)

FAULT_TURN = 1  # the request (0-based, per process) that fails
_turn = itertools.count()
_lock = threading.Lock()


class PageFault(RuntimeError):
    """What the payload model raises on its FAULT_TURN-th request."""


def answer(request: Request) -> str:
    """ANSWER_PAYLOAD; PageFault with ERROR_PAYLOAD on the process's FAULT_TURN-th request only
    (one case errs; a sequence of rounds, which stops at an error, keeps its other searches)."""
    with _lock:
        turn = next(_turn)
    if turn == FAULT_TURN:
        raise PageFault(ERROR_PAYLOAD)
    return ANSWER_PAYLOAD


globals()[MODEL_PAYLOAD] = answer  # the model's name is the payload


def chromium() -> str | None:
    """The Chromium executable, or None."""
    return next(
        (p for n in ("chromium", "chromium-browser") if (p := shutil.which(n)) is not None), None
    )


def rendered(page: Path, expect: Sequence[str] = ()) -> str | None:
    """The DOM of `page` after its scripts ran (Chromium's --dump-dom), or None without Chromium.
    Each call has its own profile folder, removed after. pytest-html builds its table in script
    after load: on a loaded machine a dump may come before it is done, so while a text of
    `expect` is missing the page is rendered again with twice the virtual time (3 tries; a page
    that never shows it is returned as it was last dumped)."""
    exe = chromium()
    if exe is None:
        return None
    dom = ""
    for attempt in range(RENDER_TRIES):
        flags = [f for f in CHROMIUM_FLAGS if not f.startswith("--virtual-time-budget=")]
        flags.append(f"--virtual-time-budget={VIRTUAL_TIME_MS * 2**attempt}")
        with tempfile.TemporaryDirectory(prefix="vlmbench-chromium-") as profile:
            done = subprocess.run(
                [exe, *flags, f"--user-data-dir={profile}", page.resolve().as_uri()],
                capture_output=True,
                text=True,
                timeout=BROWSER_TIMEOUT_S,
                check=False,
            )
        if done.returncode != 0 or "<html" not in done.stdout:
            raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
        dom = done.stdout
        text = scan(dom).text
        if all(e in text for e in expect):
            break
    return dom


@dataclass
class Scan:
    """What a DOM holds: its title, its text, and what could have run."""

    title: str = ""
    text: str = ""
    handlers: list[str] = field(default_factory=list)  # on* attribute values
    scripts: list[str] = field(default_factory=list)  # <script> contents

    def ran(self) -> list[str]:
        """Evidence of a payload that ran, or became live markup: empty for an inert page."""
        found = [f"title {self.title!r}"] if MARK in self.title else []
        found += [f"handler {h!r}" for h in self.handlers if MARK in h]
        found += [f"script {s[:80]!r}" for s in self.scripts if MARK in s]
        return found


class _Scanner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scan = Scan()
        self._texts: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scan.handlers += [v or "" for k, v in attrs if k.startswith("on")]
        if tag in ("title", "script", "style"):
            self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        where = self._in[-1] if self._in else None
        if where == "title":
            self.scan.title += data
        elif where == "script":
            self.scan.scripts.append(data)
        elif where is None:
            self._texts.append(data)


def scan(dom: str) -> Scan:
    """The title, text, event handlers and scripts of a dumped DOM."""
    parser = _Scanner()
    parser.feed(dom)
    parser.close()
    parser.scan.text = "".join(parser._texts)
    return parser.scan
