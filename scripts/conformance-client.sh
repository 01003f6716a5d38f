#!/usr/bin/env bash
# The client under test for the MCP conformance suite's client scenarios
# (`conformance client --command scripts/conformance-client.sh --scenario NAME`;
# run by tests/e2e/conformance_client.rs, see docs/TESTING.md).
#
# The suite starts a mock MCP server for scenario NAME and runs this script with
# the server's URL as the only argument, MCP_CONFORMANCE_SCENARIO=NAME,
# MCP_CONFORMANCE_PROTOCOL_VERSION, and for some scenarios
# MCP_CONFORMANCE_CONTEXT (JSON). The script writes a temporary config with one
# streamable HTTP connection, `server`, to that URL and does what the scenario
# expects of a client (list the tools, call which tool with which arguments)
# through our CLI only: `mcp-supervisor tools --config F server` and
# `mcp-supervisor call --config F server TOOL JSON` (a fresh supervisor, so a
# fresh upstream session, per command). Every MCP message the mock server sees
# therefore comes from the supervisor's upstream client (crates/mcp-supervisor
# src/session and src/http), which is what the scenarios test.
#
# MCP_SUPERVISOR_BIN names the built `mcp-supervisor` (default: the debug
# build in this repository's target directory). Python 3 reads
# MCP_CONFORMANCE_CONTEXT. Exit status: that of the first command that failed
# and was expected to succeed (the suite reports it); calls that the scenario
# expects to be refused, or that a one-shot CLI cannot complete (it has no user
# to answer an elicitation), do not fail the script.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: MCP_CONFORMANCE_SCENARIO=NAME $0 SERVER_URL" >&2
    exit 2
fi
url=$1
scenario=${MCP_CONFORMANCE_SCENARIO:?MCP_CONFORMANCE_SCENARIO is not set}
root=$(cd "$(dirname "$0")/.." && pwd)
supervisor=${MCP_SUPERVISOR_BIN:-$root/target/debug/mcp-supervisor}
[[ -x "$supervisor" ]] || {
    echo "conformance-client: $supervisor is not an executable (set MCP_SUPERVISOR_BIN)" >&2
    exit 2
}

work=$(mktemp -d "${TMPDIR:-/tmp}/conformance-client.XXXXXX")
trap 'rm -rf "$work"' EXIT
config=$work/supervisor.toml
# The URL as a JSON string, which is also a valid TOML basic string.
printf '[connections.server]\ntransport = "http"\nurl = %s\n' \
    "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$url")" >"$config"

status=0
say() { echo "conformance-client[$scenario]: $*" >&2; }

# `list`: the tools of connection `server`, as our client sees them.
list() {
    say "tools"
    "$supervisor" tools --config "$config" server || status=$?
}

# `call TOOL JSON`: a call that must succeed.
call() {
    say "call $1 $2"
    "$supervisor" call --config "$config" server "$1" "$2" || status=$?
}

# `try_call TOOL JSON`: a call whose failure is part of the scenario (logged).
try_call() {
    say "call $1 $2 (may fail)"
    "$supervisor" call --config "$config" server "$1" "$2" ||
        say "call $1 exited with $? (expected to be possible here)"
}

case "$scenario" in
initialize | request-metadata | json-schema-ref-no-deref)
    # The handshake (initialize, or server/discover and per-request _meta),
    # and a tools/list; json-schema-ref-no-deref checks that listing a tool
    # whose inputSchema has a network `$ref` never fetches that URL.
    list
    ;;
tools_call)
    list
    call add_numbers '{"a": 5, "b": 3}'
    ;;
elicitation-sep1034-client-defaults)
    # The tool sends elicitation/create and checks the client accepts it with
    # the schema's defaults filled in; a one-shot CLI has nobody to answer it.
    # The call would wait for the server's own 60 s elicitation timeout: give
    # up sooner (the supervisor then cancels the call and ends the session).
    echo 'call_timeout = "5s"' >>"$config"
    list
    try_call test_client_elicitation_defaults '{}'
    ;;
sse-retry)
    # The server closes the call's SSE stream after a priming event carrying
    # `retry: 500`; the client must resume with GET + Last-Event-ID after at
    # least 500 ms, and gets the result on that stream.
    list
    call test_reconnection '{}'
    ;;
sep-2322-client-request-state)
    # Multi-round tool results (input_required with an elicitation input
    # request, with and without requestState), a plain call, and a result
    # without resultType (complete by default).
    list
    try_call test_mrtr_echo_state '{}'
    call test_mrtr_unrelated '{}'
    try_call test_mrtr_no_state '{}'
    call test_mrtr_no_result_type '{}'
    ;;
