"""The token bucket, on an injected clock: parsing, smooth spacing (no bursts at second boundaries),
bursts when asked, next_ready for a scheduler, and exact accounting under threads."""

from __future__ import annotations

import itertools
import threading

import pytest

from toolfork.governance import RateLimit, RateLimitError, TokenBucket


@pytest.mark.parametrize(("text", "per_second"), [
    ("10/s", 10.0), ("30/min", 0.5), ("/min", 1 / 60), ("7200/h", 2.0), ("2.5 / sec", 2.5), ("1/hour", 1 / 3600),
])
def test_rates_are_parsed(text: str, per_second: float) -> None:
    assert RateLimit.parse(text).per_second == pytest.approx(per_second)


@pytest.mark.parametrize("text", ["fast", "10", "0/s", "10/fortnight", "-1/s", "10/s/s", ""])
def test_a_bad_rate_is_refused_naming_the_setting(text: str) -> None:
    with pytest.raises(RateLimitError) as caught:
        RateLimit.parse(text)
    assert f"rate_limit={text!r}" in str(caught.value)


def test_a_rate_that_is_not_a_string_or_a_bad_burst_is_refused() -> None:
    with pytest.raises(RateLimitError, match="rate_limit=10"):
        RateLimit.parse(10)  # type: ignore[arg-type]
    with pytest.raises(RateLimitError, match="burst=0"):
        RateLimit.parse("1/s", burst=0)
    with pytest.raises(RateLimitError, match=r"--rate-limit search='fast'"):
        RateLimit.parse("fast", setting="--rate-limit search")


def test_tokens_come_one_interval_apart_and_next_ready_says_when() -> None:
    bucket = TokenBucket("20/s")
    assert bucket.try_acquire(now=100.0)
    assert not bucket.try_acquire(now=100.0)
    assert bucket.next_ready(now=100.0) == pytest.approx(100.05)
    assert not bucket.try_acquire(now=100.049)
    assert bucket.try_acquire(now=bucket.next_ready(now=100.01))
    assert bucket.next_ready(now=500.0) == 500.0  # idle for long: ready at once


def test_no_burst_at_a_second_boundary() -> None:
    bucket = TokenBucket("10/s")
    granted = [t for t in (0.95, 0.99, 1.0, 1.001, 1.01) if bucket.try_acquire(now=t)]
    assert granted == [0.95]  # a fixed window would let 1.0 through; the bucket waits until 1.05
    assert bucket.try_acquire(now=1.05)


def test_a_scheduler_driven_by_next_ready_lets_100_calls_of_20_per_s_out_in_about_5_s() -> None:
    now = [0.0]
    bucket = TokenBucket(RateLimit.parse("20/s"), clock=lambda: now[0])
    starts = []
    for _ in range(100):
        now[0] = bucket.next_ready()
        assert bucket.try_acquire()
        starts.append(now[0])
    assert starts[-1] == pytest.approx(4.95)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) == pytest.approx(0.05) and max(gaps) == pytest.approx(0.05)


def test_a_burst_lets_that_many_go_back_to_back_after_a_quiet_spell() -> None:
    bucket = TokenBucket(RateLimit.parse("1/s", burst=3))
    assert [bucket.try_acquire(now=10.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.next_ready(now=10.0) == pytest.approx(11.0)
    assert [bucket.try_acquire(now=20.0) for _ in range(4)] == [True, True, True, False]


def test_threads_taking_tokens_at_once_get_exactly_the_burst() -> None:
    bucket = TokenBucket(RateLimit.parse("1/h", burst=5))
    granted = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def take() -> None:
        barrier.wait()
        mine = sum(bucket.try_acquire(now=0.0) for _ in range(1000))
        with lock:
            granted.append(mine)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) == 5


def test_reserve_hands_out_each_token_once_one_interval_apart_whatever_the_callers_clock() -> None:
    bucket = TokenBucket("4/s")
    # Three takers ask at the same instant (tasks Ray started together): each gets its own start.
    assert [bucket.reserve(10.0) for _ in range(3)] == [10.0, 10.25, 10.5]
    assert bucket.reserve(12.0) == 12.0  # after a quiet spell: at once
    assert not bucket.try_acquire(12.1)  # the reserved token is taken for the others too
