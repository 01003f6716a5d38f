#!/usr/bin/env bash
# `make fleet`: a fleet on loopback to try by hand (docs/FLEET.md, "Sessions
# across nodes"). Starts Redis, three `mcp-supervisor serve` nodes on the
# demo server (as `make run` does, one stdio connection `demo`) sharing a
# fleet key made here, and HAProxy in front of their gateways with round
# robin and no affinity; prints where to point a client. Ctrl-C (or SIGTERM)
# stops all of it; so does any of them exiting.
#
# Ports (FLEET_PORT, default 7400): the balancer on FLEET_PORT, the nodes'
# gateways on +1..+3, their admin APIs on +11..+13, Redis on +20. Needs
# redis-server and haproxy (Debian packages; scripts/install-test-deps.sh
# installs them when run as root) and a built workspace (`make build`).
# The fleet key lives in a 0600 file in a temporary directory, removed at
# the end with the configs and logs; it is never printed.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${FLEET_PORT:-7400}
START_BOUND=${START_BOUND:-60} # seconds for each port to answer
SUPERVISOR=${CARGO_TARGET_DIR:-target}/debug/mcp-supervisor
HAPROXY=${HAPROXY:-/usr/sbin/haproxy}
REDIS=${REDIS:-redis-server}

say() { echo "fleet: $*"; }
die() { echo "fleet: $*" >&2; exit 1; }

[[ "$BASE" =~ ^[0-9]+$ ]] && ((BASE >= 1024 && BASE <= 65500)) ||
    die "FLEET_PORT must be a port number from 1024 to 65500, not '$BASE'"
[[ -x "$SUPERVISOR" ]] || die "$SUPERVISOR is missing: run 'make build' first"
command -v "$REDIS" >/dev/null ||
    die "redis-server is missing: install Debian's package redis-server (./scripts/install-test-deps.sh does, as root)"
[[ -x "$HAPROXY" ]] ||
    die "$HAPROXY is missing: install Debian's package haproxy (./scripts/install-test-deps.sh does, as root)"

BALANCER=$BASE
GATEWAYS=($((BASE + 1)) $((BASE + 2)) $((BASE + 3)))
ADMINS=($((BASE + 11)) $((BASE + 12)) $((BASE + 13)))
REDIS_PORT=$((BASE + 20))

