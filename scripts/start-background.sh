# Sourced by the measuring scripts (large-payloads.sh, hop-costs.sh).
#
# start NAME COMMAND...: starts COMMAND in the background (a job of the
# calling shell, so its EXIT trap can stop it) with stdout to
# $scratch/NAME.out and stderr to $scratch/NAME.err; sets `url` to the first
# URL it prints and `pid` to its process.
start() {
    local name=$1
    shift
    "$@" >"$scratch/$name.out" 2>"$scratch/$name.err" &
    pid=$!
    url=""
    for _ in $(seq 100); do
        url=$(grep -o 'http://[^ ]*' "$scratch/$name.out" | head -1 || true)
        [[ -n "$url" ]] && break
        sleep 0.1
    done
    [[ -n "$url" ]] || { echo "$name did not start" >&2; exit 1; }
}

# start_serve NAME BINDIR CONFIG: `mcp-supervisor serve --config CONFIG` from
# BINDIR, started as NAME; once it says the gateway listens, sets
# `gateway_url` to the gateway's MCP endpoint and `pid` to the process.
start_serve() {
    start "$1" "$2/mcp-supervisor" serve --config "$3"
    for _ in $(seq 100); do grep -q "gateway listening" "$scratch/$1.out" && break; sleep 0.1; done
    gateway_url=$(grep -o 'http://[^ ]*/mcp' "$scratch/$1.out" | head -1)
}
