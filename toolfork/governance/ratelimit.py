"""Rate limits ("10/s", "30/min", "100/h") as a smooth token bucket a scheduler can consult.

Why this shape: a scheduler must not park a worker (or a thread) on a rate limit, so the bucket never
sleeps; it answers `try_acquire(now)` (take a token if one is there) and `next_ready(now)` (when the
next one will be), and the scheduler waits on its own clock. Why smooth: the bucket is the generic cell
rate algorithm, where each token is due one interval (1/rate) after the last, so "10/s" lets calls out
every 0.1 s, not ten at the start of each second; `burst` (default 1) is how many may go back to back
after a quiet spell. `reserve(now)` is the waiting form for a caller that sleeps on its own. Time is
passed in (or taken from an injected clock), so it can be tested without sleeping. All methods are safe
to call from several threads.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
          "h": 3600.0, "hr": 3600.0, "hour": 3600.0}
_FORM = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)?\s*/\s*(?P<unit>[a-z]+)\s*$")


# The slowest rate: the driver waits for the next token in one select/epoll call, whose timeout is a
# C int of milliseconds (2**31 - 1 ms, about 24.8 days; 2,000,000 s keeps a margin for rounding). The
# fastest: a token interval of 1 ns, the finest the monotonic clock tells apart.
MAX_INTERVAL_S = 2_000_000.0
MIN_INTERVAL_S = 1e-9
MAX_BURST = 10**6


class RateLimitError(ValueError):
    """A rate limit string or value is invalid; the message names the setting and the value given."""


@dataclass(frozen=True)
class RateLimit:
    """`per_second` calls per second, at most `burst` back to back."""

    per_second: float
    burst: int = 1
    text: str = ""

    def __post_init__(self) -> None:
        shown = self.text or f"{self.per_second!r}/s"
        rate = self.per_second
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0 or not math.isfinite(rate):
            raise RateLimitError(f"rate_limit={shown!r}: the number of calls must be a finite number more than 0")
        if 1.0 / rate > MAX_INTERVAL_S:
            raise RateLimitError(f"rate_limit={shown!r} is too slow: one call every {1.0 / rate:.0f} s, and the "
                                 f"longest wait between two calls is {MAX_INTERVAL_S:.0f} s (about 23 days)")
        if 1.0 / rate < MIN_INTERVAL_S:
            raise RateLimitError(f"rate_limit={shown!r} is too fast: at most {1 / MIN_INTERVAL_S:.0f} calls a "
                                 "second (1 ns apart, the finest the clock tells apart)")
        burst = self.burst
        if not isinstance(burst, int) or isinstance(burst, bool) or not 1 <= burst <= MAX_BURST:
            raise RateLimitError(f"rate_limit={shown!r}: burst={burst!r} must be a whole number from 1 to "
                                 f"{MAX_BURST}")

    @classmethod
    def parse(cls, text: str, *, setting: str = "rate_limit", burst: int = 1) -> RateLimit:
        """Read "N/s", "N/min" or "N/h" (N defaults to 1: "/min" is one call a minute)."""
        if not isinstance(text, str):
            raise RateLimitError(f"{setting}={text!r}: give a string such as '10/s', '30/min' or '100/h'")
        match = _FORM.match(text.lower())
        unit = _UNITS.get(match["unit"]) if match else None
        if match is None or unit is None:
            raise RateLimitError(f"{setting}={text!r} is not a rate: give N/s, N/min or N/h, e.g. '10/s'")
        count = float(match["n"]) if match["n"] is not None else 1.0
        if count <= 0:
            raise RateLimitError(f"{setting}={text!r}: the number of calls must be more than 0")
        try:
            return cls(count / unit, burst, text)
        except RateLimitError as exc:
            raise RateLimitError(str(exc).replace("rate_limit=", f"{setting}=", 1)) from None


class TokenBucket:
    """A thread-safe, smooth token bucket; `clock` (default time.monotonic) is used when `now` is not given."""

    def __init__(self, rate: RateLimit | str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = RateLimit.parse(rate) if isinstance(rate, str) else rate
        self._interval = 1.0 / self.rate.per_second
        self._tolerance = (self.rate.burst - 1) * self._interval
        self._clock = clock
        self._lock = threading.Lock()
        self._due = -math.inf  # theoretical arrival time of the next token

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    def next_ready(self, now: float | None = None) -> float:
        """When the next token can be taken: `now` (or earlier) if one is there now."""
        t = self._now(now)
        with self._lock:
            return max(t, self._due - self._tolerance)

    def reserve(self, now: float | None = None) -> float:
        """Take the next token whenever it comes; returns when that is (``now`` or later), for a caller
        that waits on its own (the Ray sink actor, which spaces the starts of the tasks of a tool)."""
        t = self._now(now)
        with self._lock:
            at = max(t, self._due - self._tolerance)
            self._due = max(self._due, at) + self._interval
            return at

    def try_acquire(self, now: float | None = None) -> bool:
        """Take a token if one is there at `now`; never waits."""
        t = self._now(now)
        with self._lock:
            if t < self._due - self._tolerance:
                return False
            self._due = max(self._due, t) + self._interval
            return True
