#!/usr/bin/env bash
# Installs the pinned third-party MCP servers the test suite talks to, into
# git-ignored folders under .tools/. Idempotent: a second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tools
# (Interop servers are added here as the suite grows; see docs/TESTING.md.)
echo "test dependencies: ok"
