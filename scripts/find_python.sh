#!/usr/bin/env bash
# Print the path of an interpreter for Python X.Y (the one argument), or fail saying which are there.
# CI tests every Python pyproject.toml declares; the image has them under pyenv, a developer's machine
# may have them on PATH. The newest patch release under pyenv wins, so a log names what was tested.
set -euo pipefail
want="${1:?usage: scripts/find_python.sh X.Y}"
if command -v "python$want" >/dev/null 2>&1 && "python$want" -c 'import sys' 2>/dev/null; then
    command -v "python$want"
    exit 0
fi
root="${PYENV_ROOT:-$HOME/.pyenv}"
found="$(ls -d "$root/versions/$want".* 2>/dev/null | grep -E "/$want\.[0-9]+$" | sort -V | tail -n 1 || true)"
if [ -n "$found" ] && [ -x "$found/bin/python$want" ]; then
    echo "$found/bin/python$want"
    exit 0
fi
echo "find_python.sh: no Python $want on PATH or under $root/versions (have: $(ls "$root/versions" 2>/dev/null | tr '\n' ' '))" >&2
exit 1
