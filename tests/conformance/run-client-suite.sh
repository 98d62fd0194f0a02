#!/bin/sh
# The MCP conformance suite's CLIENT mode against conformance_client (our
# MCP client over our HTTP transport):
#   1. @modelcontextprotocol/conformance 0.1.16, --suite all;
#   2. 0.2.0-alpha.12, --requirements 2025-11-25;
#   3. 0.2.0-alpha.12, --requirements 2026-07-28 (the client stateless).
# The first two with tests/conformance/expected-failures-client.yml, the
# third with expected-failures-client-2026.yml (the extension auth scenarios
# that run there and fail). The suite's mock servers listen on
# every interface, so everything runs inside a private network namespace
# with only loopback up (`unshare -n`). Exit 0 when every run passes, 1 on a
# failure, 77 (skipped, reason printed) when a prerequisite is missing:
# node/npm, the pinned peers, Node 22, unshare -n / ip, or the
# conformance_client program (built once the HTTP client exists).
#
# Environment: ACP_CONFORMANCE_CLIENT (the program; ctest sets it),
# ACP_CONFORMANCE_OUT (results directory; default a temporary one, removed
# unless a run failed).
set -eu
SCRIPT=run-client-suite
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

if [ "${1:-}" != "--inside-netns" ]; then
    client="${ACP_CONFORMANCE_CLIENT:-}"
    if [ -z "$client" ]; then
        for d in "${ACP_BUILD_DIR:-}" "$ROOT/build"; do
            [ -n "$d" ] && [ -x "$d/tests/conformance/conformance_client" ] &&
                { client="$d/tests/conformance/conformance_client"; break; }
        done
    fi
    [ -n "$client" ] && [ -x "$client" ] ||
        skip "conformance_client is not built (it needs the HTTP client transport, src/http)"
    command -v unshare >/dev/null 2>&1 || skip "unshare is not installed (util-linux)"
    command -v ip >/dev/null 2>&1 || skip "ip is not installed (iproute2)"
    unshare -n true 2>/dev/null || skip "cannot create a network namespace (unshare -n needs root or user namespaces)"
    need_node22
    install_mcp_peers conformance
    out="${ACP_CONFORMANCE_OUT:-}"
    keep=0
    if [ -z "$out" ]; then out=$(mktemp -d "${TMPDIR:-/tmp}/acp-conf-client.XXXXXX"); else keep=1; mkdir -p "$out"; fi
    set +e
    ACP_CONFORMANCE_CLIENT="$client" ACP_CONFORMANCE_OUT="$out" \
        unshare -n sh "$0" --inside-netns
    rc=$?
    set -e
    if [ $rc -ne 0 ]; then say "results kept in $out"; exit $rc; fi
    [ $keep -eq 1 ] || rm -rf "$out"
    say "ok"
    exit 0
fi

# Inside the namespace: only loopback, brought up here.
ip link set lo up || die "cannot bring loopback up in the namespace"
client=$ACP_CONFORMANCE_CLIENT
out=$ACP_CONFORMANCE_OUT
ef="$conf_here/expected-failures-client.yml"
rc=0
run() { # label version args...
    label=$1; ver=$2; shift 2
    say "== $label"
    set +e
    PATH="$NODE22_BIN:$PATH" "$NODE22_BIN/node" "$CONF/conformance-$ver/dist/index.js" \
        client --command "$client" --expected-failures "$ef" -o "$out/$label" "$@" \
        >"$out/$label.log" 2>&1
    r=$?
    set -e
    tail -n 40 "$out/$label.log"
    "$NODE22_BIN/node" "$conf_here/summarize.mjs" "$label" "$out/$label"
    if [ $r -ne 0 ] && "$NODE22_BIN/node" "$conf_here/only-retry-timing.mjs" "$out/$label" "$ef"; then
        say "$label: conformance exit status $r from sse-retry's timing warning alone (see only-retry-timing.mjs): accepted"
        r=0
    fi
    if [ $r -ne 0 ]; then say "$label: conformance exit status $r"; rc=1; fi
}
run client-0.1.16 0.1.16 --suite all
run client-0.2.0-alpha.12-req-2025-11-25 0.2.0-alpha.12 --requirements 2025-11-25

# --- 2026-07-28 (stateless client) ------------------------------------------
# Its own expected failures (expected-failures-client-2026.yml: the
# extension auth scenarios of this revision).
ef="$conf_here/expected-failures-client-2026.yml"
run client-0.2.0-alpha.12-req-2026-07-28 0.2.0-alpha.12 --requirements 2026-07-28
exit $rc
