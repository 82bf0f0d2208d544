#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs the package with every extra, the database servers
# the SQL toolkit tests start (PostgreSQL, MariaDB: Debian packages, only when missing), then runs pytest
# in parallel. Extra arguments go to pytest (e.g. scripts/test.sh tests/executor -x).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
python3 -m pip install --quiet -e ".[all,test]"
bash scripts/services.sh
exec python3 -m pytest -n auto --dist loadgroup "$@"
