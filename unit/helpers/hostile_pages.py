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

`rendered(page, expect)` is the DOM of a page after its scripts ran (None when no Chromium is
installed), read from headless Chromium over the DevTools protocol once the page shows the texts
it is expected to show; `scan(dom)` says what ran and what shows as text.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
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
BROWSER_TIMEOUT_S = 60  # one page rendered, from launch to close (~1 s here)
VIRTUAL_TIME_MS = 5000  # the page's timers and loads Chromium lets run before the DOM is read
SETTLE_S = 10  # of BROWSER_TIMEOUT_S, kept after the wait for the expected texts (budget, read)
CLOSE_S = 5  # a closed browser's time to exit before it is killed
# flags that work in a container without a display, a session bus or a network; the protocol
# on the child's fd 3 (commands) and fd 4 (answers, events)
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)
# Popen has no fd map and a preexec_fn is unsafe with threads: a shell moves the pipes Popen
# sets on stdin and stdout onto fds 3 and 4, then execs the browser with stdout on stderr
_ON_PIPE_FDS = 'exec "$@" 3<&0 4>&1 0</dev/null 1>&2'
# resolves true once every text of `want` is in the page's text (the text nodes outside
# <script>, <style> and <title>, what `scan` reads as text), false after `ms` milliseconds
_SHOWS_JS = """new Promise(resolve => {
  const want = %s, skip = new Set(["script", "style", "title"]);
  const shows = () => {
    const walk = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_TEXT);
    let text = "";
    for (let n = walk.nextNode(); n; n = walk.nextNode())
      if (!skip.has(n.parentNode.localName)) text += n.data;
    return want.every(w => text.includes(w));
  };
  if (shows()) return resolve(true);
  const seen = new MutationObserver(() => {
    if (shows()) { seen.disconnect(); clearTimeout(late); resolve(true); }
  });
  const late = setTimeout(() => { seen.disconnect(); resolve(false); }, %d);
  seen.observe(document, {childList: true, subtree: true, characterData: true});
})"""
_DOM_JS = (
    "(document.doctype ? new XMLSerializer().serializeToString(document.doctype) + '\\n' : '')"
    " + document.documentElement.outerHTML"
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
    """The DOM of `page` after its scripts ran, or None without Chromium. The render waits on
    conditions: the page's load event, then every text of `expect` in the page's text (at most
    until SETTLE_S before BROWSER_TIMEOUT_S: a page that never shows one is returned as it is),
    then VIRTUAL_TIME_MS of virtual time for pending timers and loads (what --virtual-time-budget
    gives). pytest-html builds its table in script after load, so a dump on a timer raced it; the
    wait on its text does not. Each call has its own browser and profile folder, removed after."""
    exe = chromium()
    if exe is None:
        return None
    deadline = time.monotonic() + BROWSER_TIMEOUT_S
    with tempfile.TemporaryDirectory(prefix="vlmbench-chromium-") as folder:
        log, profile = Path(folder) / "stderr.log", Path(folder) / "profile"
        command = ["/bin/sh", "-c", _ON_PIPE_FDS, "sh", exe, *CHROMIUM_FLAGS]
        command += [f"--user-data-dir={profile}", "about:blank"]
        with log.open("wb") as stderr:
            browser = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                bufsize=0,
                start_new_session=True,  # its own process group: killed whole if it hangs
            )
        cdp = _Cdp(browser, log, deadline)
        try:
            return _render(cdp, page, expect)
        finally:
            cdp.close()


def _render(cdp: _Cdp, page: Path, expect: Sequence[str]) -> str:
    """The DOM of `page` in a new tab of `cdp`'s browser, read after the waits `rendered` says."""
    target = cdp.call("Target.createTarget", url="about:blank")["targetId"]
    tab = cdp.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    cdp.call("Page.enable", tab)
    nav = cdp.call("Page.navigate", tab, url=page.resolve().as_uri())
    if nav.get("errorText"):
        raise RuntimeError(f"chromium: Page.navigate to {page}: {nav['errorText']}")
    # the load event of this navigation's document: after its main frame commits (loaderId)
    cdp.event(
        "Page.frameNavigated",
        tab,
        lambda p: "parentId" not in p["frame"] and p["frame"]["loaderId"] == nav["loaderId"],
    )
    cdp.event("Page.loadEventFired", tab)
    if expect:
        wait_ms = int((cdp.deadline - SETTLE_S - time.monotonic()) * 1000)
        _evaluate(cdp, tab, _SHOWS_JS % (json.dumps(list(expect)), max(wait_ms, 0)))
    cdp.call(
        "Emulation.setVirtualTimePolicy",
        tab,
        policy="pauseIfNetworkFetchesPending",
        budget=VIRTUAL_TIME_MS,
    )
    cdp.event("Emulation.virtualTimeBudgetExpired", tab)
    return _evaluate(cdp, tab, _DOM_JS)


