"""Resource governance: the mechanisms that keep one tool call from hurting the others.

The user's view is docs/executor.md, "Limits". Where each part is used: `policy.Governance` is one
Executor's rules (built from the tools' settings and the Executor's keywords); the fork pool's
worker applies a call's limits (`toolfork.executor.backends.fork.limited`); the pool's driver admits
calls through caps and rate limits (`Hub.take_next`); the worker core recycles workers.

Limits inside a call (`Limits`, in `limits`): a frozen value, validated where it is written
(`Limits(memory_mb=-1)` and unknown fields are refused naming the setting), `merged_over(default)`
(a tool's own fields win), `Limits.parse("memory_mb=256,cpu_s=2,network=off")` for the command line.

=================  =======================================  ====================================
field              how (Linux)                              when
=================  =======================================  ====================================
memory_mb          soft RLIMIT_DATA, worker's VmData +      per call, restored after it
                   budget; the tool gets MemoryError
cpu_s              ITIMER_PROF raises LimitExceededError;   per call, restored after it
                   soft RLIMIT_CPU (CPU so far + budget,
                   whole seconds) kills with SIGXCPU
file_size_mb       soft RLIMIT_FSIZE; SIGXFSZ caught, the   per call, restored after it
                   write fails with EFBIG
open_files         soft RLIMIT_NOFILE, open fds + budget    per call, restored after it
processes          soft RLIMIT_NPROC, user's tasks +        per call; not binding for root
                   budget                                   (the probe says so)
network=False      the sandbox, with its own network        a one-shot process per call
                   namespace (loopback down)
read_paths,        the sandbox, with a Landlock ruleset     a one-shot process per call
write_paths
sandbox=True       the sandbox (`sandbox.enter`): user,     a one-shot process per call, its
                   PID, mount namespaces, no fd or          rlimits hard = soft
                   env var inherited, seccomp (`seccomp`)
=================  =======================================  ====================================

`rlimits.applied(limits)` is the context manager around one call; `rlimits.classify(outcome, limits)`
turns what the call raised (MemoryError, EFBIG, EMFILE, EAGAIN, LimitExceededError) or the wait status
it died with (SIGXCPU, SIGXFSZ, SIGKILL past the CPU budget) into a `LimitExceeded` whose message names
the limit ("memory limit of 256 MB exceeded"). A sandboxed call (`Limits.sandboxed`: network=False,
read_paths, write_paths or sandbox=True) runs in a one-shot process forked from the single-threaded
template, which enters `sandbox.enter` before any tool or hook code; `Limits.restriction_key` is what
that sandbox is made of, and a process refuses a call whose key is not its own. The threat model is
docs/security.md.

Fail closed: `enforceable.unenforceable(limits)` lists the fields this OS, kernel or permission set
cannot enforce, each with why; `enforceable.check(limits)` raises `LimitsNotEnforceable` for strict
limits and logs for `enforce="best-effort"`. Off Linux every probe says "not enforceable".

Limits around a call: `caps.ConcurrencyCaps` (per-tool `max_concurrency`, per-group caps; an unknown
group is refused) and `ratelimit.TokenBucket` ("10/s", "30/min", "100/h"; smooth, `next_ready(now)`),
both non-blocking ledgers a scheduler consults so a waiting call holds no worker.

Cost (bench/governance.py measures it against a plain warm call, a fresh fork, `bwrap --unshare-net`
and `firejail --net=none`).
"""

from .caps import CapError, ConcurrencyCaps, Slot
from .enforceable import LimitsNotEnforceable, SandboxUnavailable, Unenforceable, check, unenforceable
from .landlock import LandlockError
from .limits import Limits, LimitsError
from .netns import NetworkIsolationError, enter_no_network
from .policy import Governance
from .ratelimit import RateLimit, RateLimitError, TokenBucket
from .rlimits import LimitExceeded, LimitExceededError, applied, classify
from .verdict import Probe

__all__ = [
    "CapError",
    "ConcurrencyCaps",
    "Governance",
    "LandlockError",
    "LimitExceeded",
    "LimitExceededError",
    "Limits",
    "LimitsError",
    "LimitsNotEnforceable",
    "NetworkIsolationError",
    "Probe",
    "RateLimit",
    "RateLimitError",
    "SandboxUnavailable",
    "Slot",
    "TokenBucket",
    "Unenforceable",
    "applied",
    "check",
    "classify",
    "enter_no_network",
    "unenforceable",
]
