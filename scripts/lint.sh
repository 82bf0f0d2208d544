#!/usr/bin/env bash
# Static checks, in the newest venv (built by scripts/venv.sh when it is missing):
#   ruff   ruff check toolfork tests
#   mypy   python -m mypy   (its configuration is [tool.mypy] in pyproject.toml)
# `scripts/lint.sh` runs both (the second even when the first fails); `scripts/lint.sh mypy` runs one.
# The exit status is non-zero if any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."

checks=("$@")
[ "${#checks[@]}" -gt 0 ] || checks=(ruff mypy)

venv="$PWD/.ci-venvs/newest"
if ! [ -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import mypy, ruff" 2>/dev/null; then
    bash scripts/venv.sh newest || exit 1
fi
export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"

status=0
for check in "${checks[@]}"; do
    case "$check" in
        ruff)
            echo "lint.sh: $("$venv/bin/ruff" --version): ruff check toolfork tests" >&2
            "$venv/bin/ruff" check toolfork tests || status=1 ;;
        mypy)
            echo "lint.sh: $("$venv/bin/python" -m mypy --version)" >&2
            "$venv/bin/python" -m mypy || status=1 ;;
        *)
            echo "usage: scripts/lint.sh [ruff] [mypy]" >&2
            exit 2 ;;
    esac
done
exit $status
