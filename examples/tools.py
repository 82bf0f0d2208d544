"""Example tools for ``toolfork run examples/calls.jsonl`` (the calls file finds this module because it
sits next to it; elsewhere pass ``--tools examples/tools.py:TOOLS``).

One of each kind a batch job meets: quick arithmetic, an I/O-bound call that mostly waits, a CPU-bound
call that keeps a core busy, and a long call that reports progress through ``ToolRuntime``.
"""

from __future__ import annotations

import time

from toolfork import tool
from toolfork.tools import ToolRuntime


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: first addend
        b: second addend
    """
    return a + b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: first factor
        b: second factor
    """
    return a * b


@tool
def fetch_page(page: int, delay_s: float = 0.2) -> dict[str, object]:
    """Pretend to fetch a page of search results: waits like a network call, then answers.

    Args:
        page: page number, from 1
        delay_s: how long the pretend request takes, in seconds
    """
    if page < 1:
        raise ValueError(f"page must be at least 1, got {page}")
    time.sleep(delay_s)
    return {"page": page, "items": [f"result {(page - 1) * 3 + i}" for i in range(1, 4)]}


@tool
def count_primes(limit: int) -> int:
    """Count the primes below ``limit`` by trial division: deliberately CPU-bound.

    Args:
        limit: upper bound (exclusive), at most 2,000,000
    """
    if not 0 <= limit <= 2_000_000:
        raise ValueError(f"limit must be between 0 and 2,000,000, got {limit}")
    count = 0
    for n in range(2, limit):
        d = 2
        while d * d <= n:
            if n % d == 0:
                break
            d += 1
        else:
            count += 1
    return count


@tool
def crawl(pages: int, runtime: ToolRuntime, delay_s: float = 0.05) -> str:
    """Visit ``pages`` pretend pages one by one, reporting progress after each.

    Args:
        pages: how many pages to visit, at most 100
        delay_s: time spent on each page, in seconds
    """
    if not 1 <= pages <= 100:
        raise ValueError(f"pages must be between 1 and 100, got {pages}")
    for i in range(1, pages + 1):
        time.sleep(delay_s)
        runtime.emit_progress({"page": i, "of": pages})
    return f"crawled {pages} pages"


TOOLS = [add, multiply, fetch_page, count_primes, crawl]
