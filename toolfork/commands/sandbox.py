"""`toolfork sandbox check`: which sandbox this machine gives a tool call, as this user, and why not
where not; the exit code says it to a CI.

Why a command: what the sandbox can promise depends on the kernel (user namespaces, Landlock, seccomp,
mount_setattr), on the cgroups mounted and on who runs it (root, or a user with a delegated subtree).
An Executor refuses at start what it cannot enforce; this says it all ahead, from the same probes and
the same rule (``governance.enforceable``), each tried for real in a throw-away child:

    probes (sandbox entry, Landlock, read-only mounts, seccomp, cgroup) ──> mechanisms
    enforceable.unenforceable(every sandbox field) ──> what a sandboxed call would get ──> tier, exit code

Exit codes: 0 full (every field can be enforced, the limits through a cgroup per call), 1 partial (the
sandbox can be entered, but some field is refused or weaker: the lines say which and why), 3 none (no
sandbox can be entered here: every sandboxed call is refused); 2 is a usage error, as for every command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

EXIT_FULL, EXIT_PARTIAL, EXIT_NONE = 0, 1, 3
# Each sandbox field with a value to ask for (the paths: a temporary directory, read and written).
FIELDS: dict[str, Any] = {"network": False, "read_paths": [tempfile.gettempdir()],
                          "write_paths": [tempfile.gettempdir()], "memory_mb": 64, "cpu_s": 1.0, "processes": 4,
                          "file_size_mb": 8, "open_files": 64}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="{check}")
    sub.required = True
    check = sub.add_parser("check", help="say which sandbox a tool call gets here, and why not where not",
                           description="Say which sandbox a tool call gets on this machine as this user. Exit "
                                       "0: full; 1: partial (the lines say what is missing); 3: none.")
    check.add_argument("--json", action="store_true", help="one JSON object instead of text")


def _user() -> str:
    uid = os.geteuid()
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def report() -> dict[str, Any]:
    """What this machine gives, as a plain dict (the --json output)."""
    from toolfork.governance import cgroup, landlock, sandbox, seccomp
    from toolfork.governance.enforceable import cgroup_notes, unenforceable
    from toolfork.governance.limits import Limits

    def said(ok: bool, detail: str) -> dict[str, Any]:
        return {"ok": ok, "detail": detail}

    mechanisms: dict[str, dict[str, Any]] = {}
    entry = sandbox.probe()
    mechanisms["namespaces"] = said(entry.ok, "user, PID, mount and network namespaces can be entered"
                                    if entry.ok else entry.reason)
    try:
        seccomp.prepare(True)
        mechanisms["seccomp"] = said(True, "the system call filter can be built and loaded")
    except OSError as exc:
        mechanisms["seccomp"] = said(False, str(exc))
    abi = landlock.abi_version()
    lock = landlock.probe()
    mechanisms["landlock"] = said(lock.ok, f"ABI {abi}" if lock.ok else lock.reason)
    mounts = sandbox.paths_probe() if lock.ok else lock
    mechanisms["read_only_mounts"] = said(mounts.ok, "every mount read-only outside write_paths (mount_setattr)"
                                          if mounts.ok else mounts.reason)
    where = cgroup.hierarchy()
    group = cgroup.probe()
    if group.ok and not isinstance(where, str):
        controllers = "memory, cpuacct, pids" if where.version == 1 else "memory, pids (delegated subtree)"
        mechanisms["cgroup"] = said(True, f"cgroup v{where.version} ({controllers}) under "
                                          f"{', '.join(sorted(set(where.dirs.values())))}")
    else:
        mechanisms["cgroup"] = said(False, group.reason)
    call = {}
    for name, value in FIELDS.items():
        asked = Limits(**{"network": False, name: value})  # each field alone, in a sandbox: what it gets
        missing = unenforceable(asked)
        notes = cgroup_notes(asked)
        if missing:
            call[name] = {"ok": False, "detail": "refused at start: " + "; ".join(m.reason for m in missing)}
        else:
            call[name] = {"ok": not notes, "detail": "; ".join(notes) or _what(name, group.ok)}
    if not entry.ok:
        tier, code = "none", EXIT_NONE
    elif all(v["ok"] for v in call.values()):
        tier, code = "full", EXIT_FULL
    else:
        tier, code = "partial", EXIT_PARTIAL
    return {"tier": tier, "exit_code": code, "user": _user(), "kernel": os.uname().release,
            "mechanisms": mechanisms, "sandboxed_call": call}


def _what(field: str, has_cgroup: bool) -> str:
    """What a sandboxed call gets for ``field`` where it is enforced."""
    from toolfork.governance import netns

    return {
        "network": ("no network: one empty network namespace the pool's calls share (as root), no socket but a "
                    "stream pair" if netns.can_share() else
                    "no network: a network namespace of its own, no socket but a stream pair"),
        "read_paths": "reads only under read_paths (Landlock)",
        "write_paths": "writes and metadata changes only under write_paths (read-only mounts and Landlock)",
        "memory_mb": "every process of the call and every kind of memory (its cgroup)",
        "cpu_s": "the CPU of every process of the call (its cgroup)",
        "processes": "every process of the call (its cgroup's pids.max)" if has_cgroup else "RLIMIT_NPROC",
        "file_size_mb": "RLIMIT_FSIZE, hard (the sandbox cannot raise it)",
        "open_files": "RLIMIT_NOFILE, hard (the sandbox cannot raise it)",
    }[field]


def main(args: argparse.Namespace) -> int:
    said = report()
    if args.json:
        print(json.dumps(said, indent=2))
        return int(said["exit_code"])
    out = sys.stdout
    out.write(f"sandbox: {said['tier']} (as {said['user']}, Linux {said['kernel']})\n")
    out.write("mechanisms:\n")
    for name, value in said["mechanisms"].items():
        out.write(f"  {'yes' if value['ok'] else 'no ':3}  {name:17} {value['detail']}\n")
    out.write("a sandboxed call would get:\n")
    for name, value in said["sandboxed_call"].items():
        out.write(f"  {'yes' if value['ok'] else 'no ':3}  {name:17} {value['detail']}\n")
    return int(said["exit_code"])
