#!/bin/sh
# run-haproxy.sh - remote ACP behind a real load balancer: HAProxy (Debian
# `haproxy`, started unprivileged on 127.0.0.1 with
# examples/deploy/haproxy-acp.cfg) in front of two `acp serve
# --session-grace` backends with cookie stickiness. lb_peer.mjs runs 100
# concurrent Streamable HTTP clients; each does a turn, drops its
# connection, reconnects with its cookies and session/load's its session
# (behind HAProxy a backend sees a drop at its next SSE keepalive, every
# --ping-ms; an earlier reconnect is retried):
#   - every client resumes its session (same agent process: the replayed
#     history holds its prompt);
#   - both backends serve clients;
#   - each reconnect went to the backend of the first connection (its
#     backend's log says "connection NEW resumes connection OLD");
# then `acp client --url --http` goes through HAProxy too (three turns).
# Needs ACP_BIN, node and haproxy; exit 77 without them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
wrap=${ACP_VALGRIND_WRAP:-}
N=${ACP_LB_CLIENTS:-100}
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed"; exit 77; }
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$HAPROXY" ] || { echo "SKIP: haproxy is not installed"; exit 77; }
work=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

# A free port for HAProxy (the backends must accept it as their Host).
lbport=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();});')
start_serve() { # log -> $port
  log=$1
  # shellcheck disable=SC2086
  $wrap "$acp" serve --listen 127.0.0.1:0 --verbose --allow-host "127.0.0.1:$lbport" \
    --session-grace 60000 --max-connections 1024 --ping-ms 250 \
    -- "$acp" agent 2>"$log" &
  pids="$pids $!"
  port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's/.*listening on ws:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$log")
    [ -n "$port" ] && return 0
    sleep 0.05
  done
  echo "acp serve did not start:"; cat "$log"; exit 1
}
start_serve "$work/b1.log"; p1=$port
start_serve "$work/b2.log"; p2=$port
ACP_LB="127.0.0.1:$lbport" ACP_B1="127.0.0.1:$p1" ACP_B2="127.0.0.1:$p2" \
  "$HAPROXY" -f "$root/examples/deploy/haproxy-acp.cfg" -db >"$work/haproxy.log" 2>&1 &
pids="$pids $!"
up=0
for _ in $(seq 1 200); do
  st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$lbport/acp" 2>/dev/null)
  [ "$st" = 426 ] && { up=1; break; }
  sleep 0.05
done
[ "$up" = 1 ] || { echo "haproxy did not start:"; cat "$work/haproxy.log"; exit 1; }

lburl="http://127.0.0.1:$lbport/acp"
timeout 300 node "$here/lb_peer.mjs" "$lburl" "$N" >"$work/lb.out" 2>"$work/lb.err"
rc=$?
summary=$(grep '"summary"' "$work/lb.out")
if [ $rc -eq 0 ]; then
  ok "$N concurrent sessions through HAProxy: each resumed after a dropped connection ($summary)"
else
  ko "sessions through HAProxy" "$summary" "$(grep error "$work/lb.out" | head -5)" "$(head -c 2000 "$work/lb.err")"
fi
n1=$(grep -c '"backend":"s1"' "$work/lb.out")
n2=$(grep -c '"backend":"s2"' "$work/lb.out")
[ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] && ok "both backends served clients ($n1 and $n2)" ||
  ko "both backends used" "s1=$n1 s2=$n2"
# Every reconnect was resumed by the backend that served the first
# connection: s1 is b1.log, s2 is b2.log.
bad=0
while IFS= read -r line; do
  be=$(printf '%s' "$line" | sed -n 's/.*"backend":"s\([12]\)".*/\1/p')
  c1=$(printf '%s' "$line" | sed -n 's/.*"cid1":"\([^"]*\)".*/\1/p')
  c2=$(printf '%s' "$line" | sed -n 's/.*"cid2":"\([^"]*\)".*/\1/p')
  [ -n "$be" ] || continue
  grep -q "connection $c2 resumes connection $c1" "$work/b$be.log" || bad=$((bad + 1))
done <"$work/lb.out"
[ "$bad" -eq 0 ] && [ $((n1 + n2)) -eq "$N" ] &&
  ok "each reconnect stayed on its backend and got its agent back" ||
  ko "stickiness across reconnects" "$bad without a resume line in their backend's log"

# acp client --url --http through HAProxy (cookies: SERVERID, acp_agent).
# It once printed nothing: its session/prompt POST overtook the GET of the
# session stream, so the answer came on the connection stream and the
# turn's updates on the session stream after it (run-remote-order.sh).
for i in 1 2 3; do
  out=$(timeout 30 "$acp" client --quiet --url "$lburl" --http -p "through haproxy $i" 2>&1)
  [ "$out" = "through haproxy $i" ] && ok "acp client --http through HAProxy ($i)" ||
    ko "acp client --http through HAProxy ($i)" "$out"
done
out=$(timeout 30 "$acp" client --quiet --url "$lburl" -p "ws through haproxy" 2>&1)
[ "$out" = "ws through haproxy" ] && ok "acp client (WebSocket) through HAProxy" || ko "acp client ws through HAProxy" "$out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
