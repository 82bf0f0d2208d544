#!/usr/bin/env bash
# Build a fresh virtual environment with the package and every extra installed editable, at one end of
# what pyproject.toml allows:
#
#   scripts/venv.sh newest   -> .ci-venvs/newest: the newest version of everything that resolves
#   scripts/venv.sh lowest   -> .ci-venvs/lowest: the lowest declared bound of every direct dependency
#                               (uv's --resolution lowest-direct; what they pull in is the newest)
#   scripts/venv.sh newest 3.13  -> .ci-venvs/newest-py3.13: the same on another Python (any we declare)
#
# Without a version the venv is built on `python3`. A version is looked up as `pythonX.Y` on PATH, then
# under pyenv ($PYENV_ROOT, default ~/.pyenv: the newest installed X.Y.*); uv never downloads one.
#
# The venv is rebuilt from scratch every time, so nothing installed earlier (an older pydantic in the
# system python, say) can hide a dependency change. uv does the resolving (it is the tool that knows
# lowest-direct, and it is fast); it is installed with pip into .ci-venvs/tools first. The versions
# installed are printed at the end (and kept in .ci-venvs/NAME.txt), so a log says what was tested.
set -euo pipefail
cd "$(dirname "$0")/.."

name="${1:-newest}"
pyver="${2:-}"
case "$name" in
    newest) resolution=highest ;;
    lowest) resolution=lowest-direct ;;
    *) echo "usage: scripts/venv.sh newest|lowest" >&2; exit 2 ;;
esac

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
root=.ci-venvs
tools="$root/tools"
mkdir -p "$root"

# uv, in a venv of its own (the system python stays as it is).
if ! "$tools/bin/uv" --version >/dev/null 2>&1; then
    rm -rf "$tools"
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install --quiet --upgrade uv
fi
uv="$tools/bin/uv"

python="$(command -v python3)"
if [ -n "$pyver" ]; then
    python="$(bash scripts/find_python.sh "$pyver")" || exit 1
    name="$name-py$pyver"
fi
venv="$root/$name"
rm -rf "$venv"
"$uv" venv --quiet --python "$python" "$venv"
# --upgrade: ignore whatever uv's cache or an earlier resolution preferred; PyPI is uv's default index.
# --compile-bytecode: uv leaves the .py files alone by default, so every interpreter the suite starts
# (xdist workers, CLI runs, Ray workers: hundreds) would compile Ray, pydantic and the rest again, where
# PYTHONDONTWRITEBYTECODE is set (as on this machine) every time: 0.8 CPU-seconds for `import ray`
# against 0.45 from bytecode.
"$uv" pip install --quiet --python "$venv/bin/python" --resolution "$resolution" --upgrade --compile-bytecode \
    -e ".[all,test]"
"$uv" pip freeze --python "$venv/bin/python" --exclude-editable > "$root/$name.txt"
echo "venv.sh: $venv ($resolution, $("$venv/bin/python" -V)): $(grep -ciE '==' "$root/$name.txt") packages;" \
    "$(grep -iE '^(pydantic|pydantic-core|openai|anthropic|ray|multiprocess|psutil|httpx|moto|pytest|hypothesis|ruff|mypy)==' \
        "$root/$name.txt" | tr '\n' ' ')" >&2