listening() { # listening PORT: something accepts connections on 127.0.0.1:PORT
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
for port in "$BALANCER" "${GATEWAYS[@]}" "${ADMINS[@]}" "$REDIS_PORT"; do
    ! listening "$port" || die "port $port is taken (set FLEET_PORT to use other ports)"
done

DIR=$(mktemp -d "${TMPDIR:-/tmp}/mcp-fleet.XXXXXX")
PIDS=()
stop_all() {
    local pid i
    trap - EXIT INT TERM
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    # shutdown_timeout (10 s) and a margin; then whatever is left is killed.
    for ((i = 0; i < 150; i++)); do
        local left=0
        for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
        ((left)) || break
        sleep 0.1
    done
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    rm -rf "$DIR"
    say "stopped"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_for() { # wait_for PORT NAME PID LOG
    local i
    for ((i = 0; i < START_BOUND * 10; i++)); do
        listening "$1" && return 0
        kill -0 "$3" 2>/dev/null || { tail -n 20 "$4" >&2; die "$2 exited at start (log above)"; }
        sleep 0.1
    done
    tail -n 20 "$4" >&2
    die "$2 did not listen on 127.0.0.1:$1 within ${START_BOUND}s (log above)"
}

# The fleet key: 32 random bytes, base64, readable by this user only.
umask 077
if command -v openssl >/dev/null; then
    openssl rand -base64 32 >"$DIR/fleet.key"
else
    head -c 32 /dev/urandom | base64 >"$DIR/fleet.key"
fi

"$REDIS" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no --dir "$DIR" >"$DIR/redis.log" 2>&1 &
PIDS+=($!)
wait_for "$REDIS_PORT" redis-server "$!" "$DIR/redis.log"

for n in 1 2 3; do
    cat >"$DIR/node-$n.toml" <<EOF
[gateway]
listen = "127.0.0.1:${GATEWAYS[n - 1]}"

[admin]
listen = "127.0.0.1:${ADMINS[n - 1]}"

[fleet]
redis = "redis://127.0.0.1:$REDIS_PORT"
key_file = "$DIR/fleet.key"
node = "node-$n"
namespace = "demo"

[connections.demo]
transport = "stdio"
command = "mcp-demo-server"
EOF
    "$SUPERVISOR" serve --config "$DIR/node-$n.toml" >"$DIR/node-$n.log" 2>&1 &
    PIDS+=($!)
done
for n in 1 2 3; do
    wait_for "${GATEWAYS[n - 1]}" "node-$n" "${PIDS[n]}" "$DIR/node-$n.log"
done

{
    printf 'defaults\n    mode http\n    timeout connect 5s\n'
    printf '    timeout client 1h\n    timeout server 1h\n    timeout http-keep-alive 60s\n'
    printf 'frontend mcp\n    bind 127.0.0.1:%s\n    default_backend nodes\n' "$BALANCER"
    printf 'backend nodes\n    balance roundrobin\n'
    for n in 1 2 3; do
        printf '    server node-%s 127.0.0.1:%s\n' "$n" "${GATEWAYS[n - 1]}"
    done
} >"$DIR/haproxy.cfg"
"$HAPROXY" -f "$DIR/haproxy.cfg" -db >"$DIR/haproxy.log" 2>&1 &
PIDS+=($!)
wait_for "$BALANCER" haproxy "$!" "$DIR/haproxy.log"

# Each node reaches the others' sessions once it has heard their heartbeats
# (each second, with their gateway's address): wait for that, so a client's
# first requests all find their session.
mcp() { # mcp PORT SESSION BODY: POST BODY to the gateway at PORT; headers and status
    curl -sS -o /dev/null -D - -w 'status: %{http_code}\n' --max-time 10 \
        -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
        -H 'mcp-protocol-version: 2025-11-25' ${2:+-H "mcp-session-id: $2"} \
        --data "$3" "http://127.0.0.1:$1/mcp" | tr -d '\r'
}
command -v curl >/dev/null || die "curl is missing"
for n in 1 2 3; do
    session=$(mcp "${GATEWAYS[n - 1]}" "" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fleet.sh","version":"1"}}}' |
        sed -n 's/^mcp-session-id: //Ip')
    [[ -n "$session" ]] || die "node-$n opened no session (log: $DIR/node-$n.log)"
    mcp "${GATEWAYS[n - 1]}" "$session" '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
    for other in 1 2 3; do
        ((other != n)) || continue
        for ((i = 0; ; i++)); do
            mcp "${GATEWAYS[other - 1]}" "$session" '{"jsonrpc":"2.0","id":2,"method":"ping"}' |
                grep -q '^status: 200$' && break
            ((i < START_BOUND * 10)) || die "node-$other does not reach node-$n's sessions within ${START_BOUND}s"
            sleep 0.1
        done
    done
    curl -sS -o /dev/null -X DELETE -H "mcp-session-id: $session" "http://127.0.0.1:${GATEWAYS[n - 1]}/mcp"
done

say "up: point an MCP client at http://127.0.0.1:$BALANCER/mcp"
say "  (HAProxy, round robin over node-1..3 at 127.0.0.1:${GATEWAYS[0]}, :${GATEWAYS[1]}, :${GATEWAYS[2]})"
say "  status: $SUPERVISOR status --admin 127.0.0.1:${ADMINS[0]} (node-1; :${ADMINS[1]}, :${ADMINS[2]} the others)"
say "  logs: $DIR/*.log; Ctrl-C stops it all"

# Until Ctrl-C, or until one of them exits.
set +e
wait -n "${PIDS[@]}"
status=$?
say "a process of the fleet exited (status $status); stopping the others"
exit "$status"
