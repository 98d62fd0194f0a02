#!/bin/sh
# The MCP conformance suite's SERVER mode against `acp mcp serve
# --everything` over Streamable HTTP on 127.0.0.1:
#   1. @modelcontextprotocol/conformance 0.1.16, --suite all;
#   2. 0.2.0-alpha.12, --requirements 2025-11-25 (every scored check);
#   3. 0.2.0-alpha.12, --requirements 2026-07-28 (the stateless revision:
#      per-request _meta, no session; its not-scored extension and pending
#      scenarios run and are reported; of those the tasks-* extension
#      scenarios and json-schema-2020-12 must pass as well).
# All with tests/conformance/expected-failures-server.yml. Runs on Node 22
# (installed by tools/install-mcp-peers.sh). Exit 0 when every run passes,
# 1 on a failure, 77 (skipped, reason printed) when a prerequisite is
# missing: node/npm, the pinned peers, the acp program or its `mcp serve`.
#
# Environment: ACP_BIN (the acp program), ACP_CONFORMANCE_OUT (results
# directory; default a temporary one, removed unless a run failed).
set -eu
SCRIPT=run-server-suite
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

find_acp || skip "the acp program is not built (set ACP_BIN)"
"$ACP" mcp serve --help >/dev/null 2>&1 || skip "acp has no 'mcp serve' command yet"
need_node22
install_mcp_peers conformance

out="${ACP_CONFORMANCE_OUT:-}"
keep=0
if [ -z "$out" ]; then out=$(mktemp -d "${TMPDIR:-/tmp}/acp-conf-server.XXXXXX"); else keep=1; mkdir -p "$out"; fi
server_pid=""
cleanup() { stop_pid "$server_pid"; }
trap cleanup EXIT INT TERM

# Start the server on a free port (retry if someone took it meanwhile).
tries=0
while :; do
    port=$(free_port)
    "$ACP" mcp serve --everything --http "127.0.0.1:$port" >"$out/server.log" 2>&1 &
    server_pid=$!
    if wait_port "$port" "$server_pid"; then break; fi
    stop_pid "$server_pid"; server_pid=""
    tries=$((tries + 1))
    [ $tries -lt 3 ] || { cat "$out/server.log"; die "acp mcp serve --http did not start"; }
done
url="http://127.0.0.1:$port/mcp"
say "server pid $server_pid at $url"

ef="$conf_here/expected-failures-server.yml"
rc=0
run() { # label version args...
    label=$1; ver=$2; shift 2
    say "== $label"
    set +e
    PATH="$NODE22_BIN:$PATH" "$NODE22_BIN/node" "$CONF/conformance-$ver/dist/index.js" \
        server --url "$url" --expected-failures "$ef" -o "$out/$label" "$@" \
        >"$out/$label.log" 2>&1
    r=$?
    set -e
    tail -n 15 "$out/$label.log"
    "$NODE22_BIN/node" "$conf_here/summarize.mjs" "$label" "$out/$label" |
        tee "$out/$label.summary"
    if [ $r -ne 0 ]; then say "$label: conformance exit status $r"; rc=1; fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$out/server.log"; die "the server died during $label"; }
}
run server-0.1.16 0.1.16 --suite all
run server-0.2.0-alpha.12-req-2025-11-25 0.2.0-alpha.12 --requirements 2025-11-25
run server-0.2.0-alpha.12-req-2026-07-28 0.2.0-alpha.12 --requirements 2026-07-28
# The not-scored scenarios we implement must pass too: the tasks extension
# (tasks-status-notifications is skipped by the suite, "pending") and
# json-schema-2020-12. They must also have run.
sum26="$out/server-0.2.0-alpha.12-req-2026-07-28.summary"
if grep -E 'FAIL (tasks-|json-schema-2020-12)' "$sum26"; then
    say "a tasks-* or json-schema-2020-12 scenario failed"; rc=1
fi
for sc in tasks-lifecycle tasks-capability-negotiation tasks-wire-fields \
    tasks-request-state-removal tasks-mrtr-input tasks-request-headers \
    tasks-dispatch-and-envelope tasks-required-task-error \
    tasks-mrtr-composition json-schema-2020-12; do
    grep -q "PASS $sc \[" "$sum26" || { say "scenario $sc did not pass"; rc=1; }
done

stop_pid "$server_pid"; server_pid=""
if [ $rc -ne 0 ]; then
    say "results kept in $out"
    exit 1
fi
[ $keep -eq 1 ] || rm -rf "$out"
say "ok"
