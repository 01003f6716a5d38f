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
