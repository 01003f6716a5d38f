#!/usr/bin/env bash
# Large payloads vs a neighbour (docs/BENCHMARKS.md, "Large payloads").
#
#   [UPSTREAM=rmcp|python|python-json|ts|ts-json] [TOOL=echo|echo_back] \
#       scripts/large-payloads.sh [BINDIR...]
#
# For each BINDIR holding `mcp-supervisor` and `mcp-test-server` (default: the
# release build in target/release), runs `serve` in front of two upstreams,
# `a` and `b`, and scripts/large-payloads.py: 8 callers each send three
# 3.6 MB `a__$TOOL` calls (70,000 small JSON objects) while one caller times
# `b__add` calls. Prints the neighbour's latency and the supervisor's RSS
# before, at peak, and 5 s and 15 s after. Give several BINDIRs (builds of
# different commits or allocators) to compare them side by side.
#
# `a` is UPSTREAM: `mcp-test-server` (rmcp, the default), or a server on the
# Python SDK (FastMCP) or the TypeScript SDK (scripts/large-payloads/),
# answering as event streams or, with `-json`, as JSON (installed by
# scripts/install-test-deps.sh). TOOL `echo` answers in a line; `echo_back`
# sends the arguments back (an answer as large as the call, as text and as
# structured content; `mcp-test-server`'s `echo` already answers with them).
# `b` is always `mcp-test-server`.
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || set -- "${CARGO_TARGET_DIR:-target}/release"
scratch=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$scratch"' EXIT

# shellcheck source=scripts/start-background.sh
source scripts/start-background.sh

upstream=${UPSTREAM:-rmcp}
tool=${TOOL:-echo}
node=.tools/node/node_modules/.bin/node
python=.tools/venv/bin/python
case $upstream in
rmcp | python | python-json | ts | ts-json) ;;
*) echo "UPSTREAM is one of rmcp, python, python-json, ts, ts-json" >&2; exit 2 ;;
esac

for bin in "$@"; do
    case $upstream in
    rmcp) start a "$bin/mcp-test-server" --http 127.0.0.1:0 ;;
    python) start a "$python" scripts/large-payloads/python_upstream.py ;;
    python-json) start a "$python" scripts/large-payloads/python_upstream.py --json ;;
    ts) start a "$node" scripts/large-payloads/ts_upstream.mjs ;;
    ts-json) start a "$node" scripts/large-payloads/ts_upstream.mjs --json ;;
    esac
    a=$url
    # It may announce its URL before it accepts connections.
    address=${a#http://}
    address=${address%%/*}
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/${address%:*}/${address#*:}") 2>/dev/null && break
        sleep 0.1
    done
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
    echo "== $bin, upstream $upstream, a__$tool"
    python3 scripts/large-payloads.py "$gateway_url" "$pid" 3 "a__$tool"
    kill $(jobs -p) 2>/dev/null || true
    wait 2>/dev/null || true
done
