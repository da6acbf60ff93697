"""Adaptive concurrency: how many requests a model client lets in flight (`--concurrency auto`).

`Aimd` holds the rules, on a clock it is given (tests pass a fake one). A 429 comes from a rate (a
token bucket: time brings the next token), a cap on requests in flight (an answer frees a place),
or both. Requests at the server are those in flight (`in_flight`: the places `AdaptiveSemaphore`
holds) less those waiting out a 429's `retry-after` inside the SDK's retry (they hold a place, but
are not at the server).
- slow start: one more place per answer (the limit doubles each round trip) until the first 429;
- pacing: the places answers earn (slow start, regrowth to a cap) are added one at a time, one per
  round trip / size (seconds), so a burst of answers does not send a burst past a limit before its
  429s come back;
- which limit: a 429 whose `retry-after` is at least the fastest answer's latency is a cap's, and
  its count is the requests at the server when it came, itself included; a shorter one is a
  rate's (a bucket's next token comes sooner than an answer at any concurrency above one), with
  no count. A cap answering with a shorter `retry-after` is handled as a rate (slower to settle);
- decrease, once a round trip and never for a request sent before the last cut: a cap's 429 to
  one below its count (and by `decrease` as well, unless it came where the last cut did: a probe
  that failed); a rate's by `decrease`, or `slow_start_decrease` when it ends slow start (the limit
  doubled in the round trip before); one less at least. Every other cap's 429 of that round trip
  lowers the limit to one below its own count, so a burst of 429s past a cap ends just under it;
  refused requests count against the limit while they wait, so their retries find a place.
  `cut_size` is the count (a cap's, the smallest of the round trip) or the size (a rate's);
- regrowth: after a cap's cut, one place per answer (paced) back to one below `cut_size`; after a
  rate's, one per round trip (a full window of answers) back there; then probes past it, one
  place after `probe_windows` round trips, the next after half as many while they hold (one at
  least); a probe that fails where the last cut was doubles that wait (8 x `probe_windows` at
  most). Growth needs the limit in use and latency within `latency_factor` of the fastest seen;
- a pause of new sends after a 429: its whole `retry-after` when nothing else was at the server;
  else at most the time in which one of those is answered on average (round trip / their number,
  seconds): under a cap an answer frees a place sooner than the `retry-after` (pausing every send
  for it left the cap's places idle), under a rate the lower limit paces what follows.
`AdaptiveSemaphore` is the asyncio semaphore whose size, pauses and paced growth follow it.

No well-kept library does this for asyncio (PyPI, November 2026): aiolimiter and asyncio-throttle
limit a rate, not concurrency from feedback; ace-concurrency 0.1.1, adaptive-concurrency 0.1.1 and
aimd-limiter 0.1.0 are single early releases of one author each.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

AUTO = "auto"


@dataclass(frozen=True)
class AimdSettings:
    """The controller's constants."""

    start: int = 8  # requests in flight at first (as a fixed limit's Backend.default_concurrency)
    minimum: int = 1
    maximum: int = 64  # also sizes the client's window of cases (twice this)
    increase: float = 1.0  # requests added per round trip of successes (a full window)
    probe_windows: int = 8  # round trips before a probe past one below the last cut's size
    slow_start: bool = True  # double per round trip until the first 429 (TCP's slow start)
    decrease: float = 0.85  # the limit is multiplied by this on a 429
    slow_start_decrease: float = 0.5  # ... on a rate's 429 that ends slow start (it doubled)
    latency_factor: float = 2.0  # no growth while latency exceeds this multiple of the fastest
    max_pause_s: float = 60.0  # a longer retry-after is cut to this (seconds)
    unknown_round_trip_s: float = 1.0  # the round trip before any answer came (seconds)


