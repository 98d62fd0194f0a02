#!/bin/sh
# run-mcp-sdk2-server.sh - our MCP client (`acp mcp tools|call|read|get`)
# against two third-party servers with the same command lines, the
# protocol revision chosen by the client's server/discover probe:
#   - mcp_sdk2_server.mjs, an MCP TypeScript SDK 2.4 server
#     (@modelcontextprotocol/server 2.4.0, tests/interop/package.json):
#     spoken at 2026-07-28 (stateless) over stdio and over its Streamable
#     HTTP handler on 127.0.0.1. Checked from the server's own log: no
#     initialize, every request carries the 2026 _meta, over HTTP the
#     Mcp-Method / Mcp-Name headers match the body and no MCP-Session-Id
#     is sent. `--protocol 2025-11-25` forces its legacy leg instead.
#   - the reference server-everything (tests/interop/mcp/package.json),
#     which does not know server/discover: the client falls back to
#     initialize and speaks 2025-11-25, over stdio and Streamable HTTP;
#     over stdio its trigger-sampling-request and get-roots-list tools get
#     our client's --sample-reply and --root answers.
# `--json` output ends with the negotiated "protocolVersion", which is
# what each case checks besides the result. Servers are stopped by pid.
# Exit 0 when all passed, 1 on a failure, 77 (reason printed) when a
# prerequisite is missing (node, the pinned peers, the acp program).
set -eu
SCRIPT=run-mcp-sdk2-server
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/tests/conformance/lib.sh"

find_acp || skip "the acp program is not built (set ACP_BIN)"
command -v node >/dev/null 2>&1 || skip "node is not installed"
"$root/tools/install-peers.sh" >/dev/null 2>&1 ||
    skip "the pinned peers could not be installed (tools/install-peers.sh)"
peers=${ACP_PEERS_DIR:-$root/build/peers/acp}
[ -f "$peers/node_modules/@modelcontextprotocol/server/package.json" ] ||
    skip "@modelcontextprotocol/server is not installed in $peers"
install_mcp_peers interop
SE="$MCP_INTEROP/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$SE" ] || skip "server-everything is not installed ($SE)"
SDK2="$here/mcp_sdk2_server.mjs"

