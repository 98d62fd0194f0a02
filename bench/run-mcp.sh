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
#          lines without parsing them (what the pipes alone cost), run in
#          rounds alternating with ours (--rounds, default 5); the ratio
#          ours/floor is the median of the rounds' ratios.
#   stdio pipelined  the same calls with 64 in flight (--inflight): each
#          answer sends the next call. Ours and the null server in
#          alternating rounds of ten times the calls (20,000 pipelined
#          calls are over in 30 ms), theirs once; reported as rate ratios
#          ours/theirs (target >= 10) and ours/floor (median of rounds).
#   http   Streamable HTTP: one session (initialize + initialized with
#          curl), then wrk with 64 connections for 30 s POSTing tools/call
#          with the session headers (bench/mcp_wrk.lua): requests/s, wrk's
#          median and p99 latency, errors, the server's VmHWM afterwards.
#          Also the floor: bench/http_floor (one epoll loop, keep-alive,
#          answers every request with the bytes our server answered to
#          tools/call), the same wrk run, alternating with ours for
#          --http-rounds rounds (default 3); median ratio ours/floor.
#
# Usage: bench/run-mcp.sh [--quick] [--calls N] [--duration S] [--conns N]
#                         [--threads N] [--rounds N] [--http-rounds N]
#                         [--inflight K] [--only ours|theirs] [--out FILE]
# --quick: 2000 calls, 5 s wrk runs, 3 stdio rounds, 1 HTTP round.
# The floors run with ours (not with --only theirs), when they are built.
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
inflight=64
threads=2
rounds=5
http_rounds=3
only=both
out="$ROOT/build/bench/mcp.jsonl"
while [ $# -gt 0 ]; do
    case $1 in
    --quick) calls=2000; warmup=100; duration=5; rounds=3; http_rounds=1 ;;
    --rounds) rounds=$2; shift ;;
    --http-rounds) http_rounds=$2; shift ;;
    --calls) calls=$2; shift ;;
    --duration) duration=$2; shift ;;
    --conns) conns=$2; shift ;;
    --inflight) inflight=$2; shift ;;
    --threads) threads=$2; shift ;;
    --only) only=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "$SCRIPT: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

case $rounds$http_rounds in *[!0-9]*) echo "$SCRIPT: --rounds/--http-rounds need a number" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] && [ "$http_rounds" -ge 1 ] || { echo "$SCRIPT: rounds must be at least 1" >&2; exit 2; }

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
round=0
k=1
tr=stdio
run_stdio() { # IMPL CMD... (tagged with $round; 0 = not in rounds; $k in flight)
    impl=$1; shift
    say "$tr $impl: $calls calls ($warmup warm-up), $k in flight"
    if timeout 600 "$BENCH" --calls "$calls" --warmup "$warmup" --inflight "$k" --impl "$impl" -- "$@" \
        >"$work/stdio-$impl.json" 2>"$work/stdio-$impl.err"; then
        sed "s/^{/{\"transport\":\"$tr\",\"round\":$round,/" "$work/stdio-$impl.json" >>"$results"
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
    # The floor answers with the very bytes our server answered.
    [ "$impl" = ours ] && [ ! -s "$work/answer" ] && cp "$work/b" "$work/answer"
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
    echo "$line" | sed "s/^{/{\"transport\":\"http\",\"impl\":\"$impl\",\"round\":$round,\"conns\":$conns,\"server_peak_rss_kib\":${rss:-null},/" >>"$results"
}
# The HTTP floor (bench/http_floor.c): no session, the same wrk run.
run_http_floor() {
    impl=floor
    [ -s "$work/answer" ] || { say "http floor: no answer of ours to serve; skipped"; return; }
    "$HTTPFLOOR" --port "$port" --body "$work/answer" >"$work/http-floor.log" 2>&1 &
    server_pid=$!
    if ! wait_port "$port" "$server_pid"; then
        say "http floor: did not start"; tail -5 "$work/http-floor.log"
        stop_pid "$server_pid"; server_pid=""; failed=1; return
    fi
    say "http floor: wrk -t$threads -c$conns -d${duration}s ($(wc -c <"$work/answer") byte body)"
    MCP_SID=none MCP_PV=none timeout $((duration + 60)) \
        wrk -t"$threads" -c"$conns" -d"${duration}s" -s "$here/mcp_wrk.lua" \
        "http://127.0.0.1:$port/mcp" >"$work/wrk-floor.log" 2>&1 || true
    rss=$(hwm "$server_pid")
    stop_pid "$server_pid"; server_pid=""
    line=$(sed -n 's/^WRK_JSON //p' "$work/wrk-floor.log")
    if [ -z "$line" ]; then
        say "http floor FAILED"; tail -5 "$work/wrk-floor.log"; failed=1; return
    fi
    echo "$line" | sed "s/^{/{\"transport\":\"http\",\"impl\":\"floor\",\"round\":$round,\"conns\":$conns,\"server_peak_rss_kib\":${rss:-null},/" >>"$results"
}