class Aimd:
    """Additive-increase, multiplicative-decrease limit of requests in flight, on `clock`
    (seconds, monotonic). Feed it `on_success` and `on_rate_limited`, and keep `in_flight`
    (AdaptiveSemaphore does); read `size` and `pause_left`."""

    def __init__(
        self, settings: AimdSettings | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = s = settings or AimdSettings()
        self.clock = clock
        self.limit = float(min(max(s.start, s.minimum), s.maximum))
        self.in_flight = 0  # requests admitted and not yet done, SDK retries' waits included
        self._owed = 0  # steps of growth answers earned (slow start, regrowth), not yet paid
        self._owed_ceiling = float(s.maximum)  # the most they may raise the limit to
        self._next_step_at = float("-inf")  # clock time the next owed step may be paid
        self._window_successes = 0  # answers since the limit last grew (or was cut)
        self._probes = 0  # increases past one below `cut_size` since the last cut
        self._probe_windows = s.probe_windows  # round trips of the first of them
        self._at_cap = False  # `cut_size` is a cap's count (not the size a rate's 429 came at)
        self.cut_size: int | None = None  # requests at the server when 429s came (last cut's)
        self.peak = self.size  # the largest size reached
        self.rate_limited = 0  # 429s seen
        self.cuts = 0  # decreases made
        self.fastest_s: float | None = None  # the fastest successful request (seconds)
        self.round_trip_s = 0.0  # moving average of successful requests' latency (seconds)
        self.paused_until = float("-inf")  # clock time before which nothing new is sent
        self._cut_at = float("-inf")  # clock time of the last decrease
        self._retries_at: list[float] = []  # clock times the SDK retries refused requests, sorted

    @property
    def size(self) -> int:
        """Requests allowed in flight now (a step of earned growth paid when due)."""
        self._pay()
        return max(self.settings.minimum, int(self.limit))

    def step_due_in(self) -> float | None:
        """Seconds until the next step of earned growth is paid (None: none owed)."""
        if self._owed <= 0:
            return None
        return max(0.0, self._next_step_at - self.clock())

    def _earn(self, ceiling: float) -> None:
        """An answer earned one more place (up to `ceiling`): paid now or when due."""
        self._owed_ceiling = ceiling
        if self.limit + self._owed < ceiling:
            self._owed += 1
        self._pay()

    def _pay(self) -> None:
        """Pay one step of earned growth if due; the next is due a round trip / size later
        (seconds): paced, so a burst of answers does not send a burst past a limit at once."""
        if self._owed <= 0:
            return
        now = self.clock()
        if now < self._next_step_at:
            return
        self._owed -= 1
        self.limit = max(self.limit, min(self._owed_ceiling, self.limit + 1.0))
        self.peak = max(self.peak, int(self.limit))
        round_trip = self.round_trip_s or self.settings.unknown_round_trip_s
        self._next_step_at = now + round_trip / max(1.0, self.limit)

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
        # demand below the limit: growing would prove nothing (the places held count: a request
        # admitted may not have reached the backend yet)
        if max(in_flight, self.in_flight) < self.size:
            return
        if latency_s > s.latency_factor * self.fastest_s:  # the server is queueing
            return
        if self.cut_size is None and s.slow_start:  # slow start: one more an answer
            self._earn(float(s.maximum))
            return
        below = self.cut_size is not None and self.size + 1 < self.cut_size  # where it failed
        if below and self._at_cap:  # below a cap's count: back there as fast
            self._earn(float(self.cut_size - 1))
            return
        self._window_successes += 1
        windows = 1  # below a rate's cut: one a round trip
        if self.cut_size is not None and not below:  # near or past it: slowly, then faster
            windows = max(1, self._probe_windows >> self._probes)
        if self._window_successes < windows * self.size:  # a round trip: a full window answered
            return
        self._window_successes = 0
        if self.cut_size is not None and not below:
            self._probes += 1  # a probe that held
        self.limit = min(float(s.maximum), self.limit + s.increase)
        self.peak = max(self.peak, self.size)

    def on_rate_limited(self, retry_after_s: float | None, sent_at: float | None = None) -> None:
        """A 429 came back (the SDK will retry it after `retry_after_s` seconds): pause new sends
        and cut the limit (module docstring), unless the request was sent (`sent_at`, on the
        clock) before the last cut or the last cut was less than a round trip ago: then only
        lower it to below a cap's count."""
        s = self.settings
        now = self.clock()
        self.rate_limited += 1
        wait = min(retry_after_s, s.max_pause_s) if retry_after_s and retry_after_s > 0 else 0.0
        retries = self._retries_at
        del retries[: bisect.bisect_right(retries, now)]  # retried by now: at the server again
        # requests at the server when it refused this one, this one included (0: not kept)
        at_server = max(1, self.in_flight - len(retries)) if self.in_flight > 0 else 0
        round_trip = self.round_trip_s or s.unknown_round_trip_s
        if wait > 0.0:  # its whole retry-after, or until one of the others is answered
            bisect.insort(retries, now + wait)
            others = at_server - 1
            pause = min(wait, round_trip / others) if others > 0 else wait
            self.paused_until = max(self.paused_until, now + pause)
        # a cap's count: the requests at the server, where the wait is no shorter than an answer
        # (a rate's 429 asks for the time to its next token, shorter at any concurrency > 1)
        count = at_server if at_server and wait >= (self.fastest_s or round_trip) else None
        if (sent_at is not None and sent_at <= self._cut_at) or now - self._cut_at < max(
            round_trip, retry_after_s or 0.0
        ):  # news of a round trip already cut for: no new cut, but never at a cap's count
            if count is not None and self.cut_size is not None:
                self.cut_size = min(self.cut_size, count)
                self._at_cap = True
                self._owed = 0
                self.limit = float(max(s.minimum, min(self.limit, count - 1)))
            return
        self._cut_at = now
        self.cuts += 1
        size = self.size
        # where the last cut was (or past it): a probe failed; its next waits twice as long
        again = self.cut_size is not None and (count or size) >= self.cut_size
        if count is not None:  # a cap: one below its count, and by `decrease` unless a probe
            cut = count - 1 if again else min(count - 1, round(self.limit * s.decrease))
        else:  # a rate: by `decrease`, or `slow_start_decrease` when it ends slow start
            ends_slow_start = self.cut_size is None and s.slow_start
            factor = min(s.slow_start_decrease, s.decrease) if ends_slow_start else s.decrease
            cut = round(self.limit * factor)
        # one less at least, rounded: 7 -> 5 at 0.75 (not 5.25's floor of a fraction)
        cut = min(size - 1, cut)
        self._probe_windows = (
            min(8 * s.probe_windows, 2 * self._probe_windows) if again else s.probe_windows
        )
        self.cut_size = count if count is not None else size
        self._at_cap = count is not None
        self.limit = float(max(s.minimum, cut))
        self._window_successes = 0
        self._probes = 0
        self._owed = 0

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
    while `aimd.pause_left()` is positive; the places it holds are `aimd.in_flight`. Call
    `changed()` after feeding the controller, so that waiters see a grown limit."""

    def __init__(self, aimd: Aimd) -> None:
        self.aimd = aimd
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def held(self) -> int:
        """Places held now (requests admitted and not yet released)."""
        return self.aimd.in_flight

    @held.setter
    def held(self, value: int) -> None:
        self.aimd.in_flight = value

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
        """Wake the waiters the limit now admits; when paused, or while the limit grows step by
        step, look again once the pause ends or the next step is due."""
        aimd = self.aimd
        wait: float | None = aimd.pause_left()
        if not wait:
            while self._waiters and self.held < aimd.size:
                fut = self._waiters.popleft()
                if not fut.done():
                    self.held += 1
                    fut.set_result(None)
            wait = aimd.step_due_in()
        if wait is None or not self._waiters:
            return
        loop = asyncio.get_running_loop()
        at = loop.time() + wait
        if self._timer is not None and self._timer.when() <= at:
            return  # it looks again soon enough
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(at, self._wake)

    def _wake(self) -> None:
        self._timer = None
        self.changed()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


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
