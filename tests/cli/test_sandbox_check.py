"""`toolfork sandbox check`: what it says and the exit code a CI reads, as root, as nobody, and in a
process where no sandbox can be entered (a seccomp filter refuses unshare, as a locked-down container
would)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
NO_UNSHARE = """
import os, sys, errno, pyseccomp as sc
f = sc.SyscallFilter(sc.ALLOW)
f.add_rule(sc.ERRNO(errno.EPERM), "unshare")
f.load()
os.execv(sys.executable, [sys.executable, "-m", "toolfork", "sandbox", "check", *sys.argv[1:]])
"""


def check(*args: str, user: str = "root", locked: bool = False, **variables: str) -> subprocess.CompletedProcess[str]:
    become = [] if user == "root" else ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    command = [sys.executable, "-c", NO_UNSHARE] if locked else [sys.executable, "-m", "toolfork", "sandbox", "check"]
    env = {**os.environ, "PYTHONPATH": str(REPO), **variables}
    return subprocess.run([*become, *command, *args], capture_output=True, text=True, cwd="/tmp", env=env,
                          timeout=120, check=False)


def said(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    report = json.loads(done.stdout)
    assert report["exit_code"] == done.returncode, (report, done.stderr)
    assert {"full": 0, "partial": 1, "none": 3}[report["tier"]] == done.returncode, report
    return report  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _as_root() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.fail("these tests run the command as root and as nobody (setpriv)")


def test_as_root_where_cgroups_can_be_made_the_tier_is_full() -> None:
    from toolfork.governance import cgroup

    report = said(check("--json"))
    assert report["user"].startswith("root")
    assert report["mechanisms"]["cgroup"]["ok"] == cgroup.probe().ok
    if report["mechanisms"]["cgroup"]["ok"]:
        assert report["tier"] == "full", report
        assert "its cgroup" in report["sandboxed_call"]["memory_mb"]["detail"]
    else:  # a root without writable cgroups: memory_mb is refused, saying why
        assert report["tier"] == "partial" and not report["sandboxed_call"]["memory_mb"]["ok"], report


def test_as_nobody_without_a_cgroup_memory_is_refused_and_the_tier_is_partial() -> None:
    report = said(check("--json", user="nobody"))
    assert report["user"].startswith("nobody")
    assert report["mechanisms"]["namespaces"]["ok"], report
    if report["mechanisms"]["cgroup"]["ok"]:  # a delegated subtree: the same as root
        assert report["tier"] == "full", report
        return
    assert report["tier"] == "partial", report
    memory = report["sandboxed_call"]["memory_mb"]
    assert not memory["ok"] and memory["detail"].startswith("refused at start") and "no cgroup" in memory["detail"]
    cpu = report["sandboxed_call"]["cpu_s"]
    assert not cpu["ok"] and "may start no other" in cpu["detail"], cpu


def test_text_output_has_a_line_per_mechanism_and_field() -> None:
    done = check()
    lines = done.stdout.splitlines()
    assert lines[0].startswith("sandbox: ") and "as root" in lines[0], done.stdout
    for name in ("namespaces", "seccomp", "landlock", "read_only_mounts", "cgroup", "network", "memory_mb",
                 "write_paths"):
        assert any(line.split()[1:2] == [name] for line in lines), (name, done.stdout)
    assert done.returncode in (0, 1)


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_where_no_namespace_can_be_entered_the_tier_is_none(user: str) -> None:
    report = said(check("--json", user=user, locked=True))
    assert report["tier"] == "none" and report["exit_code"] == 3, report
    assert not report["mechanisms"]["namespaces"]["ok"]
    assert "Operation not permitted" in report["mechanisms"]["namespaces"]["detail"], report
    assert all(not v["ok"] for v in report["sandboxed_call"].values()), report


def test_a_missing_action_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "toolfork", "sandbox"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60, check=False)
    assert done.returncode == 2 and "check" in done.stderr


def test_a_garbage_temporary_directory_changes_nothing() -> None:
    plain = said(check("--json"))
    garbage = said(check("--json", TMPDIR="/nonexistent/\x1b[31mred"))
    assert garbage["tier"] == plain["tier"], (plain, garbage)