# The floors: answers without parsing, blocking I/O (bench/mcp_null_server.c);
# a minimal HTTP/1.1 responder (bench/http_floor.c). Ours and the floor
# alternate, round after round, so that both see the same moments of a
# shared machine.
NULLSRV=$(dirname "$BENCH")/mcp_null_server
HTTPFLOOR=$(dirname "$BENCH")/http_floor
[ -x "$NULLSRV" ] || say "no $NULLSRV: stdio floor skipped"
[ -x "$HTTPFLOOR" ] || say "no $HTTPFLOOR: HTTP floor skipped"
# Ours and the floor in alternating rounds ($rounds).
stdio_rounds() {
    round=1
    while [ "$round" -le "$rounds" ]; do
        run_stdio ours "$ACP" mcp serve --everything
        # Without the read spin (on by default, 20 us, backed off while it
        # misses): what it buys and costs. Sequential calls only (with 64
        # in flight the next request is always there).
        [ "$k" -eq 1 ] && run_stdio nospin "$ACP" mcp serve --everything --read-spin-us 0
        [ -x "$NULLSRV" ] && run_stdio floor "$NULLSRV"
        round=$((round + 1))
    done
    round=0
}
if [ "$only" != theirs ]; then stdio_rounds; fi
if [ "$only" != ours ]; then run_stdio theirs node "$SE" stdio; fi
# Pipelined: $inflight calls in flight; ours and the floor in rounds of ten
# times the calls (one run of 20,000 is over in 30 ms: a moment of the
# machine, not a rate).
k=$inflight
tr=stdio_pipelined
if [ "$only" != theirs ]; then
    seq_calls=$calls
    calls=$((calls * 10))
    stdio_rounds
    calls=$seq_calls
fi
if [ "$only" != ours ]; then run_stdio theirs node "$SE" stdio; fi
k=1
tr=stdio
if [ "$only" != theirs ]; then
    round=1
    while [ "$round" -le "$http_rounds" ]; do
        port=$(free_port)
        run_http ours "$ACP" mcp serve --everything --http "127.0.0.1:$port"
        if [ -x "$HTTPFLOOR" ]; then
            port=$(free_port)
            run_http_floor
        fi
        round=$((round + 1))
    done
    round=0
fi
if [ "$only" != ours ]; then
    port=$(free_port)
    run_http theirs env PORT="$port" node --require "$PRELOAD" "$SE" streamableHttp
fi

