#!/usr/bin/env bash
# Installs the pinned cargo-fuzz that the long fuzz run (`make fuzz`,
# `scripts/fuzz.sh long`) drives libFuzzer with, into the git-ignored
# .tools/cargo-fuzz (see docs/TESTING.md, "Fuzzing"). The short run in
# `make test` needs none of this: it is a plain `cargo test`.
#
# `cargo install --locked` builds it from crates.io with the lock file it was
# published with. Idempotent: skipped while the installed binary reports the
# pinned version (cargo-fuzz only drives the project's own cargo and rustc, so
# a newer toolchain needs no rebuild of it). FORCE=1 reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
TOOLS=.tools
DIR="$TOOLS/cargo-fuzz"
BIN="$DIR/bin/cargo-fuzz"

say() { echo "install-fuzz-deps: $*"; }
die() {
    echo "install-fuzz-deps: ERROR: $*" >&2
    exit 1
}

command -v cargo >/dev/null 2>&1 || die "cargo is required but was not found on PATH"
command -v c++ >/dev/null 2>&1 ||
    die "a C++ compiler (c++) is required: libfuzzer-sys builds libFuzzer from source (Debian/Ubuntu: apt-get install g++)"

mkdir -p "$TOOLS"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$TOOLS/.fuzz-install.lock"
    flock 9
fi

want="cargo-fuzz $CARGO_FUZZ_VERSION"
if [[ "${FORCE:-0}" != 1 && -x "$BIN" && "$("$BIN" fuzz --version 2>/dev/null)" == "$want" ]]; then
    say "$want: up to date"
    exit 0
fi

say "cargo-fuzz $CARGO_FUZZ_VERSION: installing into $DIR (cargo install --locked)"
rm -rf "$DIR"
# Its own target folder, removed afterwards: the build is not worth keeping.
build_dir=$(mktemp -d)
trap 'rm -rf "$build_dir"' EXIT
if ! cargo install cargo-fuzz --version "=$CARGO_FUZZ_VERSION" --locked \
    --root "$DIR" --target-dir "$build_dir" --quiet; then
    rm -rf "$DIR"
    die "cargo install cargo-fuzz $CARGO_FUZZ_VERSION failed (see the cargo output above)"
fi
"$BIN" fuzz --version >/dev/null 2>&1 || {
    rm -rf "$DIR"
    die "cargo-fuzz installed but '$BIN fuzz --version' fails"
}
[[ "$("$BIN" fuzz --version)" == "$want" ]] || {
    rm -rf "$DIR"
    die "the installed cargo-fuzz does not report '$want'"
}
say "$want at $BIN"
