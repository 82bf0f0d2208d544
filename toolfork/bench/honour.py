"""What an executor cannot honour of what a workload asks: such a cell is marked and never ranked.

    workload ──asks──▶ {"timeout", "limits", "fresh process"}   (hang: a timeout; your calls: what they
                                                                  and their tools declare, see user_calls)
    peer class (timeout_support, honours_limits, fresh_process) ──unhonoured()──▶ what it skipped, per cell
    report and summary: the cell shows a short tag, is never bold and never the "best peer" of a ratio

An executor that ignores a call's timeout finishes a batch whose timed-out call it simply ran to the
end: more results "ok", and no time spent killing anything. Those figures compare a different job, so
they are shown beside the others and never ranked against them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from toolfork.bench.base import Peer

TIMEOUT = "timeout"
LIMITS = "limits"
FRESH = "fresh process"
ASKS = (TIMEOUT, LIMITS, FRESH)


@dataclass(frozen=True)
class Unhonoured:
    """One thing a cell's executor did not do: a tag for the cell and the sentence that explains it."""

    tag: str
    text: str


def workload_asks(workload: str, user_asks: Collection[str] = ()) -> set[str]:
    """What a workload asks of every executor beyond running the calls."""
    if workload == "hang":
        return {TIMEOUT}
    if workload == "user":
        return set(user_asks)
    return set()


def unhonoured(peer_cls: type[Peer], asks: Collection[str]) -> list[Unhonoured]:
    """What ``peer_cls`` does not honour of ``asks``, in the order of ``ASKS``."""
    out = []
    if TIMEOUT in asks and peer_cls.timeout_support == "none":
        out.append(Unhonoured("no timeout", "has no per-call timeout: a call runs past its timeout to its end"))
    elif TIMEOUT in asks and peer_cls.timeout_support == "abandon":
        out.append(Unhonoured("timeout not killed", "stops waiting at a call's timeout but leaves the call running"))
    if LIMITS in asks and not peer_cls.honours_limits:
        out.append(Unhonoured("no limits", "does not apply the tools' limits"))
    if FRESH in asks and peer_cls.fresh_process is None:
        out.append(Unhonoured("no fresh process", "runs fresh_process tools' calls without a process of their own"))
    return out


__all__ = ["ASKS", "FRESH", "LIMITS", "TIMEOUT", "Unhonoured", "unhonoured", "workload_asks"]
