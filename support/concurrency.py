"""Adaptive concurrency: how many requests a model client lets in flight (`--concurrency auto`).

`Aimd` holds the rules, on a clock it is given (tests pass a fake one):
- slow start: the limit doubles each round trip (a full window of answers) until the first 429;
- additive increase: then one more request per round trip while the limit is in use and latency
  stays within `latency_factor` of the fastest seen, and one per `probe_windows` round trips from
  one below the size at which the last 429 came (back to where it failed, slowly);
- multiplicative decrease (`decrease`, by one at least) on a 429, once a round trip at most,
  and never for a request sent before the last cut (that cut already answered it);
- a pause of new sends until the 429's `retry-after` has passed.
`AdaptiveSemaphore` is the asyncio semaphore whose size and pauses follow it.

No well-kept library does this for asyncio (PyPI, November 2026): aiolimiter and asyncio-throttle
limit a rate, not concurrency from feedback; ace-concurrency 0.1.1, adaptive-concurrency 0.1.1 and
aimd-limiter 0.1.0 are single early releases of one author each.
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

AUTO = "auto"


@dataclass(frozen=True)
class AimdSettings:
    """The controller's constants."""

    start: int = 8  # requests in flight at first (the old fixed default)
    minimum: int = 1
    maximum: int = 64  # also sizes the client's window of cases (twice this)
    increase: float = 1.0  # requests added per round trip of successes (a full window)
    probe_windows: int = 8  # round trips per increase from one below the size of the last cut
    slow_start: bool = True  # double per round trip until the first 429 (TCP's slow start)
    decrease: float = 0.85  # the limit is multiplied by this on a 429
    latency_factor: float = 2.0  # no growth while latency exceeds this multiple of the fastest
    max_pause_s: float = 60.0  # a longer retry-after is cut to this (seconds)
    unknown_round_trip_s: float = 1.0  # the round trip before any answer came (seconds)


class Aimd:
    """Additive-increase, multiplicative-decrease limit of requests in flight, on `clock`
    (seconds, monotonic). Feed it `on_success` and `on_rate_limited`; read `size` and
    `pause_left`."""

    def __init__(
        self, settings: AimdSettings | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = s = settings or AimdSettings()
        self.clock = clock
        self.limit = float(min(max(s.start, s.minimum), s.maximum))
        self._window_successes = 0  # answers since the limit last grew (or was cut)
        self.cut_size: int | None = None  # the size at which the last 429 came
        self.peak = self.size  # the largest size reached
        self.rate_limited = 0  # 429s seen
        self.cuts = 0  # decreases made
        self.fastest_s: float | None = None  # the fastest successful request (seconds)
        self.round_trip_s = 0.0  # moving average of successful requests' latency (seconds)
        self.paused_until = float("-inf")  # clock time before which nothing new is sent
        self._cut_at = float("-inf")  # clock time of the last decrease

    @property
    def size(self) -> int:
        """Requests allowed in flight now."""
        return max(self.settings.minimum, int(self.limit))

    def pause_left(self) -> float:
        """Seconds until new requests may be sent (0 when they may)."""
        return max(0.0, self.paused_until - self.clock())

    def on_success(self, latency_s: float, in_flight: int) -> None:
        """A request came back answered after `latency_s` seconds, with `in_flight` requests
        (itself included) at the backend: grow when the limit was in use and latency is flat."""
        s = self.settings
        self.fastest_s = latency_s if self.fastest_s is None else min(self.fastest_s, latency_s)
        avg = self.round_trip_s
        self.round_trip_s = latency_s if avg == 0.0 else 0.8 * avg + 0.2 * latency_s
        if in_flight < self.size:  # demand below the limit: growing would prove nothing
            return
        if latency_s > s.latency_factor * self.fastest_s:  # the server is queueing
            return
        self._window_successes += 1
        windows = 1
        if self.cut_size is not None and self.size + 1 >= self.cut_size:  # near where it failed
            windows = s.probe_windows
        if self._window_successes < windows * self.size:  # a round trip: a full window answered
            return
        self._window_successes = 0
        step = self.size if s.slow_start and self.cut_size is None else s.increase
        self.limit = min(float(s.maximum), self.limit + step)
        self.peak = max(self.peak, self.size)

    def on_rate_limited(self, retry_after_s: float | None, sent_at: float | None = None) -> None:
        """A 429 came back (the SDK will retry it): pause for `retry_after_s` and cut the
        limit, unless the request was sent (`sent_at`, on the clock) before the last cut or the
        last cut was less than a round trip ago."""
        s = self.settings
        now = self.clock()
        self.rate_limited += 1
        if retry_after_s is not None and retry_after_s > 0:
            self.paused_until = max(self.paused_until, now + min(retry_after_s, s.max_pause_s))
        if sent_at is not None and sent_at <= self._cut_at:
            return  # sent before the last cut took effect
        round_trip = self.round_trip_s or s.unknown_round_trip_s
        if now - self._cut_at < max(round_trip, retry_after_s or 0.0):
            return  # one cut a round trip: a retry of a request refused before the cut
        self._cut_at = now
        self.cuts += 1
        self.cut_size = self.size
        # at least one less, rounded: 7 -> 5 at 0.75 (not 5.25's floor of a fraction)
        self.limit = float(max(s.minimum, min(self.size - 1, round(self.limit * s.decrease))))
        self._window_successes = 0

    def stats(self) -> dict[str, object]:
        """The controller's state as plain JSON (for ModelClient.stats)."""
        return {
            "concurrency": "auto",
            "concurrency_now": self.size,
            "concurrency_peak": self.peak,
            "concurrency_cuts": self.cuts,
        }


class AdaptiveSemaphore:
    """An asyncio semaphore whose size is `aimd.size` at each acquire, and which admits nothing
    while `aimd.pause_left()` is positive. Call `changed()` after feeding the controller, so
    that waiters see a grown limit."""

    def __init__(self, aimd: Aimd) -> None:
        self.aimd = aimd
        self.held = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def _free(self) -> bool:
        return self.held < self.aimd.size and self.aimd.pause_left() == 0.0

    async def acquire(self) -> None:
        if not self._waiters and self._free():
            self.held += 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self.changed()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # admitted, then cancelled: give it back
                self.release()
            elif fut in self._waiters:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        self.held -= 1
        self.changed()

    def changed(self) -> None:
        """Wake the waiters the limit now admits; when paused, look again once it ends."""
        pause = self.aimd.pause_left()
        if pause > 0.0:
            if self._timer is None and self._waiters:
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(pause, self._wake)
            return
        while self._waiters and self.held < self.aimd.size:
            fut = self._waiters.popleft()
            if not fut.done():
                self.held += 1
                fut.set_result(None)

    def _wake(self) -> None:
        self._timer = None
        self.changed()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds a 429 asks the client to wait: `retry-after-ms`, else `retry-after` (seconds or
    an HTTP date); None when neither is there or readable."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def parse_concurrency(value: str) -> int | str:
    """`--concurrency` -> a positive int or "auto"; ValueError naming the option otherwise."""
    text = value.strip().lower()
    if text == AUTO:
        return AUTO
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"--concurrency {value!r}: expected a positive integer or 'auto'")
    return n