mkdir -p "$(dirname "$out")"
cat "$results" >>"$out"
node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
const rate = l => l.transport === "http" ? l.rps : l.rtps;
// The lower middle of the numbers (as run-mcp-bridge.sh).
const median = xs => { const v = xs.filter(Number.isFinite).sort((a, b) => a - b); return v.length ? v[Math.floor((v.length - 1) / 2)] : undefined; };
// The run of IMPL with the median rate (ours and the floor may run in rounds).
const get = (t, i) => { const v = lines.filter(l => l.transport === t && l.impl === i).sort((a, b) => rate(a) - rate(b)); return v[Math.floor((v.length - 1) / 2)]; };
const mib = k => k == null ? "n/a" : (k / 1024).toFixed(1);
const f = (x, d = 0) => x == null ? "n/a" : Number(x).toFixed(d);
console.log("\ntransport impl    round   rt/s or req/s   p50 us   p99 us   server peak RSS MiB   notes");
for (const l of lines) {
  const notes = l.transport !== "http" ? `${l.calls} calls, ${l.inflight || 1} in flight` :
    `${l.requests} requests, ${l.conns} conns, errors connect/read/write/status/timeout ${l.err_connect}/${l.err_read}/${l.err_write}/${l.err_status}/${l.err_timeout}`;
  console.log(`${l.transport.padEnd(9)} ${l.impl.padEnd(7)} ${String(l.round || "-").padStart(5)} ${f(rate(l)).padStart(15)} ${f(l.p50_us, 1).padStart(8)} ${f(l.p99_us, 1).padStart(8)} ${mib(l.server_peak_rss_kib).padStart(21)}   ${notes}`);
}
let bad = 0;
for (const t of ["stdio", "stdio_pipelined", "http"]) {
  const o = get(t, "ours"), s = get(t, "theirs");
  if (o && (t === "http") && (o.err_status || o.err_timeout)) bad = 1;
  if (!o || !s) continue;
  const r = rate(o) / rate(s);
  const m = o.server_peak_rss_kib / s.server_peak_rss_kib;
  console.log(`${t}: ours/theirs rate ${r.toFixed(2)}x (target >= 10: ${r >= 10 ? "met" : "NOT met"}), ` +
    `p50 ${(o.p50_us / s.p50_us).toFixed(2)}, p99 ${(o.p99_us / s.p99_us).toFixed(2)}, ` +
    `peak RSS ${m.toFixed(3)} (target < 0.1: ${m < 0.1 ? "met" : "NOT met"})`);
}
// Ours against the floor, round by round (the floor ran right after ours).
for (const [t, target, what] of [["stdio", 0.9, "mcp_null_server, blocking pipes, no parsing"], ["stdio_pipelined", null, "mcp_null_server, 64 in flight"], ["http", 0.5, "http_floor, one epoll loop, fixed answer"]]) {
  const pairs = lines.filter(l => l.transport === t && l.impl === "ours" && l.round)
    .map(o => [o, lines.find(l => l.transport === t && l.impl === "floor" && l.round === o.round)]).filter(([, fl]) => fl);
  if (pairs.length === 0) continue;
  const rr = pairs.map(([o, fl]) => rate(o) / rate(fl));
  const q = median(rr), p50 = median(pairs.map(([o, fl]) => o.p50_us / fl.p50_us));
  const fl = get(t, "floor"), s = get(t, "theirs");
  console.log(`${t} floor (${what}): ${f(rate(fl))} ${t === "http" ? "req/s" : "rt/s"}, p50 ${f(fl.p50_us, 1)} us, peak RSS ${mib(fl.server_peak_rss_kib)} MiB (median run)` +
    (s ? `; floor/theirs ${(rate(fl) / rate(s)).toFixed(2)}x` + (t === "stdio" ? ", the most any server can reach over these pipes" : "") : ""));
  console.log(`${t}: ours/floor rate ${q.toFixed(2)}x (median of ${pairs.length} alternating rounds: ${rr.map(x => x.toFixed(2)).join(" ")}` +
    (target === null ? "" : `; target >= ${target}: ${q >= target ? "met" : "NOT met"}`) + `), p50 ${p50.toFixed(2)}`);
}
// Without the read spin, against the floor of the same round.
{
  const pairs = lines.filter(l => l.transport === "stdio" && l.impl === "nospin" && l.round)
    .map(o => [o, lines.find(l => l.transport === "stdio" && l.impl === "floor" && l.round === o.round)]).filter(([, fl]) => fl);
  if (pairs.length)
    console.log(`stdio without the read spin (--read-spin-us 0): ours/floor rate ${median(pairs.map(([o, fl]) => rate(o) / rate(fl))).toFixed(2)}x (median of ${pairs.length} rounds)`);
}
process.exit(bad);
' "$results" || failed=1
say "results appended to $out"
exit $failed
