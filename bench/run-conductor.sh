#!/bin/sh
# run-conductor.sh - what `acp conductor` costs, against the physical floor.
#
# The foundation workload (`acp bench-client --payload S --turns N -- AGENT`,
# AGENT = `acp agent --echo`) over five paths, for payloads 5 B and 1 MiB:
#   direct     client <-> agent
#   cond+0     client <-> conductor <-> agent                  (1 hop)
#   relay x1   client <-> relay <-> agent                      (1 hop)
#   cond+3     client <-> conductor <-> 3 pass-through proxies (SDK, no
#              callbacks: bench_pass_proxy) <-> agent  (7 hops: 4 conductor
#              passes + 3 proxies)
#   relay x7   client <-> 7 chained raw line relays <-> agent  (7 hops)
#   emb+0      as cond+0 with the conductor embedded in a minimal program
#              (bench_conductor: acp_conductor_run() linked with libacp-uv
#              only), to show its own footprint: the `acp` program also
#              carries every other command's code (it maps no HTTP, TLS,
#              HTTP/2 or line-editor library: acp-mcp and acp-remote hold
#              those, docs/decisions.md)
# A relay (bench/relay.c) copies whole lines between pipes without parsing.
# Reports round trips/s, median/p99, the latency each hop adds ((p50 of the
# path - p50 direct) / hops), MiB/s, the conductor's peak RSS under load
# (VmHWM, read by bench-client: the conductor is its child) and at rest
# (VmRSS after initialize + session/new), then checks the issue's targets:
#   hop latency <= 2x a relay hop; 1 MiB MiB/s >= 1/2 the relay path's;
#   RSS < 4 MiB at rest; < 3 x 1 MiB + 4 MiB under load.
#
# Usage: bench/run-conductor.sh [--quick] [--turns N] [--turns-1m N]
#                               [--out FILE]
# Environment: ACP_BIN (the acp program; a Release build), BENCH_BIN_DIR
# (where bench_pass_proxy is; default: the bench/ directory next to ACP_BIN).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
acp=${ACP_BIN:-$root/build-release/acp}
bdir=${BENCH_BIN_DIR:-$(dirname "$acp")/bench}
turns=5000
turns_1m=200
out="$(dirname "$acp")/bench/conductor.jsonl"
while [ $# -gt 0 ]; do
  case "$1" in
  --quick) turns=500 turns_1m=30 ;;
  --turns) turns=$2; shift ;;
  --turns-1m) turns_1m=$2; shift ;;
  --out) out=$2; shift ;;
  *) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
  shift
done
[ -x "$acp" ] || { echo "run-conductor: $acp not built" >&2; exit 1; }
pass="$bdir/bench_pass_proxy"
[ -x "$pass" ] && [ -x "$bdir/bench_conductor" ] ||
  { echo "run-conductor: $bdir/bench_pass_proxy or bench_conductor not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
relay="$tmp/relay"
cc -O2 -o "$relay" "$here/relay.c" || exit 1
mkdir -p "$(dirname "$out")"
: >"$out"
status=0
# Both ends without the read spin (on by default in acp agent and acp
# bench-client): with it the direct path's two processes never sleep,
# which no path with a hop between them can do, and the hops' share
# ((p50 of the path - p50 direct) / hops) would count the lost spin as the
# hops' cost. What is measured is the conductor against a relay.
agent="$acp agent --echo --read-spin-us 0"

echo "run-conductor: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for p in 5 1048576; do
  n=$turns
  [ "$p" -ge 1048576 ] && n=$turns_1m
  for path in direct cond0 relay1 cond3 relay7 emb0; do
    case $path in
    direct) set -- $agent ;;
    cond0) set -- "$acp" conductor agent --quiet-stderr "$agent" ;;
    relay1) set -- "$relay" $agent ;;
    cond3) set -- "$acp" conductor agent --quiet-stderr "$pass" "$pass" \
             "$pass" "$agent" ;;
    relay7) set -- "$relay" "$relay" "$relay" "$relay" "$relay" "$relay" \
              "$relay" $agent ;;
    emb0) set -- "$bdir/bench_conductor" agent "$agent" ;;
    esac
    echo "run-conductor: $path payload $p, $n turns" >&2
    if line=$("$acp" bench-client --impl "$path" --read-spin-us 0 --payload "$p" \
              --turns "$n" -- "$@"); then
      echo "$line" >>"$out"
    else
      echo "run-conductor: $path FAILED at payload $p" >&2
      status=1
    fi
  done
done

