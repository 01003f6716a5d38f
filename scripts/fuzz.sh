#!/usr/bin/env bash
# Fuzzing (docs/TESTING.md, "Fuzzing"). The harnesses live in fuzz/.
#
#   scripts/fuzz.sh short                 bounded, deterministic pass on stable Rust
#                                         (seed corpus + seeded mutations, < 60 s of
#                                         fuzzing); `make test` runs it
#   scripts/fuzz.sh long [TARGET...]      libFuzzer via cargo-fuzz, FUZZ_SECONDS
#                                         (default 600) per target; `make fuzz`
#   scripts/fuzz.sh replay TARGET FILE    run one input (a saved crash) through a harness
#   scripts/fuzz.sh list                  the targets
#   scripts/fuzz.sh lint                  rustfmt check and clippy (-D warnings) of fuzz/,
#                                         which `make lint` runs (fuzz/ is its own workspace)
#
# Environment: FUZZ_SECONDS (long, per target), FUZZ_SANITIZER (long: none, the
# default, works on stable; address needs RUSTC_BOOTSTRAP=1, which this script
# then sets), FUZZ_SEED and FUZZ_ITERATIONS_SCALE (short), CARGO_TARGET_DIR
# (default: the workspace's target/, so the short run reuses `make build`'s
# dependencies where their features agree).
#
# Exit status: 0 when every target ran without a crash; 1 when one crashed
# (the input is saved under fuzz/artifacts/TARGET/); 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(config_parse retry_after classify jsonrpc_parse gateway_http standing codec)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
CARGO=${CARGO:-cargo}

say() { echo "fuzz: $*"; }
usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
known() {
    local t
    for t in "${TARGETS[@]}"; do [[ "$t" == "$1" ]] && return 0; done
    return 1
}

# The fuzz crate is its own workspace; its (git-ignored) lock file is a copy of
# the workspace's, so it builds against exactly the dependency versions the
# product ships with (cargo then adds the few fuzz-only packages, pinned with
# `=` in fuzz/Cargo.toml). Copied again only when the workspace's changes.
sync_lock() {
    local source
    source=$(sha256sum Cargo.lock | cut -d' ' -f1)
    if [[ ! -f fuzz/Cargo.lock || ! -f fuzz/.lock-source || "$(cat fuzz/.lock-source)" != "$source" ]]; then
        cp Cargo.lock fuzz/Cargo.lock
        echo "$source" >fuzz/.lock-source
    fi
}

short() {
    sync_lock
    # --no-default-features: no libFuzzer runtime, no C++ build; tests/short_run.rs
    # drives every harness itself.
    "$CARGO" test --manifest-path fuzz/Cargo.toml --no-default-features --lib --test short_run \
        -- --nocapture
}

long() {
    local targets=("$@") seconds=${FUZZ_SECONDS:-600} sanitizer=${FUZZ_SANITIZER:-none}
    ((${#targets[@]})) || targets=("${TARGETS[@]}")
    local t
    for t in "${targets[@]}"; do known "$t" || {
        echo "fuzz: unknown target '$t' (scripts/fuzz.sh list)" >&2
        exit 2
    }; done
    ./scripts/install-fuzz-deps.sh
    export PATH="$PWD/.tools/cargo-fuzz/bin:$PATH"
    if [[ "$sanitizer" != none ]]; then
        # Sanitizers are `-Zsanitizer`, a nightly flag; stable rustc ships their
        # runtimes and accepts the flag under RUSTC_BOOTSTRAP=1.
        export RUSTC_BOOTSTRAP=1
    fi
    sync_lock
    # The `standing` harness runs the in-repo test server as a stdio child.
    "$CARGO" build -p mcp-test-support --bin mcp-test-server
    export MCP_TEST_SERVER_BIN="${MCP_TEST_SERVER_BIN:-$CARGO_TARGET_DIR/debug/mcp-test-server}"
    local failed=() dict
    for t in "${targets[@]}"; do
        mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
        dict=()
        [[ -f "fuzz/dicts/$t.dict" ]] && dict=("-dict=fuzz/dicts/$t.dict")
        say "$t: libFuzzer for ${seconds}s (sanitizer: $sanitizer; corpus fuzz/corpus/$t + fuzz/seeds/$t)"
        # -timeout: one input taking a minute is a hang (the gateway harness
        # bounds every request at 30 s). -rss_limit_mb: above libFuzzer's 2 GB
        # default, for the gateway's long-lived process.
        if ! cargo fuzz run --fuzz-dir fuzz --sanitizer "$sanitizer" --release --debug-assertions \
            "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
            -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
            -print_final_stats=1 "${dict[@]}"; then
            failed+=("$t")
        fi
    done
    if ((${#failed[@]})); then
        echo "fuzz: FAILED: ${failed[*]} (inputs in fuzz/artifacts/; replay with scripts/fuzz.sh replay TARGET FILE)" >&2
        exit 1
    fi
    say "no crash in ${targets[*]}"
}

lint() {
    sync_lock
    "$CARGO" fmt --manifest-path fuzz/Cargo.toml -- --check
    # Without libFuzzer (no C++ build), as the short run builds it; the
    # fuzz_targets/ binaries are one line each.
    "$CARGO" clippy --manifest-path fuzz/Cargo.toml --no-default-features --all-targets -- -D warnings
}

replay() {
    (($# == 2)) || usage
    known "$1" || {
        echo "fuzz: unknown target '$1' (scripts/fuzz.sh list)" >&2
        exit 2
    }
    local file
    file=$(realpath "$2")
    sync_lock
    FUZZ_INPUT="$file" "$CARGO" test --manifest-path fuzz/Cargo.toml --no-default-features \
        --test short_run -- --exact "$1" --nocapture
}

case "${1:-}" in
short) short ;;
long)
    shift
    long "$@"
    ;;
replay)
    shift
    replay "$@"
    ;;
list) printf '%s\n' "${TARGETS[@]}" ;;
lint) lint ;;
*) usage ;;
esac
