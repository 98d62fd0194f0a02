#!/bin/sh
# MCP 2026-07-28 stateless HTTP benchmark: `tools/call echo
# {"message":"hello"}` POSTed without a session (bench/mcp26_wrk.lua: the
# version in _meta, MCP-Protocol-Version / Mcp-Method / Mcp-Name headers)
# by wrk, 64 connections for 30 s, against:
#   ours      acp mcp serve --http (one process)
#   workers2  acp mcp serve --http --workers 2 (SO_REUSEPORT)
#   nginx2    nginx (examples/deploy/nginx.conf, rewritten into a temp
#             dir) in front of two `acp mcp serve --http --worker-id`
#             (skipped without nginx)
#   theirs    a server built with @modelcontextprotocol/server 2.4.0
#             (tests/interop/mcp_sdk2_server.mjs http: createMcpHandler
#             behind node:http, the same echo tool; the package is pinned
#             in tests/interop/package.json and installed by `make peers`
#             into build/peers/acp, the pin the interop tests use)
# Each: requests/s, wrk's p50/p99, errors, and the peak RSS (VmHWM) of
# every process of that server summed (supervisor and workers; nginx's
# master and workers plus ours), read after wrk. Then the ratios
# ours/theirs (rate and RSS) and workers2/ours, nginx2/ours; and where the
# time went: CPU seconds of each server program and of wrk during the run
# ("cpu_s" in the JSON line; per request in the printed summary).
# One run each, in that order, on whatever else the machine is doing:
# numbers from a shared machine are indicative only.
#
# Usage: bench/run-mcp-2026.sh [--quick] [--duration S] [--conns N]
#                              [--threads N] [--only LIST] [--out FILE]
# --quick: 4 s runs. --only: comma-separated impls (default all).
# Env: ACP_BIN (default build-release/acp), ACP_PEERS_DIR (default
#      build/peers/acp).
# Exit 0, 1 if a run failed or answered wrong, 77 if a prerequisite is
# missing (node, curl, wrk, the acp program). Servers listen on 127.0.0.1
# and are stopped by pid.
set -eu
SCRIPT=run-mcp-2026
here=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$here/.." && pwd)

duration=30
conns=64
threads=2
only=ours,workers2,nginx2,theirs
out="$ROOT/build/bench/mcp-2026.jsonl"
while [ $# -gt 0 ]; do
    case $1 in
    --quick) duration=4 ;;
    --duration) duration=$2; shift ;;
    --conns) conns=$2; shift ;;
    --threads) threads=$2; shift ;;
    --only) only=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "$SCRIPT: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
case $duration$conns$threads in *[!0-9]*) echo "$SCRIPT: --duration/--conns/--threads need a number" >&2; exit 2 ;; esac

skip() { echo "$SCRIPT: SKIPPED: $*"; exit 77; }
say() { echo "$SCRIPT: $*"; }
want() { case ",$only," in *",$1,"*) return 0 ;; esac; return 1; }

