"""The sandbox's escape suite: each attack a hostile tool could try from inside a sandboxed call, run
as root and as an unprivileged user. docs/security.md's table names the test for each row.

Each scenario (tests/redteam/sandbox/scenarios.py) sets up what a real host has (servers on
127.0.0.1, open files, threads) and reports what got through; the assertions are here.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import NOBODY

from .conftest import USERS

Attack = Callable[[str, str], dict[str, Any]]
users = pytest.mark.parametrize("user", USERS)


def ran(ev: dict[str, Any]) -> Any:
    assert ev["status"] == "ok", ev
    return ev["output"]


def limit_hit(ev: dict[str, Any], words: str) -> None:
    assert ev["status"] == "error" and ev["error_type"] == "LimitExceeded", ev
    assert words in ev["error"], ev


@users
def test_setns_back_to_the_host_network(attack: Attack, user: str) -> None:
    ev = attack("setns", user)
    out = ran(ev)
    assert out["setns"] != "ok" and out["connect"] != "ok", out
    assert ev["server_got"] == []


@users
@pytest.mark.parametrize("kind", ["tcp", "udp", "unconnected"])
def test_inherited_sockets_are_closed(attack: Attack, user: str, kind: str) -> None:
    ev = attack(f"inherited_{kind}", user)
    out = ran(ev)
    assert not any("sent" in what for what in out.values()), out
    assert ev["server_got"] == []


@users
def test_inherited_files_are_closed(attack: Attack, user: str) -> None:
    ev = attack("inherited_files", user)
    out = ran(ev)
    assert "hunter2" not in json.dumps(out) and not any("wrote" in what for what in out.values()), out
    assert ev["log"] == "host log\n"


@users
def test_memory_limit_cannot_be_lifted(attack: Attack, user: str) -> None:
    limit_hit(attack("lift_memory", user), "memory limit of 32 MB")


@users
def test_file_size_limit_cannot_be_lifted(attack: Attack, user: str) -> None:
    ev = attack("lift_file_size", user)
    limit_hit(ev, "file size limit of 1 MB")
    assert ev["file_mb"] <= 1


@users
def test_open_files_limit_cannot_be_lifted(attack: Attack, user: str) -> None:
    limit_hit(attack("lift_open_files", user), "open files limit of 16")


@users
def test_cpu_limit_cannot_be_lifted(attack: Attack, user: str) -> None:
    limit_hit(attack("lift_cpu", user), "CPU time limit of 1 s")


@users
def test_shared_anonymous_mmap_counts_as_memory(attack: Attack, user: str) -> None:
    limit_hit(attack("shared_mmap", user), "memory limit of 64 MB")


@users
def test_cpu_in_c_code_is_ended_by_the_kernel(attack: Attack, user: str) -> None:
    ev = attack("pbkdf2", user)
    limit_hit(ev, "CPU time limit of 1 s")  # not the call's 30 s timeout: the kernel ended it


@users
def test_a_thread_in_the_host_neither_refuses_nor_breaks_the_sandbox(attack: Attack, user: str) -> None:
    ev = attack("thread_in_host", user)
    assert ran(ev)["network"] != "connected" and ev["server_got"] == []


@users
def test_opentelemetry_providers_in_the_host_never_make_a_sandbox_refuse(attack: Attack, user: str) -> None:
    ev = attack("otel_providers_in_host", user)
    assert ev["statuses"] == ["ok"], ev


@users
def test_opentelemetry_batch_exporting_in_the_host_neither_refuses_nor_breaks_the_sandbox(attack: Attack,
                                                                                        user: str) -> None:
    ev = attack("otel_in_host", user)
    offline, sandboxed = ran(ev["offline"]), ran(ev["sandboxed"])
    assert offline["threads"] == 1 and sandboxed["threads"] == 1, ev  # the exporter thread stopped first
    assert offline["pid"] == 1 and sandboxed["pid"] == 1, ev  # each in a PID namespace of its own
    assert offline["network"] != "connected", ev
    assert ev["server_got"] == ["ESCAPED"]  # only the sandbox=True call (network allowed) reached the host
    assert ev["exported"] == ["host-after", "host-before"], ev  # the host's exporter works, nothing twice


@users
def test_a_thread_from_on_worker_start_runs_inside_the_sandbox(attack: Attack, user: str) -> None:
    ev = attack("thread_in_worker_start", user)
    out = ran(ev)
    assert out["network"] != "connected" and ev["server_got"] == []
    assert out["threads"] >= 2  # on_worker_start ran (in the sandbox) and its thread lives


@users
def test_host_sysv_shared_memory_is_out_of_reach(attack: Attack, user: str) -> None:
    ev = attack("sysv_shm", user)
    assert ev["host_view"] == {"attach": "ok", "read": "SECRET"}, ev  # the segment is there to be had
    assert ran(ev)["attach"] != "ok", ev


@users
def test_host_unix_sockets_are_out_of_reach(attack: Attack, user: str) -> None:
    """Also through the socket system call with a bit above the int set in its family: the kernel reads
    AF_UNIX, and a filter comparing all 64 bits would let it through."""
    ev = attack("unix_sockets", user)
    out = ran(ev)
    assert set(out) == {"path", "abstract", "path_high_bits", "abstract_high_bits"}, out
    assert "connected" not in out.values(), out
    assert ev["accepted"] == 0


@users
def test_host_datagram_sockets_are_out_of_reach_from_a_socket_pair(attack: Attack, user: str) -> None:
    """socketpair needs no socket(): a datagram pair's end can still send to any address, or be
    connected again, so a host's /dev/log-like socket would be in reach (abstract names are in the
    network namespace; a filesystem socket is not)."""
    ev = attack("unix_dgram", user)
    out = ran(ev)
    assert set(out) == {f"{k}_{n}_{h}" for k in ("dgram", "raw") for n in ("path", "abstract")
                        for h in ("sendto", "connect")}, out
    assert not any(what == "sent" for what in out.values()), out
    assert ev["server_got"] == [], ev


@users
def test_two_calls_at_once_cannot_find_each_other_nor_see_the_hosts_sockets(attack: Attack, user: str) -> None:
    """network=False calls of one pool share an empty network namespace where they can (as root): one
    call tries every way to be found (ports, an abstract name, a netlink socket, the loopback up), the
    other looks for it meanwhile and for the host's own listeners in /proc/net."""
    ev = attack("calls_meet", user)
    assert ev["status"] == ["ok", "ok"], ev
    host, guest = ev["host"], ev["guest"]
    assert host.pop("namespace_fds") == [] and guest.pop("namespace_fds") == [], ev
    assert host.pop("guest_looked") is True and guest.pop("host_held") is True, ev  # at once, as meant
    assert set(host) == {"tcp", "tcp6", "udp", "abstract", "usersock", "usersock_high_bits", "loopback_up"}, host
    assert "ok" not in host.values(), host
    assert {guest[k] for k in ("connect", "connect_any", "udp")} - {"ok"} == {guest[k] for k in
                                                                              ("connect", "connect_any", "udp")}
    assert guest["listed"] == [], guest
    assert ev["server_got"] == [], ev


