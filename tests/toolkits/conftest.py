"""Real database servers for the SQL toolkit tests.

Each test session (each xdist worker) starts its own PostgreSQL and MariaDB instance on demand: a
private data directory in a fresh temp dir, a free port on 127.0.0.1 and a unix socket in that dir.
The servers refuse to run as root, so under root they run as the ``postgres`` / ``mysql`` system
user (or ``nobody``). They are stopped in fixture teardown, again at interpreter exit, and die with
the test process if it is killed (PR_SET_PDEATHSIG), so none is ever left running.

A missing server binary fails the tests with a message saying how to install it: a skipped database
test would hide exactly the failure it exists to catch.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

try:  # the suite-wide leak guard exempts deliberately long-lived servers registered with it
    from tests.conftest import allow_process
except ImportError:  # pragma: no cover - running this directory on its own

    def allow_process(pid: int) -> None:
        pass


PG_PASSWORD = "pg-S3cr3t!pass word"
MY_PASSWORD = "my-S3cr3t!pass%word"
APP_USER = "toolfork_app"
INSTALL_HINT = "run scripts/services.sh (apt-get install -y postgresql mariadb-server)"
_RUNNING: list[_Server] = []


@dataclass
class _Server:
    name: str
    proc: subprocess.Popen[bytes]
    workdir: Path
    port: int
    log: Path
    stop_signal: int
    extra: dict[str, Any] = field(default_factory=dict)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(self.stop_signal)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self in _RUNNING:
            _RUNNING.remove(self)


@atexit.register
def _stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()


def _die_with_parent(sig: int) -> Callable[[], None]:
    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, sig)  # PR_SET_PDEATHSIG: the server dies if the test process dies

    return preexec


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _service_user(preferred: str) -> tuple[int, int] | None:
    """The uid/gid to run a server as: None when we are not root (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in (preferred, "nobody"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
    pytest.fail(f"running as root and neither {preferred!r} nor 'nobody' exists to run the server as")


def _sweep_stale(prefix: str) -> None:
    """Remove data dirs left by a test process that was SIGKILLed (its servers died with it)."""
    for stale in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            pid = int((stale / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)


def _workdir(prefix: str, owner: tuple[int, int] | None) -> Path:
    # Not pytest's tmp_path: its parents are 0700 root, which the unprivileged server cannot traverse.
    _sweep_stale(prefix)
    path = Path(tempfile.mkdtemp(prefix=prefix))
    (path / "owner.pid").write_text(str(os.getpid()))
    if owner is not None:
        os.chown(path, *owner)
    return path


def _run_as(owner: tuple[int, int] | None) -> dict[str, Any]:
    if owner is None:
        return {}
    return {"user": owner[0], "group": owner[1], "extra_groups": []}


def _launch(
    name: str,
    argv: list[str],
    work: Path,
    port: int,
    owner: tuple[int, int] | None,
    death_signal: int,
    stop_signal: int,
) -> _Server:
    """Start a server logging to work/server.log and register it so that it is stopped at exit."""
    log = work / "server.log"
    with log.open("wb") as log_handle:
        proc = subprocess.Popen(
            argv,
            stdout=log_handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent(death_signal),
            **_run_as(owner),
        )
    allow_process(proc.pid)
    server = _Server(name, proc, work, port, log, stop_signal)
    _RUNNING.append(server)
    return server


def _wait_until(server: _Server, probe: Callable[[], None], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            server.stop()
            pytest.fail(f"{what} exited during startup (code {server.proc.returncode}):\n{server.log_tail()}")
        try:
            probe()
            return
        except Exception as exc:
            last = exc
            time.sleep(0.1)
    log = server.log_tail()
    server.stop()
    pytest.fail(f"{what} did not accept connections within {timeout:.0f} s ({last}):\n{log}")


# ---------------------------------------------------------------- PostgreSQL


def _pg_bindir() -> Path:
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
        reverse=True,
    )
    if candidates:
        return Path(candidates[0]).parent
    found = shutil.which("postgres") or shutil.which("pg_ctl")
    if found and (Path(found).parent / "initdb").exists():
        return Path(found).parent
    pytest.fail(f"PostgreSQL server binaries (initdb, postgres) are not installed; {INSTALL_HINT}")


@dataclass
class PostgresServer:
    port: int
    socket_dir: str
    user: str = APP_USER
    password: str = PG_PASSWORD

    def admin_conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port={self.port} user=postgres dbname={dbname}"

    def dsn(self, dbname: str, password: str = PG_PASSWORD) -> str:
        return f"postgresql://{APP_USER}:{quote(password, safe='')}@127.0.0.1:{self.port}/{dbname}"

    def admin(self, dbname: str = "postgres") -> Any:
        import psycopg

        return psycopg.connect(self.admin_conninfo(dbname), autocommit=True)

    def create_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name} OWNER {APP_USER}")
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    import psycopg

    bindir = _pg_bindir()
    owner = _service_user("postgres")
    work = _workdir("toolfork-pg-", owner)
    init = subprocess.run(
        [
            str(bindir / "initdb"),
            "-D",
            str(work / "data"),
            "-U",
            "postgres",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        capture_output=True,
        timeout=120,
        **_run_as(owner),
    )
    if init.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        pytest.fail(f"initdb failed: {init.stderr.decode(errors='replace')[-2000:]}")
    port = _free_port()
    argv = [
        str(bindir / "postgres"),
        "-D",
        str(work / "data"),
        "-p",
        str(port),
        "-k",
        str(work),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "fsync=off",
        "-c",
        "synchronous_commit=off",
        "-c",
        "full_page_writes=off",
        "-c",
        "shared_buffers=16MB",
        "-c",
        "max_connections=60",
    ]
    server = _launch("postgresql", argv, work, port, owner, signal.SIGQUIT, signal.SIGINT)
    info = PostgresServer(port=port, socket_dir=str(work))

    def probe() -> None:
        psycopg.connect(info.admin_conninfo(), connect_timeout=2).close()

    _wait_until(server, probe, "PostgreSQL")
    with info.admin() as conn:
        conn.execute(f"CREATE ROLE {APP_USER} LOGIN PASSWORD '{PG_PASSWORD}'")
    try:
        yield info
    finally:
        server.stop()


@pytest.fixture
def pg_db(pg_server: PostgresServer) -> Iterator[str]:
    """A fresh database owned by the application role; yields its name."""
    name = pg_server.create_database()
    try:
        yield name
    finally:
        pg_server.drop_database(name)


# ---------------------------------------------------------------- MariaDB


def _mariadb_binaries() -> tuple[str, str]:
    server = shutil.which("mariadbd") or shutil.which("mysqld")
    for fallback in ("/usr/sbin/mariadbd", "/usr/sbin/mysqld"):
        if server is None and os.path.exists(fallback):
            server = fallback
    install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
    if server is None or install is None:
        pytest.fail(f"MariaDB server binaries (mariadbd, mariadb-install-db) are not installed; {INSTALL_HINT}")
    return server, install


@dataclass
class MariaDBServer:
    port: int
    socket: str
    user: str = APP_USER
    password: str = MY_PASSWORD

    def dsn(self, database: str, password: str = MY_PASSWORD) -> str:
        return f"mysql://{APP_USER}:{quote(password, safe='')}@127.0.0.1:{self.port}/{database}"

    def admin(self, database: str | None = None) -> Any:
        import pymysql

        return pymysql.connect(
            unix_socket=self.socket, user="root", password="", database=database, autocommit=True, charset="utf8mb4"
        )

    def create_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        with self.admin() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDBServer]:
    import pymysql

    server_bin, install_bin = _mariadb_binaries()
    owner = _service_user("mysql")
    work = _workdir("toolfork-my-", owner)
    install = subprocess.run(
        [
            install_bin,
            "--no-defaults",
            f"--datadir={work / 'data'}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            "--innodb-log-file-size=8M",
        ],
        capture_output=True,
        timeout=180,
        **_run_as(owner),
    )
    if install.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        output = (install.stdout + install.stderr).decode(errors="replace")[-3000:]
        pytest.fail(f"mariadb-install-db failed: {output}")
    port = _free_port()
    sock = str(work / "mysqld.sock")
    argv = [
        server_bin,
        "--no-defaults",
        f"--datadir={work / 'data'}",
        f"--socket={sock}",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        f"--pid-file={work / 'mysqld.pid'}",
        f"--log-error={work / 'server.log'}",  # the same file _launch sends stdout/stderr to
        "--skip-log-bin",
        "--skip-name-resolve",
        "--innodb-buffer-pool-size=16M",
        "--innodb-log-file-size=8M",
        "--innodb-flush-log-at-trx-commit=0",
        "--character-set-server=utf8mb4",
        "--max-connections=60",
    ]
    server = _launch("mariadb", argv, work, port, owner, signal.SIGKILL, signal.SIGTERM)
    info = MariaDBServer(port=port, socket=sock)

    def probe() -> None:
        pymysql.connect(unix_socket=sock, user="root", password="", connect_timeout=2).close()

    _wait_until(server, probe, "MariaDB")
    with info.admin() as conn, conn.cursor() as cur:
        for host in ("127.0.0.1", "localhost"):
            cur.execute(f"CREATE USER '{APP_USER}'@'{host}' IDENTIFIED BY %s", (MY_PASSWORD,))
            cur.execute(f"GRANT ALL PRIVILEGES ON `t\\_%`.* TO '{APP_USER}'@'{host}'")
    try:
        yield info
    finally:
        server.stop()


@pytest.fixture
def mariadb_db(mariadb_server: MariaDBServer) -> Iterator[str]:
    """A fresh database the application user may use; yields its name."""
    name = mariadb_server.create_database()
    try:
        yield name
    finally:
        mariadb_server.drop_database(name)