ACP=${ACP_BIN:-$ROOT/build-release/acp}
case $ACP in /*) ;; *) ACP=$(cd "$(dirname "$ACP")" && pwd)/$(basename "$ACP") ;; esac
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v wrk >/dev/null 2>&1 || skip "wrk is not installed (Debian: apt-get install wrk)"
[ -x "$ACP" ] || skip "$ACP is not built (set ACP_BIN)"
PEERS=${ACP_PEERS_DIR:-$ROOT/build/peers/acp}
SDK2="$ROOT/tests/interop/mcp_sdk2_server.mjs"
if want theirs; then
    command -v node >/dev/null 2>&1 || skip "node is not installed"
    [ -f "$PEERS/node_modules/@modelcontextprotocol/server/package.json" ] ||
        skip "@modelcontextprotocol/server is not installed in $PEERS (make peers)"
fi
NGINX=$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true)

work=$(mktemp -d "${TMPDIR:-/tmp}/acp-bench-mcp26.XXXXXX")
chmod 755 "$work" # nginx's workers (nobody, when run as root) read it
started=""
stop_all() {
    for p in $started; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $started; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    started=""
}
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();})'
}
# PID and all its descendants.
tree() {
    echo "$1"
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do tree "$c"; done
}
# Sum of VmHWM (KiB) over the trees of the given pids.
hwm_sum() {
    t=0
    for root in "$@"; do
        for p in $(tree "$root"); do
            v=$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
            t=$((t + ${v:-0}))
        done
    done
    echo $t
}
# CPU seconds (user + system) used so far by the trees of the given pids,
# by program name: "name=seconds name=seconds ..." (nginx master and
# workers add up under nginx, our supervisor and workers under acp-mcp).
cpu_by_comm() {
    for root in "$@"; do
        for p in $(tree "$root"); do
            n=$(tr ' ' _ <"/proc/$p/comm" 2>/dev/null) || continue
            # After "pid (comm) state ": ppid is field 1, utime 11, stime 12.
            sed 's/^.*) [A-Za-z] //' "/proc/$p/stat" 2>/dev/null |
                awk -v n="$n" '{ print n, $11 + $12 }' || true
        done
    done | awk -v hz="$(getconf CLK_TCK)" '{ t[$1] += $2 } END { for (k in t) printf "%s=%.2f ", k, t[k] / hz }'
}
# Children's CPU seconds of this shell so far (wrk, once it has exited):
# `times` must run in this shell, not in a $(...) subshell, so it writes
# to FILE and this reads it.
kids_cpu() {
    awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } printf "%.2f", s }' "$1"
}
BODY='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
check() { # PORT: one call answers 200 with the echo
    c=$(curl -s --max-time 5 -o "$work/b" -w '%{http_code}' \
        -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' \
        -H 'Mcp-Name: echo' --data-binary "$BODY" "http://127.0.0.1:$1/mcp" 2>/dev/null) || c=000
    [ "$c" = 200 ] && grep -q hello "$work/b"
}
wait_ready() { # PORT: until check passes (about 10 s), while our servers live
    i=0
    until check "$1"; do
        i=$((i + 1))
        [ $i -gt 100 ] && return 1
        for p in $started; do kill -0 "$p" 2>/dev/null || return 1; done
        sleep 0.1
    done
}

results="$work/results.jsonl"
: >"$results"
failed=0

# run IMPL PORT: wrk against 127.0.0.1:PORT, then record with $started's RSS.
run() {
    impl=$1; port=$2
    if ! wait_ready "$port"; then
        say "$impl: not ready (or wrong answer)"; cat "$work"/*.log 2>/dev/null | tail -5
        stop_all; failed=1; return
    fi
    say "$impl: wrk -t$threads -c$conns -d${duration}s"
    cpu0=$(cpu_by_comm $started)
    times >"$work/times0"
    timeout $((duration + 60)) wrk -t"$threads" -c"$conns" -d"${duration}s" \
        -s "$here/mcp26_wrk.lua" "http://127.0.0.1:$port/mcp" >"$work/wrk-$impl.log" 2>&1 || true
    rss=$(hwm_sum $started)
    cpu1=$(cpu_by_comm $started)
    times >"$work/times1"
    k0=$(kids_cpu "$work/times0"); k1=$(kids_cpu "$work/times1")
    # Where the time went during the run: each server program's CPU
    # seconds, and wrk's (the load generator shares the same two cores).
    cpu=$(printf '%s\n%s\n' "$cpu0" "$cpu1" | awk -v w="$k0 $k1" '
        NR == 1 { for (i = 1; i <= NF; i++) { split($i, a, "="); b[a[1]] = a[2] } }
        NR == 2 { for (i = 1; i <= NF; i++) { split($i, a, "="); printf "\"%s\":%.2f,", a[1], a[2] - b[a[1]] } }
        END { split(w, k, " "); printf "\"wrk\":%.2f", k[2] - k[1] }')
    alive=1
    for p in $started; do kill -0 "$p" 2>/dev/null || alive=0; done
    stop_all
    line=$(sed -n 's/^WRK_JSON //p' "$work/wrk-$impl.log")
    if [ -z "$line" ] || [ $alive = 0 ]; then
        say "$impl FAILED (servers alive: $alive)"; tail -5 "$work/wrk-$impl.log"; failed=1; return
    fi
    echo "$line" | sed "s/^{/{\"transport\":\"http_2026\",\"impl\":\"$impl\",\"conns\":$conns,\"server_peak_rss_kib\":$rss,\"cpu_s\":{$cpu},/" >>"$results"
}

if want ours; then
    port=$(free_port)
    "$ACP" mcp serve --http "127.0.0.1:$port" 2>"$work/ours.log" &
    started=$!
    run ours "$port"
fi
if want workers2; then
    port=$(free_port)
    "$ACP" mcp serve --http "127.0.0.1:$port" --workers 2 2>"$work/workers2.log" &
    started=$!
    run workers2 "$port"
fi
if want nginx2; then
    if [ -z "$NGINX" ]; then
        say "nginx2: skipped (nginx is not installed)"
    else
        p1=$(free_port); p2=$(free_port); port=$(free_port)
        "$ACP" mcp serve --http "127.0.0.1:$p1" --worker-id w1 2>"$work/w1.log" &
        started=$!
        "$ACP" mcp serve --http "127.0.0.1:$p2" --worker-id w2 2>"$work/w2.log" &
        started="$started $!"
        sed -e "s/127\.0\.0\.1:8101/127.0.0.1:$p1/g" \
            -e "s/127\.0\.0\.1:8102/127.0.0.1:$p2/g" \
            -e "s/127\.0\.0\.1:8100/127.0.0.1:$port/" \
            -e "s|^http {|http {\\
    access_log off;\\
    client_body_temp_path $work/client_body;\\
    proxy_temp_path $work/proxy;\\
    fastcgi_temp_path $work/fastcgi;\\
    uwsgi_temp_path $work/uwsgi;\\
    scgi_temp_path $work/scgi;|" \
            "$ROOT/examples/deploy/nginx.conf" >"$work/nginx.conf"
        "$NGINX" -p "$work" -c "$work/nginx.conf" \
            -g "daemon off; pid $work/nginx.pid; error_log $work/nginx-error.log;" \
            2>"$work/nginx.log" &
        started="$started $!"
        if wait_ready "$p1" && wait_ready "$p2"; then
            run nginx2 "$port"
        else
            say "nginx2: the workers did not start"; stop_all; failed=1
        fi
    fi
fi
if want theirs; then
    port=$(free_port)
    ACP_PEERS_DIR="$PEERS" node "$SDK2" http "$port" 2>"$work/theirs.log" >/dev/null &
    started=$!
    run theirs "$port"
fi

mkdir -p "$(dirname "$out")"
cat "$results" >>"$out"
node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
const get = i => lines.find(l => l.impl === i);
const f = (x, d = 0) => x == null ? "n/a" : Number(x).toFixed(d);
console.log("\nimpl       req/s     p50 us    p99 us   peak RSS MiB (all processes)   errors c/r/w/status/timeout");
for (const l of lines)
  console.log(`${l.impl.padEnd(9)} ${f(l.rps).padStart(7)} ${f(l.p50_us).padStart(9)} ${f(l.p99_us).padStart(9)} ${f(l.server_peak_rss_kib / 1024, 1).padStart(14)}                  ${l.err_connect}/${l.err_read}/${l.err_write}/${l.err_status}/${l.err_timeout}`);
const o = get("ours"), s = get("theirs"), w = get("workers2"), n = get("nginx2");
if (o && s) console.log(`ours/theirs: rate ${(o.rps / s.rps).toFixed(1)}x, peak RSS ${(o.server_peak_rss_kib / s.server_peak_rss_kib).toFixed(3)}x (theirs/ours ${(s.server_peak_rss_kib / o.server_peak_rss_kib).toFixed(1)}x)`);
if (o && w) console.log(`workers2/ours: rate ${(w.rps / o.rps).toFixed(2)}x`);
if (o && n) console.log(`nginx2/ours: rate ${(n.rps / o.rps).toFixed(2)}x`);
// Where the time went: CPU seconds per program during each run, and per
// 1,000 requests (two cores: at most 2 x the duration in all).
for (const l of lines) if (l.cpu_s) {
  const parts = Object.entries(l.cpu_s).sort((a, b) => b[1] - a[1]);
  console.log(`cpu ${l.impl}: ` + parts.map(([k, v]) => `${k} ${v.toFixed(1)} s (${(v * 1e6 / l.requests).toFixed(0)} us/req)`).join(", "));
}
// Ours must answer everything; errors of the peer are reported, not fatal.
const bad = lines.some(l => l.impl !== "theirs" && (l.err_status || l.err_timeout));
if (bad) console.log("errors: a run of ours had non-2xx answers or timeouts");
if (s && (s.err_status || s.err_timeout)) console.log(`theirs: ${s.err_status} non-2xx, ${s.err_timeout} timeouts (wrk: 2 s)`);
process.exit(bad ? 1 : 0);
' "$results" || failed=1
exit $failed