@users
@pytest.mark.parametrize("paths", ["", "_write_paths"])
def test_the_terminal_the_host_runs_on_takes_no_keystrokes_and_no_writes(attack: Attack, user: str, paths: str) -> None:
    """A host started in a shell (``toolfork run``): its terminal is the sandbox's controlling terminal
    unless the sandbox gives it up. Through /dev/tty a tool could push ``echo ...\\n`` into the shell's
    input (TIOCSTI: it runs when toolfork ends) and send escape sequences past the host's escaping; by
    the terminal's path, TIOCSTI needs a capability the call does not hold, and a write is a write to a
    file of the user's (refused under write_paths, allowed without)."""
    ev = attack(f"terminal{paths}", user)
    out = ran(ev)
    assert out["tty_open"].endswith("No such device or address"), out  # no controlling terminal
    assert not {k for k in out if k.startswith("tty_") and k != "tty_open"}, out
    assert out["pts_tiocsti"] != "pushed" and out["pts_tiocsti_high_bits"] != "pushed", out
    assert "TOOLFORK-INJECTED" not in ev["host_read"] and "TOOLFORK-INJECTED" not in ev["terminal_shown"], ev
    if paths:
        assert out["pts_write"] != "wrote", out
        assert "TOOLFORK-WROTE" not in ev["terminal_shown"], ev


@users
def test_host_template_and_workers_cannot_be_seen_signalled_traced_or_read(attack: Attack, user: str) -> None:
    ev = attack("other_processes", user)
    out = ran(ev)
    assert not set(out["visible"]) & set(ev["pids"]), out["visible"]
    for pid in ev["pids"]:
        seen = out[str(pid)]
        assert not {"read", "delivered", "attached"} & set(seen.values()), (pid, seen)


@users
def test_setuid_binaries_grant_nothing(attack: Attack, user: str, work: Path) -> None:
    binary = work / "suid-id"
    shutil.copy("/usr/bin/id", binary)
    owner = NOBODY if user == "root" else 0  # a user the caller is not
    os.chown(binary, owner, owner)
    binary.chmod(0o4755)
    out = ran(attack("setuid", user))
    assert out["no_new_privs"] == "1"
    assert out["binary_euid"] == str(out["own_euid"]), out


@users
def test_links_and_renames_cannot_leave_write_paths(attack: Attack, user: str) -> None:
    ev = attack("write_paths", user)
    out = ran(ev)
    assert "done" not in out.values(), out
    assert ev["outside_now"] == "host file" and not ev["planted"]


@users
def test_a_daemon_the_call_starts_dies_with_it(attack: Attack, user: str) -> None:
    ev = attack("daemon", user)
    assert ran(ev) == "daemon started"
    assert ev["marker"] is False


@users
def test_the_calls_first_process_cannot_be_stranded_in_another_process_group(attack: Attack, user: str) -> None:
    """PID 1 of the sandbox moved into a group whose leader is gone never finishes exiting (the kernel
    waits for a pid it holds itself): no signal ends it, and it outlives the pool. On the tree before
    the filter refused that move, the process was left in /proc after close()."""
    ev = attack("strand_init", user)
    assert ev["status"] == "ok", ev
    assert ev["output"].startswith("refused"), ev
    assert ev["left"] == [], ev


@users
def test_the_calls_first_process_cannot_be_stranded_by_bits_above_the_int(attack: Attack, user: str) -> None:
    """The same move through the setpgid system call, pid 0 given with a bit above the int set: the
    kernel reads 0 (this process), a filter comparing all 64 bits sees another pid."""
    ev = attack("strand_init_high_bits", user)
    assert ev["status"] == "ok", ev
    assert ev["output"].startswith("refused"), ev
    assert ev["left"] == [], ev


@users
def test_the_environment_is_minimal_plus_named_variables(attack: Attack, user: str) -> None:
    env = ran(attack("environment", user))
    assert env == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TOOLFORK_REDTEAM_PASSED": "yes"}
