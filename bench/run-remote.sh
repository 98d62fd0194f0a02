#!/bin/sh
# run-remote.sh - prompt turns over WebSocket (remote ACP), in one run:
#   stdio     acp bench-client -- acp agent --echo           (no network)
#   ours-ws   acp bench-client --url  <->  acp serve -- acp agent --echo
#   ts-ws     the TS SDK pair: bench/turns/ts_client.mjs --url (the SDK's
#             experimental/ws-client) <-> tests/interop/sdk_agent.mjs
#             --serve --echo (experimental/server + experimental/node + ws)
# at 5 B, 64 KiB and 1 MiB, reported as turns/s, MiB/s, p50, and ratios:
# ours-ws / ts-ws (the comparison the issue asks for) and ours-ws / stdio
# (what the network hop and the serve relay cost). Peak RSS: acp serve plus
# its agent process vs. the SDK server's node process. Not in CI.
#
# Usage: bench/run-remote.sh [--quick] [--out FILE]
# Environment: ACP_BIN (the acp program; a Release build is best).
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
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
  shift
done
[ -x "$acp" ] || { echo "run-remote: $acp not built" >&2; exit 1; }
"$root/tools/install-peers.sh" >/dev/null || { echo "run-remote: peers not installed" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
: >"$out"
tmp=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$tmp"' EXIT

hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$1/status" 2>/dev/null || echo -1; }

# Fresh servers per payload, so each peak RSS belongs to that payload.
run_payload() {
  size=$1 n_ours=$2 n_ts=$3
  "$acp" serve --listen 127.0.0.1:0 --verbose -- "$acp" agent --echo 2>"$tmp/serve.log" &
  spid=$!; pids="$pids $spid"
  node "$root/tests/interop/sdk_agent.mjs" --serve --echo >"$tmp/sdk.out" 2>"$tmp/sdk.err" &
  npid=$!; pids="$pids $npid"
  sport="" nport=""
  for _ in $(seq 1 200); do
    sport=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$tmp/serve.log")
    nport=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$tmp/sdk.out")
    [ -n "$sport" ] && [ -n "$nport" ] && break
    sleep 0.05
  done
  "$acp" bench-client --impl stdio --payload "$size" --turns "$n_ours" \
    -- "$acp" agent --echo >>"$out" || echo '{"impl":"stdio","failed":true}' >>"$out"
  "$acp" bench-client --impl ours-ws --payload "$size" --turns "$n_ours" \
    --url "ws://127.0.0.1:$sport/acp" >"$tmp/o.json" || echo '{"impl":"ours-ws","failed":true}' >"$tmp/o.json"
  apid=$(sed -n 's/.*agent pid //p' "$tmp/serve.log" | tail -1)
  srss=$(hwm "$spid") arss=$(hwm "${apid:-0}")
  sed "s/}\$/,\"server_peak_rss_kib\":$srss,\"server_agent_peak_rss_kib\":$arss}/" "$tmp/o.json" >>"$out"
  node "$root/bench/turns/ts_client.mjs" --impl ts-ws --payload "$size" --turns "$n_ts" \
    --url "ws://127.0.0.1:$nport/acp" >"$tmp/t.json" || echo '{"impl":"ts-ws","failed":true}' >"$tmp/t.json"
  nrss=$(hwm "$npid")
  sed "s/}\$/,\"server_peak_rss_kib\":$nrss,\"server_agent_peak_rss_kib\":0}/" "$tmp/t.json" >>"$out"
  kill "$spid" "$npid" 2>/dev/null
  wait "$spid" "$npid" 2>/dev/null
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
print('| payload | stdio turns/s | ours-ws turns/s | ts-ws turns/s | ours-ws/ts-ws | ours-ws/stdio | p50 µs stdio/ours-ws/ts-ws | server RSS MiB ours (serve+agent) / ts |')
print('|---|---|---|---|---|---|---|---|')
for p in sorted(k for k in by if k is not None):
    d = by[p]; s, o, t = d.get('stdio'), d.get('ours-ws'), d.get('ts-ws')
    if not (s and o and t) or any(x.get('failed') for x in (s, o, t)):
        print(f'| {size(p)} | failed: {sorted(d)} |'); continue
    ors = (o['server_peak_rss_kib'] + o['server_agent_peak_rss_kib']) / 1024
    trs = t['server_peak_rss_kib'] / 1024
    unit = 'mibps' if p >= 65536 else 'rtps'
    print(f"| {size(p)} | {s['rtps']:.0f} | {o['rtps']:.0f} | {t['rtps']:.0f} | "
          f"{o[unit]/t[unit]:.1f}x | {o[unit]/s[unit]:.2f}x | "
          f"{s['p50_us']:.0f}/{o['p50_us']:.0f}/{t['p50_us']:.0f} | {ors:.1f} / {trs:.1f} |")
PY
