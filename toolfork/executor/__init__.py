"""Run batches of tool calls: fork pool, sequential, or Ray; results in call order.

The journey of one call, and the value that crosses each edge (fork mode; the sequential backend
runs the worker's part in the host, Ray in a task)::

  your code          ToolCall(id, name, arguments, timeout, meta)
      │  Executor.run / stream / imap / submit                              executor.py, singles.py
      ▼
  admission          CallBook.admit: tool looked up, effective timeout, journal start,
      │              span opened (or a ToolResult at once: unknown tool, bad timeout)  calls.py
      │  Dispatch (call + tool + timeout + context + span ids)
      ▼
  Feed               the batch's dispatches, pulled lazily (room, WAIT)      backends/hub.py
      │  Dispatch
      ▼
  Hub                batches take turns; caps and rate limits; one owner thread drives
      │              the backend for all; events routed back to their batch  backends/hub.py
      │  Dispatch
      ▼
  ForkBackend        which call (or chunk of quick calls) goes to which idle worker
      │              (the line lane: a job's raw lines instead)     backends/fork/pool.py, lane.py
      │  item
      ▼
  WorkerCore         sends, reads, kills at the deadline, buries the dead, replaces
      │              (the template process forks the workers)   backends/fork/core.py, template*.py
      │  CALLS frame: CallItem tuples, pickled, on the worker's call pipe     wire/frames.py,
      ▼                (a large one: a memory file over the side socket)   wire/framing.py, oob.py
  worker process     before_child ─> limits ─> tool.invoke(arguments, runtime) ─> after_child
      │                                                           backends/fork/worker.py, invoke.py
      │  RESULT / PROGRESS / SPANS frames (seq-numbered tuples) on the result pipe
      ▼
  WorkerCore.read    frames.decode: a named message, checked against the running call
      │  ToolResult (or a host-made one: "timeout", "crashed", LimitExceeded)
      ▼
  Hub.route          CallFinished into its batch's events; its owner thread takes them
      │  CallFinished(call_id, ToolResult)
      ▼
  finishing          CallBook.finish: started_at, stats counts, metrics, span end,
      │              journal record; retries go back to the Feed first     calls.py, executor.py
      ▼
  your code          ToolResult, in call order (run), or events as they happen (stream)
"""

from toolfork.executor.backends.dispatch import WAIT, Wait
from toolfork.executor.executor import Executor, default_workers
from toolfork.executor.journal import OUTCOME_UNKNOWN, Journal, JournalBusy, JournalError
from toolfork.executor.sessions.session import Session, SessionLost, SessionUnavailable, TooManySessions
from toolfork.executor.stats import ExecutorStats
from toolfork.executor.types import CallFinished, CallProgress, CallStarted, ErrorInfo, Event, ToolCall, ToolResult
from toolfork.tools.runtime import ToolRuntime

__all__ = [
    "OUTCOME_UNKNOWN",
    "WAIT",
    "CallFinished",
    "CallProgress",
    "CallStarted",
    "ErrorInfo",
    "Event",
    "Executor",
    "ExecutorStats",
    "Journal",
    "JournalBusy",
    "JournalError",
    "Session",
    "SessionLost",
    "SessionUnavailable",
    "TooManySessions",
    "ToolCall",
    "ToolResult",
    "ToolRuntime",
    "Wait",
    "default_workers",
]