def _evaluate(cdp: _Cdp, tab: str, expression: str) -> object:
    """The value of `expression` in the page of session `tab` (a promise's, once it settles)."""
    done = cdp.call(
        "Runtime.evaluate", tab, expression=expression, awaitPromise=True, returnByValue=True
    )
    if "exceptionDetails" in done:
        raise RuntimeError(f"chromium: Runtime.evaluate threw: {done['exceptionDetails']}")
    return done["result"].get("value")


class _Cdp:
    """The DevTools protocol over --remote-debugging-pipe: each message a JSON text ended by a
    NUL byte, commands to the browser's stdin pipe (its fd 3), answers and events from its stdout
    pipe (its fd 4). Every read ends by `deadline` (time.monotonic(), seconds)."""

    def __init__(self, browser: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
        self.browser, self.log, self.deadline = browser, log, deadline
        self._ids = itertools.count(1)
        self._buffer = bytearray()  # read, not yet split into messages
        self._events: list[dict] = []  # received, not yet waited for, in order

    def call(self, method: str, session: str | None = None, **params: object) -> dict:
        """The result of command `method` (to the browser, or to a tab's `session`)."""
        message: dict[str, object] = {"id": next(self._ids), "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        try:
            os.write(self.browser.stdin.fileno(), json.dumps(message).encode() + b"\0")
        except OSError as e:  # it closed fd 3: it is exiting
            raise self._exited(method) from e
        while True:
            got = self._read(method)
            if got.get("id") == message["id"]:
                if "error" in got:
                    raise RuntimeError(f"chromium: {method} failed: {got['error']}")
                return got.get("result", {})
            if "method" in got:
                self._events.append(got)

    def event(
        self, method: str, session: str, match: Callable[[dict], bool] = lambda p: True
    ) -> dict:
        """The params of the first `method` event of `session` that `match`es, dropping the
        events before it."""
        while True:
            got = self._events.pop(0) if self._events else self._read(method)
            if (
                got.get("method") == method
                and got.get("sessionId") == session
                and match(got.get("params", {}))
            ):
                return got.get("params", {})

    def _read(self, waiting: str) -> dict:
        """The next message, read by the deadline."""
        fd = self.browser.stdout.fileno()
        end = self._buffer.find(b"\0")
        while end < 0:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(
                    f"chromium: no {waiting} in {BROWSER_TIMEOUT_S} s: {self._stderr()}"
                )
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # it closed fd 4: it is exiting
                raise self._exited(waiting)
            end = chunk.find(b"\0")
            end = end if end < 0 else len(self._buffer) + end  # only the new bytes searched
            self._buffer += chunk
        text = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return json.loads(text)

    def _exited(self, waiting: str) -> RuntimeError:
        """The error of a browser that exits before `waiting`: its exit status, its stderr."""
        try:
            code: int | None = self.browser.wait(timeout=CLOSE_S)
        except subprocess.TimeoutExpired:
            code = None
        return RuntimeError(f"chromium exited ({code}) before {waiting}: {self._stderr()}")

    def _stderr(self) -> str:
        """The tail of the browser's stderr."""
        return self.log.read_text(encoding="utf-8", errors="replace")[-2000:]

    def close(self) -> None:
        """Browser.close, then the browser's process group killed if it has not exited."""
        try:
            message = {"id": next(self._ids), "method": "Browser.close"}
            os.write(self.browser.stdin.fileno(), json.dumps(message).encode() + b"\0")
        except OSError:
            pass  # exited already
        try:
            self.browser.wait(timeout=CLOSE_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.browser.pid, signal.SIGKILL)  # not reaped yet: still its group
            self.browser.wait()
        finally:
            self.browser.stdin.close()
            self.browser.stdout.close()


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
