#!/usr/bin/env bash
# Install the npm packages the MCP tests use (a reference MCP server and the MCP Inspector CLI) into
# one directory, pinned, once: a second run with the same pins does nothing.
#
#   scripts/npm_tools.sh [DIR]     DIR defaults to $TOOLFORK_NPM_TOOLS, else .npm-tools in the repository
#
# The tests (tests/mcp) find the packages in the same place; without node and npm they fail, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

EVERYTHING="@modelcontextprotocol/server-everything@2026.8.31"
INSPECTOR="@modelcontextprotocol/inspector@2.12.0"
dir="${1:-${TOOLFORK_NPM_TOOLS:-$PWD/.npm-tools}}"
stamp="$dir/.pins"
want="$EVERYTHING $INSPECTOR"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "npm_tools.sh: '$tool' is not installed; the MCP tests need node >= 20 and npm" >&2; exit 1; }
done
mkdir -p "$dir"
echo "npm_tools.sh: installing $want into $dir" >&2
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$EVERYTHING" "$INSPECTOR" >&2
echo "$want" > "$stamp"
