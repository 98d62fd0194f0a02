#!/bin/sh
# MCP server benchmark: `acp mcp serve --everything` (ours) against the
# reference @modelcontextprotocol/server-everything (theirs, pinned in
# tests/interop/mcp/package.json), same machine, one run, one workload:
# `tools/call echo {"message":"hello"}`.
#
#   stdio  sequential round trips by bench_mcp_stdio (our MCP client, the
#          same program for both servers): rt/s, median and p99 latency,
#          the server's peak RSS (VmHWM, read before its stdin is closed).
#          Also the floor: bench/mcp_null_server, which answers the same
#          lines without parsing them (what the pipes alone cost).
#   http   Streamable HTTP: one session (initialize + initialized with
#          curl), then wrk with 64 connections for 30 s POSTing tools/call
#          with the session headers (bench/mcp_wrk.lua): requests/s, wrk's
#          median and p99 latency, errors, the server's VmHWM afterwards.
#
# Usage: bench/run-mcp.sh [--quick] [--calls N] [--duration S] [--conns N]
#                         [--threads N] [--only ours|theirs] [--out FILE]
# Env:   ACP_BIN (default build-release/acp), ACP_BENCH_MCP_STDIO (default
#        bench/bench_mcp_stdio beside ACP_BIN's build).
# Servers listen on 127.0.0.1 only (server-everything through the
# tests/interop/mcp/listen_loopback.cjs preload) and are stopped by pid.
# Exit 0, 1 if a run failed or answered wrong, 77 if a prerequisite is
# missing (node, curl, wrk, the acp program).
set -eu
SCRIPT=run-mcp
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/.." && pwd)

calls=20000
warmup=500
duration=30
conns=64
threads=2
only=both
out="$ROOT/build/bench/mcp.jsonl"
while [ $# -gt 0 ]; do
    case $1 in
    --quick) calls=2000; warmup=100; duration=5 ;;
    --calls) calls=$2; shift ;;
    --duration) duration=$2; shift ;;
    --conns) conns=$2; shift ;;
    --threads) threads=$2; shift ;;
    --only) only=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "$SCRIPT: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

skip() { echo "$SCRIPT: SKIPPED: $*"; exit 77; }
say() { echo "$SCRIPT: $*"; }