# The conductor at rest: initialize + session/new, then its resident set.
rest_rss() { # COMMAND... -> "VmRSS RssAnon" in KiB
  # Removed first: the job below truncates it only once it runs, and the
  # wait must not see the previous call's "ready".
  rm -f "$tmp/hold"
  python3 "$root/tests/conductor/drive.py" hold -- "$@" >"$tmp/hold" 2>/dev/null &
  dpid=$!
  i=0
  while [ $i -lt 100 ] && ! grep -q "^ready" "$tmp/hold"; do sleep 0.1; i=$((i + 1)); done
  sleep 0.5
  cpid=$(sed -n 's/^ready //p' "$tmp/hold")
  awk '/^VmRSS:/ {r=$2} /^RssAnon:/ {a=$2} END {print r+0, a+0}' "/proc/$cpid/status" 2>/dev/null
  kill $dpid 2>/dev/null
  wait $dpid 2>/dev/null
}
set -- $(rest_rss "$acp" conductor agent --quiet-stderr "$agent")
r1=${1:-0} a1=${2:-0}
set -- $(rest_rss "$bdir/bench_conductor" agent "$agent")
r2=${1:-0} a2=${2:-0}
echo "{\"impl\":\"rest\",\"cli_rss_kib\":$r1,\"cli_anon_kib\":$a1,\"emb_rss_kib\":$r2,\"emb_anon_kib\":$a2}" >>"$out"

python3 - "$out" <<'EOF' || status=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rest = [r for r in rows if r["impl"] == "rest"][0]
runs = {(r["impl"], r["payload"]): r for r in rows if r["impl"] != "rest"}
hops = {"direct": 0, "cond0": 1, "relay1": 1, "cond3": 7, "relay7": 7,
        "emb0": 1}
print("%-8s %8s %6s %9s %9s %9s %9s %11s %9s" % (
    "path", "payload", "hops", "rt/s", "p50 us", "p99 us", "MiB/s",
    "us/hop(p50)", "RSS MiB"))
fails = []
for p in (5, 1048576):
    d = runs.get(("direct", p))
    for impl in ("direct", "cond0", "relay1", "cond3", "relay7", "emb0"):
        r = runs.get((impl, p))
        if r is None:
            continue
        per = "" if not hops[impl] or d is None else "%.1f" % (
            (r["p50_us"] - d["p50_us"]) / hops[impl])
        rss = r["agent_peak_rss_kib"] / 1024.0 \
            if impl.startswith(("cond", "emb")) else None
        print("%-8s %8d %6d %9.0f %9.1f %9.1f %9.2f %11s %9s" % (
            impl, p, hops[impl], r["rtps"], r["p50_us"], r["p99_us"],
            r["mibps"], per, "%.2f" % rss if rss is not None else ""))
print("conductor RSS at rest: acp conductor %.2f MiB (%.2f MiB private), "
      "embedded %.2f MiB (%.2f MiB private)" % (
          rest["cli_rss_kib"] / 1024.0, rest["cli_anon_kib"] / 1024.0,
          rest["emb_rss_kib"] / 1024.0, rest["emb_anon_kib"] / 1024.0))

def check(name, ok, detail):
    print("%s %s: %s" % ("PASS" if ok else "MISS", name, detail))
    if not ok:
        fails.append(name)

for p in (5, 1048576):
    d = runs.get(("direct", p))
    for c, rl in (("cond0", "relay1"), ("cond3", "relay7"), ("emb0", "relay1")):
        rc, rr = runs.get((c, p)), runs.get((rl, p))
        if not (d and rc and rr):
            continue
        h = hops[c]
        ch = (rc["p50_us"] - d["p50_us"]) / h
        rh = max((rr["p50_us"] - d["p50_us"]) / h, 0.001)
        check("hop latency %s vs %s, %d B" % (c, rl, p), ch <= 2 * rh,
              "%.1f us vs %.1f us per hop (%.2fx; target <= 2x)" % (ch, rh, ch / rh))
    for c, rl in (("cond0", "relay1"), ("cond3", "relay7"), ("emb0", "relay1")):
        rc, rr = runs.get((c, 1048576)), runs.get((rl, 1048576))
        if p == 1048576 and rc and rr:
            check("1 MiB forwarding %s vs %s" % (c, rl),
                  rc["mibps"] >= 0.5 * rr["mibps"],
                  "%.1f vs %.1f MiB/s (%.2fx; target >= 0.5x)" % (
                      rc["mibps"], rr["mibps"], rc["mibps"] / rr["mibps"]))
check("RSS at rest, acp conductor", rest["cli_rss_kib"] < 4096,
      "%.2f MiB (target < 4 MiB)" % (rest["cli_rss_kib"] / 1024.0))
check("RSS at rest, embedded", rest["emb_rss_kib"] < 4096,
      "%.2f MiB (target < 4 MiB)" % (rest["emb_rss_kib"] / 1024.0))
for c in ("cond0", "cond3", "emb0"):
    r = runs.get((c, 1048576))
    if r:
        check("RSS under load %s" % c, r["agent_peak_rss_kib"] < 7 * 1024,
              "%.2f MiB peak (target < 3 x 1 MiB + 4 MiB = 7 MiB)" % (
                  r["agent_peak_rss_kib"] / 1024.0))
sys.exit(1 if fails else 0)
EOF
exit $status