http-standard-headers)
    # Mcp-Method on every POST, Mcp-Name on tools/call (also for a name with a
    # hyphen). The CLI cannot read a resource or get a prompt, so those
    # methods' checks are SKIPPED.
    list
    call test_headers '{}'
    call my-hyphenated-tool '{}'
    ;;
http-custom-headers)
    # The context names the calls to make (tool and arguments); the client
    # must mirror the x-mcp-header parameters into Mcp-Param-* headers.
    list
    while IFS=$'\t' read -r tool arguments; do
        call "$tool" "$arguments"
    done < <(python3 -c '
import json, os
context = json.loads(os.environ["MCP_CONFORMANCE_CONTEXT"])
for call in context["toolCalls"]:
    print(call["name"] + "\t" + json.dumps(call["arguments"]))
')
    ;;
http-invalid-tool-headers)
    # The listing has one valid tool and eleven whose x-mcp-header
    # annotations are invalid: the client must call the valid one and refuse
    # to call the others, even when asked to by name.
    list
    call valid_tool '{"region": "us-west1"}'
    for tool in invalid_empty_header invalid_object_header invalid_array_header \
        invalid_null_header invalid_number_header invalid_duplicate_same_case \
        invalid_duplicate_diff_case invalid_space_in_name invalid_colon_in_name \
        invalid_non_ascii_name invalid_control_char_name; do
        if "$supervisor" call --config "$config" server "$tool" '{}' >/dev/null 2>&1; then
            say "call $tool succeeded: the client must refuse a tool with an invalid x-mcp-header"
            status=1
        fi
    done
    ;;
json-schema-2020-12-preservation)
    # The scenario wants the focal tool's inputSchema, as the client received
    # it, echoed back through json_schema_echo. `mcp-supervisor tools` prints
    # names and descriptions only, so the schema cannot be echoed: list only
    # (the echo checks fail; see tests/conformance/client-expected-failures.txt).
    list
    ;;
auth/*)
    # Authorization: the connection uses OAuth, with its tokens in this
    # run's own state directory. `login` discovers, registers (or uses the
    # pre-registered client the context names), and prints the
    # authorization URL; $BROWSER follows it (the suite's authorization
    # endpoint redirects at once) to login's loopback listener. Then the
    # tools are listed and, when the server has one, a tool called, with
    # the tokens from the file. A client credentials scenario needs no login.
    read -r client_id client_secret < <(python3 -c '
import json, os
context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
print(context.get("client_id") or "-", context.get("client_secret") or "-")
')
    # A published client metadata document's URL (the one the suite's
    # CIMD scenario expects); used only where the server supports them.
    keys=", client_metadata_url = \"https://conformance-test.local/client-metadata.json\""
    [[ $client_id != - ]] && keys+=", client_id = \"$client_id\""
    if [[ $client_secret != - ]]; then
        keys+=", client_secret_env = \"CONFORMANCE_CLIENT_SECRET\""
        export CONFORMANCE_CLIENT_SECRET=$client_secret
    fi
    # Machine to machine: the connection gets its own tokens, no login.
    machine=false
    if [[ $scenario == auth/client-credentials-basic ]]; then
        keys+=", grant = \"client_credentials\""
        machine=true
    fi
    { printf '[supervisor]\nstate_dir = "%s"\n' "$work/state"; cat "$config"
      printf 'auth = { kind = "oauth"%s }\n' "$keys"; } >"$work/oauth.toml"
    mv "$work/oauth.toml" "$config"
    login() {
        say "login"
        BROWSER="curl -sS -L -o /dev/null" "$supervisor" login --config "$config" server --timeout 30s
    }
    # `again COMMAND...`: runs it; when it says the connection needs a
    # login (the server wants more scopes, or its authorization server
    # changed), logs in again, as the operator would, and runs it again.
    again() {
        if "$@" 2>"$work/err"; then cat "$work/err" >&2; return 0; fi
        cat "$work/err" >&2
        grep -q "mcp-supervisor login server" "$work/err" || return 1
        login && "$@"
    }
    $machine || login || status=$?
    say "tools"
    again "$supervisor" tools --config "$config" server || status=$?
    say "call test-tool"
    again "$supervisor" call --config "$config" server test-tool '{}' || status=$?
    ;;
sep-2640-*)
    # The skills extension (SEP-2640): a host lists skills/list and reads
    # skill files on demand. Our client has no skills support; list only.
    list
    ;;
*)
    say "unknown scenario: only lists the tools"
    list
    ;;
esac
exit "$status"