ACP=${ACP_BIN:-$ROOT/build-release/acp}
case $ACP in /*) ;; *) ACP=$(cd "$(dirname "$ACP")" && pwd)/$(basename "$ACP") ;; esac
BENCH=${ACP_BENCH_MCP_STDIO:-$(dirname "$ACP")/bench/bench_mcp_stdio}
command -v node >/dev/null 2>&1 || skip "node is not installed"
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v wrk >/dev/null 2>&1 || skip "wrk is not installed (Debian: apt-get install wrk)"
if [ "$only" != theirs ]; then
    [ -x "$ACP" ] || skip "$ACP is not built (set ACP_BIN)"
fi
[ -x "$BENCH" ] || skip "$BENCH is not built (cmake --build ... --target bench_mcp_stdio)"

PEERS="${ACP_PEERS_ROOT:-$ROOT/build/peers}"
SE="$PEERS/mcp/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [ "$only" != ours ] && [ ! -f "$SE" ]; then
    "$ROOT/tools/install-mcp-peers.sh" interop >/dev/null 2>&1 || skip "cannot install the MCP peers"
    [ -f "$SE" ] || skip "server-everything is not installed ($SE)"
fi
PRELOAD="$ROOT/tests/interop/mcp/listen_loopback.cjs"

work=$(mktemp -d "${TMPDIR:-/tmp}/acp-bench-mcp.XXXXXX")
server_pid=""
stop_pid() {
    [ -n "${1:-}" ] || return 0
    kill -0 "$1" 2>/dev/null || return 0
    kill -TERM "$1" 2>/dev/null || true
    i=0
    while kill -0 "$1" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
cleanup() { stop_pid "$server_pid"; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

free_port() {
    node -e '
        const s = require("net").createServer();
        s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}
wait_port() { # PORT PID: until 127.0.0.1:PORT accepts, while PID lives (10 s)
    node -e '
        const net = require("net"); const [port, pid] = process.argv.slice(1).map(Number);
        const end = Date.now() + 10000;
        (function tryit() {
            try { process.kill(pid, 0); } catch (e) { process.exit(2); }
            const c = net.connect(port, "127.0.0.1");
            c.on("connect", () => { c.destroy(); process.exit(0); });
            c.on("error", () => { if (Date.now() > end) process.exit(1); setTimeout(tryit, 50); });
        })();' "$1" "$2"
}
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }

results="$work/results.jsonl"
: >"$results"
failed=0

# ---- stdio --------------------------------------------------------------
run_stdio() { # IMPL CMD...
    impl=$1; shift
    say "stdio $impl: $calls calls ($warmup warm-up)"
    if timeout 600 "$BENCH" --calls "$calls" --warmup "$warmup" --impl "$impl" -- "$@" \
        >"$work/stdio-$impl.json" 2>"$work/stdio-$impl.err"; then
        sed 's/^{/{"transport":"stdio",/' "$work/stdio-$impl.json" >>"$results"
    else
        say "stdio $impl FAILED"; sed 's/^/  /' "$work/stdio-$impl.err" | tail -5
        failed=1
    fi
}

# ---- Streamable HTTP ----------------------------------------------------
post() { # PORT BODY [EXTRA CURL ARGS...]: POST to /mcp, headers in $work/h
    p=$1; b=$2; shift 2
    curl -sS --max-time 10 -D "$work/h" -o "$work/b" -w '%{http_code}' \
        -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' "$@" \
        --data-binary "$b" "http://127.0.0.1:$p/mcp"
}
run_http() { # IMPL CMD... (the command listens on $port)
    impl=$1; shift
    "$@" >"$work/http-$impl.log" 2>&1 &
    server_pid=$!
    if ! wait_port "$port" "$server_pid"; then
        say "http $impl: the server did not start"; tail -5 "$work/http-$impl.log"
        stop_pid "$server_pid"; server_pid=""; failed=1; return
    fi
    st=$(post "$port" '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"run-mcp","version":"1"}}}') || st=000
    sid=$(tr -d '\r' <"$work/h" | awk 'tolower($1) == "mcp-session-id:" {print $2}')
    pv=$(grep -o '"protocolVersion":"[^"]*"' "$work/b" | head -n 1 | cut -d'"' -f4)
    if [ "$st" != 200 ] || [ -z "$sid" ] || [ -z "$pv" ]; then
        say "http $impl: initialize failed (status $st)"; cat "$work/b"; echo
        stop_pid "$server_pid"; server_pid=""; failed=1; return
    fi
    st=$(post "$port" '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        -H "Mcp-Session-Id: $sid" -H "Mcp-Protocol-Version: $pv") || st=000
    st2=$(post "$port" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}' \
        -H "Mcp-Session-Id: $sid" -H "Mcp-Protocol-Version: $pv") || st2=000
    if [ "$st" != 202 ] || [ "$st2" != 200 ] || ! grep -q 'hello' "$work/b"; then
        say "http $impl: session check failed (initialized $st, tools/call $st2)"; cat "$work/b"; echo
        stop_pid "$server_pid"; server_pid=""; failed=1; return
    fi
    say "http $impl: wrk -t$threads -c$conns -d${duration}s (protocol $pv)"
    MCP_SID=$sid MCP_PV=$pv timeout $((duration + 60)) \
        wrk -t"$threads" -c"$conns" -d"${duration}s" -s "$here/mcp_wrk.lua" \
        "http://127.0.0.1:$port/mcp" >"$work/wrk-$impl.log" 2>&1 || true
    rss=$(hwm "$server_pid")
    alive=1; kill -0 "$server_pid" 2>/dev/null || alive=0
    stop_pid "$server_pid"; server_pid=""
    line=$(sed -n 's/^WRK_JSON //p' "$work/wrk-$impl.log")
    if [ -z "$line" ] || [ $alive = 0 ]; then
        say "http $impl FAILED (server alive: $alive)"; tail -5 "$work/wrk-$impl.log"; failed=1; return
    fi
    echo "$line" | sed "s/^{/{\"transport\":\"http\",\"impl\":\"$impl\",\"conns\":$conns,\"server_peak_rss_kib\":${rss:-null},/" >>"$results"
}

if [ "$only" != theirs ]; then run_stdio ours "$ACP" mcp serve --everything; fi
if [ "$only" != ours ]; then run_stdio theirs node "$SE" stdio; fi
# The floor: answers without parsing, blocking I/O (bench/mcp_null_server.c).
NULLSRV=$(dirname "$BENCH")/mcp_null_server
if [ "$only" = both ] && [ -x "$NULLSRV" ]; then run_stdio floor "$NULLSRV"; fi
if [ "$only" != theirs ]; then
    port=$(free_port)
    run_http ours "$ACP" mcp serve --everything --http "127.0.0.1:$port"
fi
if [ "$only" != ours ]; then
    port=$(free_port)
    run_http theirs env PORT="$port" node --require "$PRELOAD" "$SE" streamableHttp
fi

mkdir -p "$(dirname "$out")"
cat "$results" >>"$out"
node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
const get = (t, i) => lines.find(l => l.transport === t && l.impl === i);
const mib = k => k == null ? "n/a" : (k / 1024).toFixed(1);
const f = (x, d = 0) => x == null ? "n/a" : Number(x).toFixed(d);
console.log("\ntransport impl    rt/s or req/s   p50 us   p99 us   server peak RSS MiB   notes");
for (const l of lines) {
  const rate = l.transport === "stdio" ? l.rtps : l.rps;
  const notes = l.transport === "stdio" ? `${l.calls} sequential calls` :
    `${l.requests} requests, ${l.conns} conns, errors connect/read/write/status/timeout ${l.err_connect}/${l.err_read}/${l.err_write}/${l.err_status}/${l.err_timeout}`;
  console.log(`${l.transport.padEnd(9)} ${l.impl.padEnd(7)} ${f(rate).padStart(13)} ${f(l.p50_us, 1).padStart(8)} ${f(l.p99_us, 1).padStart(8)} ${mib(l.server_peak_rss_kib).padStart(21)}   ${notes}`);
}
let bad = 0;
for (const t of ["stdio", "http"]) {
  const o = get(t, "ours"), s = get(t, "theirs");
  if (!o || !s) continue;
  const r = t === "stdio" ? o.rtps / s.rtps : o.rps / s.rps;
  const m = o.server_peak_rss_kib / s.server_peak_rss_kib;
  console.log(`${t}: ours/theirs rate ${r.toFixed(2)}x (target >= 10: ${r >= 10 ? "met" : "NOT met"}), ` +
    `p50 ${(o.p50_us / s.p50_us).toFixed(2)}, p99 ${(o.p99_us / s.p99_us).toFixed(2)}, ` +
    `peak RSS ${m.toFixed(3)} (target < 0.1: ${m < 0.1 ? "met" : "NOT met"})`);
  if (t === "http" && (o.err_status || o.err_timeout)) bad = 1;
}
const fl = get("stdio", "floor"), so = get("stdio", "ours"), st = get("stdio", "theirs");
if (fl && so && st)
  console.log(`stdio floor (a server that answers without parsing): ${(fl.rtps / st.rtps).toFixed(2)}x theirs, ` +
    `the most any server can reach over these pipes; ours is at ${(100 * so.rtps / fl.rtps).toFixed(0)}% of it`);
process.exit(bad);
' "$results" || failed=1
say "results appended to $out"
exit $failed