work=$(mktemp -d "${TMPDIR:-/tmp}/acp-mcp-sdk2.XXXXXX")
pids=""
cleanup() { for p in $pids; do stop_pid "$p"; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM

pass=0
fail=0
ok() { pass=$((pass + 1)); say "ok   $*"; }
bad() { fail=$((fail + 1)); say "FAIL $*"; }

# expect NAME NEEDLE... -- CMD...: CMD exits 0 and its stdout has every
# NEEDLE (fixed strings).
expect() {
    name=$1; shift
    n=0
    while [ "$1" != "--" ]; do
        n=$((n + 1)); eval "needle_$n=\$1"; shift
    done
    shift
    out="$work/out.$pass.$fail"
    if ! timeout 60 "$@" >"$out" 2>"$out.err"; then
        say "stdout:"; cat "$out"; say "stderr:"; cat "$out.err"
        bad "$name (exit status)"; return
    fi
    i=1
    while [ $i -le $n ]; do
        eval "needle=\$needle_$i"
        if ! grep -qF -- "$needle" "$out"; then
            say "stdout:"; cat "$out"; say "stderr:"; cat "$out.err"
            bad "$name (no '$needle')"; return
        fi
        i=$((i + 1))
    done
    ok "$name"
}

# suite LABEL VERSION TARGET-ARGS...: the four verbs with one command line
# shape; TARGET-ARGS is "--url URL" or "--stdio CMD ARGS..." (the "--" that
# ends a stdio command before NAME is added here). The server-specific
# names come from $TOOL_NAME, $TOOL_ARGS, $URI, $PROMPT_ARGS, the expected
# texts from $CALL_TEXT, $READ_TEXT, $GET_TEXT.
suite() {
    label=$1; version=$2; shift 2
    pv="\"protocolVersion\":\"$version\"}"
    sep=""
    [ "$1" = "--stdio" ] && sep="--"
    expect "tools ($label)" "\"name\":\"$TOOL_NAME\"" "$pv" -- "$ACP" mcp tools --json "$@"
    # shellcheck disable=SC2086 # $sep, $TOOL_ARGS, $PROMPT_ARGS: word lists
    expect "call ($label)" "$CALL_TEXT" "$pv" -- "$ACP" mcp call --json "$@" $sep $TOOL_ARGS
    # shellcheck disable=SC2086
    expect "read ($label)" "$READ_TEXT" "$pv" -- "$ACP" mcp read --json "$@" $sep "$URI"
    # shellcheck disable=SC2086
    expect "get ($label)" "$GET_TEXT" "$pv" -- "$ACP" mcp get --json "$@" $sep $PROMPT_ARGS
}

# ---- the SDK 2.4 server at 2026-07-28 ----------------------------------
TOOL_NAME=add TOOL_ARGS="add a=2 b=40" CALL_TEXT='"structuredContent":{"sum":42}'
URI=test://hello READ_TEXT='hello from sdk2'
PROMPT_ARGS="greet name=Ann" GET_TEXT='Please greet Ann.'
export SDK2_LOG="$work/sdk2-stdio.log"
suite "sdk2 stdio" 2026-07-28 --stdio node "$SDK2" stdio
if grep -q '^initialize' "$SDK2_LOG"; then bad "sdk2 stdio: initialize was sent"; else ok "sdk2 stdio: no initialize"; fi
if grep -v '^notifications/' "$SDK2_LOG" | grep -vq 'meta=2026-07-28'; then
    cat "$SDK2_LOG"; bad "sdk2 stdio: a request without the 2026 _meta"
else
    ok "sdk2 stdio: every request carries the 2026 _meta"
fi

port=$(free_port)
export SDK2_LOG="$work/sdk2-http.log"
node "$SDK2" http "$port" >"$work/sdk2-http.out" 2>&1 &
sdk2_pid=$!
pids="$pids $sdk2_pid"
if wait_port "$port" "$sdk2_pid"; then
    suite "sdk2 http" 2026-07-28 --url "http://127.0.0.1:$port/mcp"
    if grep -q '^initialize' "$SDK2_LOG"; then bad "sdk2 http: initialize was sent"; else ok "sdk2 http: no initialize"; fi
    if grep -q 'session=[^-]' "$SDK2_LOG"; then bad "sdk2 http: a session id was sent"; else ok "sdk2 http: no MCP-Session-Id"; fi
    if grep -qx 'tools/call meta=2026-07-28 mcp-method=tools/call mcp-name=add session=-' "$SDK2_LOG" &&
        grep -qx 'resources/read meta=2026-07-28 mcp-method=resources/read mcp-name=test://hello session=-' "$SDK2_LOG" &&
        grep -qx 'prompts/get meta=2026-07-28 mcp-method=prompts/get mcp-name=greet session=-' "$SDK2_LOG" &&
        grep -qx 'tools/list meta=2026-07-28 mcp-method=tools/list mcp-name=- session=-' "$SDK2_LOG"; then
        ok "sdk2 http: Mcp-Method / Mcp-Name headers"
    else
        cat "$SDK2_LOG"; bad "sdk2 http: Mcp-Method / Mcp-Name headers"
    fi
    # Forced to a stateful revision: the SDK's legacy leg answers it.
    expect "sdk2 http --protocol 2025-11-25" '"structuredContent":{"sum":3}' \
        '"protocolVersion":"2025-11-25"}' -- \
        "$ACP" mcp call --json --protocol 2025-11-25 --url "http://127.0.0.1:$port/mcp" add a=1 b=2
    stop_pid "$sdk2_pid"
else
    cat "$work/sdk2-http.out"; bad "the SDK 2.4 server did not start"
fi
unset SDK2_LOG

# ---- server-everything at 2025-11-25 (no server/discover) ---------------
TOOL_NAME=echo TOOL_ARGS="echo message=hi-everything" CALL_TEXT='hi-everything'
URI=demo://resource/dynamic/text/1 READ_TEXT='Resource 1'
PROMPT_ARGS="simple-prompt" GET_TEXT='This is a simple prompt without arguments.'
suite "everything stdio" 2025-11-25 --stdio node "$SE" stdio
# Its sampling and roots tools exist only for a client declaring the
# capability: our answers (--sample-reply, --root) reach it as real
# sampling/createMessage and roots/list requests.
mkdir -p "$work/root one"
rdir=$(cd "$work/root one" && pwd -P)
expect "everything stdio: sampling answered (--sample-reply)" \
    'sampled-by-acp' '"model": "acp-mcp-call"' \
    '"stopReason": "endTurn"' -- \
    "$ACP" mcp call --sample-reply sampled-by-acp --stdio node "$SE" stdio -- \
    trigger-sampling-request prompt=hi
expect "everything stdio: roots answered (--root)" \
    "URI: file://$(echo "$rdir" | sed 's/ /%20/g')" '1. root one' -- \
    "$ACP" mcp call --root "$work/root one" --stdio node "$SE" stdio -- \
    get-roots-list
if "$ACP" mcp tools --stdio node "$SE" stdio </dev/null >"$work/se-tools" 2>&1 &&
    ! grep -q 'trigger-sampling-request\|get-roots-list' "$work/se-tools"; then
    ok "everything stdio: no sampling or roots declared without the options"
else
    cat "$work/se-tools"; bad "everything stdio: capabilities declared without the options"
fi

port=$(free_port)
env PORT="$port" node --require "$here/mcp/listen_loopback.cjs" "$SE" streamableHttp >"$work/se.out" 2>&1 &
se_pid=$!
pids="$pids $se_pid"
if wait_port "$port" "$se_pid"; then
    suite "everything http" 2025-11-25 --url "http://127.0.0.1:$port/mcp"
    stop_pid "$se_pid"
else
    cat "$work/se.out"; bad "server-everything did not start"
fi

say "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
