#!/usr/bin/env bash
# The whole test suite on a fresh machine, at the newest versions of every dependency:
#   - builds a fresh venv (.ci-venvs/newest) with the package and every extra at the newest versions
#     that resolve (scripts/venv.sh; nothing already installed in the system python is used),
#   - installs the database servers the SQL toolkit tests start (PostgreSQL, MariaDB: Debian packages,
#     only when missing; scripts/services.sh) and the npm packages of the MCP tests (scripts/npm_tools.sh),
#   - runs pytest in parallel in that venv.
#
#   scripts/test.sh                       the README's test command (CI's newest leg)
#   scripts/test.sh --lowest ...          the same at the lowest declared bounds (.ci-venvs/lowest)
#   scripts/test.sh --python 3.13 ...     the same on another declared Python (.ci-venvs/newest-py3.13);
#                                         combines with --lowest (CI: --lowest --python 3.10)
#   scripts/test.sh --fast ...            the tool model's and the executor's tests, leaving out any that
#                                         needs a server: no apt, no npm, no Ray; reuses the venv when there
#                                         is one (614 tests: 2:06 on 2 cores beside other jobs, load 24).
#                                         Given test paths: those, still without the tests that need a server
#   scripts/test.sh tests/executor -x     extra arguments go to pytest
#   TOOLFORK_REUSE_VENV=1 scripts/test.sh ...   reuse the venv built last time (quicker while iterating)
set -euo pipefail
cd "$(dirname "$0")/.."

deps=newest
pyver=""
fast=""
while [ $# -gt 0 ]; do
    case "$1" in
        --fast) fast=1; shift ;;
        --lowest) deps=lowest; shift ;;
        --python) pyver="${2:?--python takes a version such as 3.13}"; shift 2 ;;
        *) break ;;
    esac
done
venv="$PWD/.ci-venvs/$deps${pyver:+-py$pyver}"

if { [ "${TOOLFORK_REUSE_VENV:-}" = "1" ] || [ -n "$fast" ]; } && [ -x "$venv/bin/python" ]; then
    echo "test.sh: reusing $venv" >&2
else
    start=$SECONDS
    bash scripts/venv.sh "$deps" $pyver
    echo "test.sh: $deps venv built in $((SECONDS - start)) s" >&2
fi
select=()
if [ -n "$fast" ]; then
    # No server: the tests that need one (marked in tests/conftest.py and pyproject.toml) are left out.
    select=(-m "not (services or ray or postgres or mysql)")
    paths=0
    for arg in "$@"; do [ -e "${arg%%::*}" ] && paths=1; done
    [ "$paths" = 1 ] || select+=(tests/tools tests/executor)
else
    bash scripts/services.sh
    bash scripts/npm_tools.sh  # the MCP tests' npm packages: reference server, Inspector, node 22, conformance suite (pinned; once)
    # The python MCP SDK's everything-server at the venv's mcp version (from its sdist; once per version): network
    # work, done here with retries rather than inside a test's time limit.
    "$venv/bin/python" -m tests.mcp.sdk_everything
fi

# The venv first on PATH: tests that start `python` or the `toolfork` script get the venv's.
export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"
# Bytecode is written (the project's modules, and pytest's rewritten tests): with PYTHONDONTWRITEBYTECODE
# each xdist worker would compile and rewrite every test module again (10 CPU-seconds a worker), and each
# CLI run or Ray worker the project's modules.
unset PYTHONHOME PYTHONDONTWRITEBYTECODE
# Three xdist workers per core: about half of the suite's time is spent waiting (for the commands and
# servers it starts, for timeouts, for Ray), so more workers than cores keep the cores busy. Beside two
# busy loops on 2 cores the whole suite took 8:30 with 5 workers, 7:58 with 6 and 8:02 with 7. A group of
# tests that shares a server (``xdist_group``) stays in one worker. TOOLFORK_TEST_WORKERS overrides it.
workers="${TOOLFORK_TEST_WORKERS:-$(( $(nproc) * 3 ))}"
exec "$venv/bin/python" -m pytest -n "$workers" --dist loadgroup ${select[@]+"${select[@]}"} "$@"
