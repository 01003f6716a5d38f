#!/usr/bin/env bash
# Large payloads vs a neighbour (docs/BENCHMARKS.md, "Large payloads").
#
#   scripts/large-payloads.sh [BINDIR...]
#
# For each BINDIR holding `mcp-supervisor` and `mcp-test-server` (default: the
# release build in target/release), runs `serve` in front of two upstreams,
# `a` and `b`, and scripts/large-payloads.py: 8 callers each send three
# 3.6 MB `a__echo` calls (70,000 small JSON objects) while one caller times
# `b__add` calls. Prints the neighbour's latency and the supervisor's RSS
# before, at peak, and 5 s and 15 s after. Give several BINDIRs (builds of
# different commits or allocators) to compare them side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || set -- "${CARGO_TARGET_DIR:-target}/release"
scratch=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$scratch"' EXIT

# shellcheck source=scripts/start-background.sh
source scripts/start-background.sh

for bin in "$@"; do
    start a "$bin/mcp-test-server" --http 127.0.0.1:0
    a=$url
    start b "$bin/mcp-test-server" --http 127.0.0.1:0
    b=$url
    cat >"$scratch/config.toml" <<TOML
[gateway]
listen = "127.0.0.1:0"
[admin]
listen = "127.0.0.1:0"
[connections.a]
transport = "http"
url = "$a"
call_timeout = "60s"
[connections.b]
transport = "http"
url = "$b"
TOML
    start_serve serve "$bin" "$scratch/config.toml"
    echo "== $bin"
    python3 scripts/large-payloads.py "$gateway_url" "$pid" 3
    kill $(jobs -p) 2>/dev/null || true
    wait 2>/dev/null || true
done
