#!/usr/bin/env bash
# Smoke check: `make run` works from a fresh clone, as the README promises.
#
# Runs `make run` (the embedded default config: gateway on 127.0.0.1:7300, admin
# API on 127.0.0.1:7301, the bundled demo server over stdio) in the background,
# waits for it, lists the tools and calls `demo__echo` and `list_mcps` with the
# Python MCP SDK client (tests/interop/python_client.py), checks
# `mcp-supervisor status`, then sends SIGTERM to the supervisor and checks that it
# (and so `make run`) exits 0 and that the demo server child is gone.
#
# Needs the ports 7300 and 7301 free, curl, and the test dependencies
# (scripts/install-test-deps.sh is run first; it is quick when up to date).
# Every wait is bounded; the background processes are stopped however the script
# ends. Called by .ci/run after `make test`; see docs/TESTING.md.
set -euo pipefail
cd "$(dirname "$0")/.."

GATEWAY_URL=http://127.0.0.1:7300/mcp
ADMIN_URL=http://127.0.0.1:7301
START_BOUND=${START_BOUND:-120} # seconds for the ports to answer once built
# shutdown_timeout (10s by default) plus a generous margin for a slow machine.
STOP_BOUND=${STOP_BOUND:-40}
SUPERVISOR=./target/debug/mcp-supervisor
PYTHON=.tools/venv/bin/python

say() { echo "smoke-make-run: $*"; }
LOG=$(mktemp "${TMPDIR:-/tmp}/smoke-make-run.XXXXXX")
die() {
    echo "smoke-make-run: FAILED: $*" >&2
    if [[ -s "$LOG" ]]; then
        echo "--- last lines of the 'make run' output ($LOG) ---" >&2
        tail -n 40 "$LOG" >&2
    fi
    exit 1
}

alive() { # a live process (not a zombie) with this pid
    local state
    [[ -r "/proc/$1/stat" ]] || return 1
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
    [[ -n "$state" && "$state" != Z && "$state" != X ]]
}

child_named() { # child_named PPID NAME: the pid of PPID's child called NAME
    pgrep -P "$1" -x "$2" | head -n 1
}

MAKE_PID=
SUPERVISOR_PID=
DEMO_PID=
stop() { # stop PID: SIGTERM, wait up to 15 s, then SIGKILL
    local pid=$1 i
    alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 150; i++)); do
        alive "$pid" || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
    local pid
    for pid in $SUPERVISOR_PID $MAKE_PID $DEMO_PID; do stop "$pid"; done
    if [[ -n "$MAKE_PID" ]]; then wait "$MAKE_PID" 2>/dev/null || true; fi
    rm -f "$LOG" "$LOG.client"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

command -v curl >/dev/null 2>&1 || die "curl is required (it polls the admin API)"
command -v pgrep >/dev/null 2>&1 || die "pgrep (procps) is required (it finds the supervisor's pid)"
for address in 127.0.0.1/7300 127.0.0.1/7301; do
    if (exec 3<>"/dev/tcp/$address") 2>/dev/null; then
        die "something already listens on ${address/\//:} (another mcp-supervisor serve?); stop it first"
    fi
done

say "building (make build) and installing the test client's dependencies"
make build >/dev/null || die "make build failed"
./scripts/install-test-deps.sh >/dev/null || die "scripts/install-test-deps.sh failed"
[[ -x "$PYTHON" ]] || die "$PYTHON is missing after scripts/install-test-deps.sh"

say "starting 'make run' in the background (output in $LOG)"
make run >"$LOG" 2>&1 </dev/null &
MAKE_PID=$!

# --- wait until both ports answer ------------------------------------------------
ready=
for ((i = 0; i < START_BOUND * 5; i++)); do
    alive "$MAKE_PID" || die "'make run' exited before it was ready"
    if grep -q "gateway listening on $GATEWAY_URL" "$LOG" &&
        curl -fsS --max-time 2 "$ADMIN_URL/healthz" >/dev/null 2>&1; then
        ready=yes
        break
    fi
    sleep 0.2
done
[[ -n "$ready" ]] || die "no 'gateway listening on $GATEWAY_URL' and $ADMIN_URL/healthz within ${START_BOUND}s"
# `make run` runs the binary directly (no shell in between).
SUPERVISOR_PID=$(child_named "$MAKE_PID" mcp-supervisor) ||
    die "cannot find the mcp-supervisor process started by make (pid $MAKE_PID)"
[[ -n "$SUPERVISOR_PID" ]] || die "cannot find the mcp-supervisor process started by make (pid $MAKE_PID)"
say "up: gateway $GATEWAY_URL, admin $ADMIN_URL, mcp-supervisor pid $SUPERVISOR_PID"

# --- an MCP client: list, call a namespaced tool and a meta-tool -----------------
# (its stderr is kept in $LOG.client, shown if it fails.)
if ! output=$("$PYTHON" tests/interop/python_client.py "$GATEWAY_URL" \
    demo__echo '{"text": "smoke test"}' list_mcps '{}' 2>"$LOG.client"); then
    die "the MCP client failed against $GATEWAY_URL: $(cat "$LOG.client")"
fi
if ! check=$("$PYTHON" - "$output" <<'EOF' 2>&1
import json, sys
out = json.loads(sys.argv[1])
tools = out["tools"]
for name in ("demo__echo", "demo__add", "list_mcps", "call_mcp"):
    assert name in tools, f"{name} not listed: {tools}"
echo, listed = out["calls"]
assert not echo["is_error"] and echo["text"] == ["smoke test"], f"demo__echo answered {echo}"
connections = json.loads(listed["text"][0])["connections"]
assert [c["name"] for c in connections] == ["demo"], f"list_mcps answered {connections}"
print(f"{len(tools)} tools listed; demo__echo and list_mcps answered")
EOF
); then
    die "unexpected MCP results: $check"$'\n'"$output"
fi
say "MCP client: $check"

# --- mcp-supervisor status (default admin address) --------------------------------
if ! status=$("$SUPERVISOR" status 2>&1); then
    die "mcp-supervisor status failed: $status"
fi
grep -Eq '^demo +stdio +[0-9-]+ +ready ' <<<"$status" || die "status does not show demo ready (with the protocol it agreed):"$'\n'"$status"
say "status: demo is ready"
DEMO_PID=$(child_named "$SUPERVISOR_PID" mcp-demo-server) || true
[[ -n "$DEMO_PID" ]] || die "no mcp-demo-server child of the supervisor after a call"

# --- SIGTERM: exit 0 within the bound, no child left -----------------------------
say "SIGTERM to mcp-supervisor (pid $SUPERVISOR_PID)"
kill -TERM "$SUPERVISOR_PID"
for ((i = 0; i < STOP_BOUND * 10; i++)); do
    alive "$MAKE_PID" || break
    sleep 0.1
done
alive "$MAKE_PID" && die "'make run' still running ${STOP_BOUND}s after SIGTERM to the supervisor"
code=0
wait "$MAKE_PID" || code=$?
MAKE_PID=
[[ "$code" == 0 ]] || die "'make run' exited with code $code after SIGTERM (expected 0)"
for ((i = 0; i < 100; i++)); do
    alive "$DEMO_PID" || break
    sleep 0.1
done
alive "$DEMO_PID" && die "the demo server (pid $DEMO_PID) outlived the supervisor"
DEMO_PID=
SUPERVISOR_PID=
! grep -q 'panicked' "$LOG" || die "the output mentions a panic"
say "ok: make run served MCP, status worked, SIGTERM exited 0 and left no child"
