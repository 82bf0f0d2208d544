"""The kill test of ``tests/cli/test_kill_resume.py`` with its ledger in PostgreSQL (the suite's server):
SIGKILLs at random moments, resumes until done; every effect at most once, none guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_kill_resume import _check, _kill_and_resume
from tests.toolkits.conftest import PostgresServer

pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("postgresql")]


@pytest.mark.timeout(300)
def test_sigkills_with_a_postgresql_ledger(tmp_path: Path, pg_server: PostgresServer, pg_db: str) -> None:
    ids, records, charges, applied = _kill_and_resume(tmp_path, 1500, 8, ["--workers", "2"], seed=11,
                                                      ledger=pg_server.dsn(pg_db))
    _check(ids, records, charges, applied)
