#!/bin/sh
# run-remote.sh - prompt turns over remote ACP, both profiles, in one run:
#   stdio      acp bench-client --no-read-block --read-spin-us 0 -- acp agent --echo --read-spin-us 0
#              (no network; the client waits in epoll as the remote ones do)
#   ours-ws    acp bench-client --url ws://...  <->  acp serve -- acp agent --echo
#              (acp serve hands the WebSocket to this build's acp agent by
#              default: the agent adopts it after the 101 and serve leaves
#              the data path, two processes per turn)
#   ours-ws-relay   the same against acp serve --no-handoff: serve relays
#              every byte between the socket and the agent's stdio (what
#              any other stdio agent gets)
#   ts-ws      the TS SDK 2.4 pair: bench/turns/ts_client.mjs --url ws://...
#              (experimental/ws-client) <-> tests/interop/sdk_agent.mjs
#              --serve --echo (experimental/server + experimental/node + ws)
#   ours-http  acp bench-client --url http://... --http  <->  acp serve (the
#              Streamable HTTP profile: POST per message, GET SSE streams)
#   ts-http    ts_client.mjs --url http://... --http (experimental/http-client)
#              <-> the same SDK server
#   ours-ws-inproc, ours-http-inproc   the same acp bench-client against
#              bench/remote_echo_serve: the echo agent hosted inside the
#              server process, as the SDK server hosts its agent (reported
#              beside the acp serve rows, which stay the issue's rows)
# at 5 B, 64 KiB and 1 MiB, reported as turns/s, MiB/s, p50, and ratios:
# ours / ts per profile (the comparison the issue asks for) and ours / stdio
# (what the network hop and the serve relay cost). Peak RSS (VmHWM) of each
# client, and of each server: acp serve alone and its agent process, vs. the
# SDK server's node process (its agent runs inside it). Every pair gets
# fresh servers, so each peak belongs to one profile and one payload.
# Not in CI; `make bench` runs it and bench/summary.mjs reads its lines.
#
# Usage: bench/run-remote.sh [--quick] [--out FILE]
# Environment: ACP_BIN (the acp program; a Release build is best);
# ACP_SERVE_ARGS (more acp serve options, e.g. --read-spin-us 50).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
out="$(dirname "$acp")/bench/remote.jsonl"
scale=1
while [ $# -gt 0 ]; do
  case "$1" in
  --quick) scale=5 ;;
  --out) out=$2; shift ;;
  *) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
  shift
done
[ -x "$acp" ] || { echo "run-remote: $acp not built" >&2; exit 1; }
"$root/tools/install-peers.sh" >/dev/null || { echo "run-remote: peers not installed" >&2; exit 1; }
inproc="$(dirname "$acp")/bench/remote_echo_serve"
[ -x "$inproc" ] || echo "run-remote: $inproc not built: no agent-in-process rows" >&2
mkdir -p "$(dirname "$out")"
: >"$out"
tmp=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$tmp"' EXIT

hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$1/status" 2>/dev/null || echo -1; }
# CPU time (user + system) of a live process in microseconds, or -1.
tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_us() {
  awk -v t="$tck" '{ sub(/^.*\) /, ""); printf "%d\n", ($12 + $13) * 1000000 / t }' \
    "/proc/$1/stat" 2>/dev/null || echo -1
}
# Appends the server's figures to the client's JSON line: peak RSS, and
# the CPU the server (and its agent process) spent on this client's turns.
addrss() { # FILE SERVER_KIB AGENT_KIB SERVER_CPU_US AGENT_CPU_US
  sed "s/}\$/,\"server_peak_rss_kib\":${2:--1},\"server_agent_peak_rss_kib\":${3:--1},\"server_cpu_us\":${4:--1},\"server_agent_cpu_us\":${5:--1}}/" "$1" >>"$out"
}

