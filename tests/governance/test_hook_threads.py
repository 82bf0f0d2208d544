"""Before a sandbox is entered, the process runs one thread: ``hook_threads.stop`` stops the threads an
at-fork hook restarted, and ``verdict.thread_count`` waits for a thread already on its way out (its
``run`` returned, ``threading`` still lists it) rather than count it. Counted, it made a sandboxed call
fail now and then with "this process runs 2 threads" when a stopped OpenTelemetry metric reader's
at-fork thread was caught leaving. Each check runs in a forked child of its own (threads and the
process's thread count are its own)."""

from __future__ import annotations

import io
import threading
import time

from tests.governance.forked import in_child
from toolfork.governance import hook_threads
from toolfork.governance.verdict import thread_count


class _Leaving(threading.Thread):
    """A thread past its target: ``Thread.run`` has deleted ``_target``, and the thread lingers a while
    before ``threading`` drops it (the moment a hook's fresh thread is in when it leaves at once)."""

    def run(self) -> None:
        super().run()
        time.sleep(0.5)


def _one_thread_left_after_a_leaving_thread() -> int:
    leaving = _Leaving(target=lambda: None, daemon=True)
    leaving.start()
    while hasattr(leaving, "_target"):
        time.sleep(0.001)
    hook_threads.stop()
    return thread_count()


def test_a_thread_on_its_way_out_is_waited_for_and_not_counted() -> None:
    outcome = in_child(_one_thread_left_after_a_leaving_thread, timeout=30)
    assert outcome.raised is None, outcome.raised
    assert outcome.value == 1


def _threads_after_forks_of_a_stopped_reader() -> list[int]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader

    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(out=io.StringIO()), export_interval_millis=60_000)
    provider = MeterProvider(metric_readers=[reader])
    provider.shutdown()  # the reader is stopped, and its at-fork hook still starts a thread in each child
    counts = []
    for _ in range(30):
        counts.append(in_child(lambda: (hook_threads.stop(), thread_count())[1], timeout=30).value)
    return counts


def test_a_stopped_metric_readers_at_fork_thread_never_counts() -> None:
    outcome = in_child(_threads_after_forks_of_a_stopped_reader, timeout=60)
    assert outcome.raised is None, outcome.raised
    assert outcome.value == [1] * 30
