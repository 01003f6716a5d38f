#!/usr/bin/env bash
# Who pays for a call through the gateway (docs/BENCHMARKS.md, P5, "Who pays
# for a call with 8 callers").
#
#   scripts/hop-costs.sh [BINDIR] [--legacy-upstream] [--peer] [--pinned]
#
# Starts `mcp-test-server --http` and `mcp-supervisor serve` in front of it
# (from BINDIR, default the release build), then runs an `mcp-bench worker`
# loop (8 callers, one session, `echo`) directly and through the gateway
# (and through mcp-proxy with --peer, from .tools/mcp-proxy). For each route
# it prints calls/s and, per process on the path, CPU time and run-queue
# wait per call, from /proc/PID/task/*/schedstat read 2 s apart in the
# middle of the loop. --legacy-upstream starts the upstream speaking only
# 2025-11-25; --pinned also measures a second gateway whose connection pins
# `protocol = "2025-11-25"` (the generation mcp-proxy speaks upstream).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${CARGO_TARGET_DIR:-target}/release"
upstream_args=()
peer=""
pinned=""
for arg in "$@"; do
    case "$arg" in
        --legacy-upstream) upstream_args+=(--legacy-only) ;;
        --peer) peer=1 ;;
        --pinned) pinned=1 ;;
        *) bin=$arg ;;
    esac
done
scratch=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$scratch"' EXIT

# shellcheck source=scripts/start-background.sh
source scripts/start-background.sh

# Sums CPU and run-queue wait (ns) and time slices over the threads of each pid given.
snapshot() {
    for p in "$@"; do
        awk -v p="$p" '{run += $1; wait += $2; slices += $3} END {print p, run, wait, slices}' \
            /proc/"$p"/task/*/schedstat
    done
}

# measure LABEL URL TOOL PID...: the loop through URL, then the costs of each PID.
measure() {
    local label=$1 target=$2 tool=$3
    shift 3
    local spec
    spec='{"kind":"Loop","client":"RawPooled","url":"'$target'","tool":"'$tool'","arguments":{"text":"hello"},"callers":8,"sessions":1,"max_concurrent_calls":4,"seconds":4,"warmup_seconds":0.5}'
    "$bin/mcp-bench" worker "$spec" >"$scratch/loop.json" 2>"$scratch/loop.err" &
    local client=$!
    sleep 1.5
    snapshot "$client" "$@" >"$scratch/before"
    sleep 2
    snapshot "$client" "$@" >"$scratch/after"
    wait "$client"
    python3 - "$label" "$scratch" <<'PY'
import json, sys
label, scratch = sys.argv[1], sys.argv[2]
loop = json.loads(open(f"{scratch}/loop.json").read().splitlines()[-1])
rate = loop["calls"] / loop["elapsed_s"]
before = [l.split() for l in open(f"{scratch}/before")]
after = [l.split() for l in open(f"{scratch}/after")]
roles = ["client", "upstream", "gateway"]
parts = []
for role, (p, r0, w0, _), (_, r1, w1, _) in zip(roles, before, after):
    calls = rate * 2
    parts.append(f"{role} {(float(r1) - float(r0)) / calls / 1e3:.1f} µs CPU, "
                 f"{(float(w1) - float(w0)) / calls / 1e3:.1f} µs waiting")
print(f"{label}: {rate:,.0f} calls/s; " + "; ".join(parts))
PY
}

start upstream "$bin/mcp-test-server" --http 127.0.0.1:0 "${upstream_args[@]}"
upstream_url=$url
upstream_pid=$pid
# start_gateway NAME [EXTRA-CONFIG-LINE]: our gateway in front of the
# upstream; sets gateway_url and gateway_pid.
start_gateway() {
    cat >"$scratch/$1.toml" <<TOML
[gateway]
listen = "127.0.0.1:0"
[admin]
listen = "127.0.0.1:0"
[connections.up]
transport = "http"
url = "$upstream_url"
max_concurrent_calls = 8
${2:-}
TOML
    start_serve "$1" "$bin" "$scratch/$1.toml"
    gateway_pid=$pid
}

measure "direct" "$upstream_url" echo "$upstream_pid"
start_gateway gateway
measure "gateway" "$gateway_url" up__echo "$upstream_pid" "$gateway_pid"
kill "$gateway_pid"
if [[ -n "$pinned" ]]; then
    start_gateway pinned 'protocol = "2025-11-25"'
    measure "gateway, upstream pinned to 2025-11-25" "$gateway_url" up__echo "$upstream_pid" "$gateway_pid"
    kill "$gateway_pid"
fi
if [[ -n "$peer" ]]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$scratch/proxy.toml" <<TOML
[proxy]
name = "p"
[proxy.listen]
host = "127.0.0.1"
port = $port
[[backends]]
name = "up"
transport = "http"
url = "$upstream_url"
[observability]
log_level = "info"
TOML
    .tools/mcp-proxy/bin/mcp-proxy --config "$scratch/proxy.toml" >"$scratch/proxy.out" 2>&1 &
    proxy_pid=$!
    sleep 2
    measure "mcp-proxy" "http://127.0.0.1:$port/" up/echo "$upstream_pid" "$proxy_pid"
fi
