#!/usr/bin/env bash
# Installs the pinned peer gateway that `make bench PEERS=1` measures ours
# against, into the git-ignored .tools/mcp-proxy (docs/BENCHMARKS.md, "Peers"):
# mcp-proxy 0.6.0 from crates.io (the tower-mcp based Rust MCP gateway), built
# with `cargo install --locked --no-default-features` — the lock file it was
# published with, no optional features. About 9 minutes on 2 cores, once:
# skipped while cargo's install record in that folder names the pinned
# version (the binary has no --version). FORCE=1 reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."

MCP_PROXY_VERSION=0.6.0
TOOLS=.tools
DIR="$TOOLS/mcp-proxy"
BIN="$DIR/bin/mcp-proxy"

say() { echo "install-peers: $*"; }
die() {
    echo "install-peers: ERROR: $*" >&2
    exit 1
}

command -v cargo >/dev/null 2>&1 || die "cargo is required but was not found on PATH"

mkdir -p "$TOOLS"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$TOOLS/.peers-install.lock"
    flock 9
fi

installed() {
    [[ -x "$BIN" ]] &&
        cargo install --list --root "$DIR" 2>/dev/null | grep -qx "mcp-proxy v$MCP_PROXY_VERSION:"
}
if [[ "${FORCE:-0}" != 1 ]] && installed; then
    say "mcp-proxy $MCP_PROXY_VERSION: up to date"
    exit 0
fi

say "mcp-proxy $MCP_PROXY_VERSION: installing into $DIR (cargo install --locked --no-default-features, ~9 min)"
rm -rf "$DIR"
# Its own target folder, removed afterwards: the build is not worth keeping.
build_dir=$(mktemp -d)
trap 'rm -rf "$build_dir"' EXIT
if ! cargo install mcp-proxy --version "=$MCP_PROXY_VERSION" --locked --no-default-features \
    --root "$DIR" --target-dir "$build_dir" --quiet; then
    rm -rf "$DIR"
    die "cargo install mcp-proxy $MCP_PROXY_VERSION failed (see the cargo output above)"
fi
installed || {
    rm -rf "$DIR"
    die "mcp-proxy installed but cargo does not list mcp-proxy v$MCP_PROXY_VERSION in $DIR"
}
say "mcp-proxy $MCP_PROXY_VERSION at $BIN"