start_servers() {
  : >"$tmp/serve.log"
  : >"$tmp/sdk.out"
  # shellcheck disable=SC2086
  "$acp" serve --listen 127.0.0.1:0 --verbose ${ACP_SERVE_ARGS:-} -- "$acp" agent --echo 2>"$tmp/serve.log" &
  spid=$!; pids="$pids $spid"
  : >"$tmp/handoff.log"
  # shellcheck disable=SC2086
  "$acp" serve --listen 127.0.0.1:0 --verbose --no-handoff ${ACP_SERVE_ARGS:-} -- "$acp" agent --echo 2>"$tmp/handoff.log" &
  hpid=$!; pids="$pids $hpid"
  ipid="" iport=""
  if [ -x "$inproc" ]; then
    : >"$tmp/inproc.log"
    "$inproc" 2>"$tmp/inproc.log" &
    ipid=$!; pids="$pids $ipid"
  fi
  node "$root/tests/interop/sdk_agent.mjs" --serve --echo >"$tmp/sdk.out" 2>"$tmp/sdk.err" &
  npid=$!; pids="$pids $npid"
  sport="" nport="" hport=""
  for _ in $(seq 1 200); do
    sport=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$tmp/serve.log")
    hport=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$tmp/handoff.log")
    nport=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$tmp/sdk.out")
    [ -n "$ipid" ] && iport=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$tmp/inproc.log")
    [ -n "$sport" ] && [ -n "$nport" ] && [ -n "$hport" ] && { [ -z "$ipid" ] || [ -n "$iport" ]; } && break
    sleep 0.05
  done
}

stop_servers() {
  kill "$spid" "$hpid" "$npid" $ipid 2>/dev/null
  wait "$spid" "$hpid" "$npid" $ipid 2>/dev/null
}

# One profile at one payload: ours then theirs, on fresh servers.
run_profile() { # ws|http SIZE N_OURS N_TS
  prof=$1 size=$2 n_ours=$3 n_ts=$4
  if [ "$prof" = http ]; then scheme=http flag=--http; else scheme=ws flag=; fi
  start_servers
  c0=$(cpu_us "$spid")
  # shellcheck disable=SC2086
  "$acp" bench-client --impl "ours-$prof" --payload "$size" --turns "$n_ours" \
    --url "$scheme://127.0.0.1:$sport/acp" $flag >"$tmp/o.json" &
  cpid=$!
  # acp serve stops the agent when the client goes: its peak is sampled
  # while the turns run (the last reading is at most 0.1 s old).
  # The agent's CPU is its last reading (as its peak RSS).
  arss=-1 acpu=-1
  while kill -0 "$cpid" 2>/dev/null; do
    apid=$(sed -n 's/.*: agent pid \([0-9]*\)$/\1/p' "$tmp/serve.log" | tail -1)
    v=$(hwm "${apid:-0}")
    [ -n "$v" ] && [ "$v" -gt "$arss" ] 2>/dev/null && arss=$v
    v=$(cpu_us "${apid:-0}")
    [ -n "$v" ] && [ "$v" -ge 0 ] 2>/dev/null && acpu=$v
    sleep 0.1
  done
  wait "$cpid" || echo "{\"impl\":\"ours-$prof\",\"payload\":$size,\"failed\":true}" >"$tmp/o.json"
  c1=$(cpu_us "$spid")
  v=$(cpu_us "${apid:-0}") # still there while acp serve stops it
  [ -n "$v" ] && [ "$v" -gt "$acpu" ] 2>/dev/null && acpu=$v
  addrss "$tmp/o.json" "$(hwm "$spid")" "$arss" $((c1 - c0)) "$acpu"
  if [ "$prof" = ws ]; then
    # The relay: the same client and agent, every byte through serve.
    c0=$(cpu_us "$hpid")
    "$acp" bench-client --impl "ours-ws-relay" --payload "$size" --turns "$n_ours" \
      --url "ws://127.0.0.1:$hport/acp" >"$tmp/h.json" &
    cpid=$!
    arss=-1 acpu=-1
    while kill -0 "$cpid" 2>/dev/null; do
      apid=$(sed -n 's/.*: agent pid \([0-9]*\)$/\1/p' "$tmp/handoff.log" | tail -1)
      v=$(hwm "${apid:-0}")
      [ -n "$v" ] && [ "$v" -gt "$arss" ] 2>/dev/null && arss=$v
      v=$(cpu_us "${apid:-0}")
      [ -n "$v" ] && [ "$v" -ge 0 ] 2>/dev/null && acpu=$v
      sleep 0.1
    done
    wait "$cpid" || echo "{\"impl\":\"ours-ws-relay\",\"payload\":$size,\"failed\":true}" >"$tmp/h.json"
    c1=$(cpu_us "$hpid")
    addrss "$tmp/h.json" "$(hwm "$hpid")" "$arss" $((c1 - c0)) "$acpu"
  fi
  if [ -n "$iport" ]; then
    # The agent in process: the same client, the server is the agent.
    c0=$(cpu_us "$ipid")
    # shellcheck disable=SC2086
    "$acp" bench-client --impl "ours-$prof-inproc" --payload "$size" --turns "$n_ours" \
      --url "$scheme://127.0.0.1:$iport/acp" $flag >"$tmp/i.json" ||
      echo "{\"impl\":\"ours-$prof-inproc\",\"payload\":$size,\"failed\":true}" >"$tmp/i.json"
    c1=$(cpu_us "$ipid")
    addrss "$tmp/i.json" "$(hwm "$ipid")" 0 $((c1 - c0)) -1
  fi
  c0=$(cpu_us "$npid")
  # shellcheck disable=SC2086
  node "$root/bench/turns/ts_client.mjs" --impl "ts-$prof" --payload "$size" --turns "$n_ts" \
    --url "$scheme://127.0.0.1:$nport/acp" $flag >"$tmp/t.json" ||
    echo "{\"impl\":\"ts-$prof\",\"payload\":$size,\"failed\":true}" >"$tmp/t.json"
  c1=$(cpu_us "$npid")
  addrss "$tmp/t.json" "$(hwm "$npid")" 0 $((c1 - c0)) -1
  stop_servers
}

