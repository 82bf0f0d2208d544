"""Where a run's files go when ``--out`` is not given: never into a source checkout.

    current directory inside a checkout (a .git or .hg above it)?
        yes ──▶ $XDG_CACHE_HOME/toolfork/bench/<UTC time>   (~/.cache/... when unset)
        no  ──▶ ./toolfork-bench/<UTC time>

A new directory per run, so one run never overwrites another, and a run in a clone of toolfork never
touches the committed results in bench/results (written only with ``--out bench/results``).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

_MARKERS = (".git", ".hg")


def checkout_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` that is a version-control checkout, or None."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if any((folder / m).exists() for m in _MARKERS):
            return folder
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "toolfork" / "bench"


def default_out_dir(cwd: Path | None = None, now: dt.datetime | None = None) -> Path:
    """A fresh directory for this run's files, by the rule above (not created here)."""
    cwd = cwd or Path.cwd()
    stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%d-%H%M%S")
    base = cache_dir() if checkout_root(cwd) is not None else cwd / "toolfork-bench"
    out = base / stamp
    n = 1
    while out.exists():
        n += 1
        out = base / f"{stamp}-{n}"
    return out