run_payload() { # SIZE N_OURS N_TS
  # The stdio turn waits for the agent in epoll (--no-read-block), as the
  # remote clients do, and neither side spins before sleeping (the remote
  # client cannot): ours/stdio is then what the network hop and serve
  # cost, not also how the client waits.
  "$acp" bench-client --impl stdio --no-read-block --read-spin-us 0 --payload "$1" --turns "$2" \
    -- "$acp" agent --echo --read-spin-us 0 >>"$out" || echo "{\"impl\":\"stdio\",\"payload\":$1,\"failed\":true}" >>"$out"
  run_profile ws "$@"
  run_profile http "$@"
}

run_payload 5 $((20000 / scale)) $((2000 / scale))
run_payload 65536 $((2000 / scale)) $((300 / scale))
run_payload 1048576 $((200 / scale)) $((40 / scale))

python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r.get('payload'), {})[r['impl']] = r
def size(p): return {5: '5 B', 65536: '64 KiB', 1048576: '1 MiB'}.get(p, str(p))
mib = lambda k: k / 1024 if k is not None and k >= 0 else float('nan')
def per_turn(r, k):
    v = r.get(k, -1)
    return f"{v / r['turns']:.0f}" if v is not None and v >= 0 and r.get('turns') else '-'
print('| payload | profile | stdio turns/s | ours turns/s | ts turns/s | ours/ts | ours/stdio '
      '| p50 µs stdio/ours/ts | RSS MiB server ours (serve+agent) / ts | RSS MiB client ours / ts '
      '| CPU µs/turn ours client/serve/agent, ts server |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for p in sorted(k for k in by if k is not None):
    d = by[p]
    for prof in ('ws', 'http', 'ws-inproc', 'http-inproc'):
        s, o, t = d.get('stdio'), d.get('ours-' + prof), d.get('ts-' + prof.split('-')[0])
        if o is None and prof.endswith('inproc'):
            continue
        if not (s and o and t) or any(x.get('failed') for x in (s, o, t)):
            print(f'| {size(p)} | {prof} | failed: '
                  f'{[k for k, v in d.items() if v.get("failed")] or "missing rows"} |')
            continue
        unit = 'mibps' if p >= 65536 else 'rtps'
        print(f"| {size(p)} | {prof} | {s['rtps']:.0f} | {o['rtps']:.0f} | {t['rtps']:.0f} | "
              f"{o[unit]/t[unit]:.1f}x | {o[unit]/s[unit]:.2f}x | "
              f"{s['p50_us']:.0f}/{o['p50_us']:.0f}/{t['p50_us']:.0f} | "
              f"{mib(o['server_peak_rss_kib']):.1f}+{mib(o['server_agent_peak_rss_kib']):.1f} / "
              f"{mib(t['server_peak_rss_kib']):.1f} | "
              f"{mib(o['client_peak_rss_kib']):.1f} / {mib(t['client_peak_rss_kib']):.1f} | "
              f"{per_turn(o, 'client_cpu_us')}/{per_turn(o, 'server_cpu_us')}/"
              f"{per_turn(o, 'server_agent_cpu_us')}, {per_turn(t, 'server_cpu_us')} |")
PY
