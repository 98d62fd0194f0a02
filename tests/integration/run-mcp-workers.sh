#!/bin/sh
# run-mcp-workers.sh - `acp mcp serve --http 127.0.0.1:0 --workers 2`: two
# worker processes on one port (SO_REUSEPORT) under a supervisor, driven
# with curl (one new connection per request, so the kernel picks a worker
# each time).
#   (a) 2026-07-28 stateless tools/call requests are answered by both
#       workers (X-Acp-Worker: w1 and w2);
#   (b) a subscriptions/listen stays open and gets SSE keep-alive comments
#       (--sse-keepalive 100);
#   (c) the worker not holding the listen SIGKILLed: the supervisor logs
#       it, starts a replacement (a new pid) that answers under its name;
#   (d) SIGTERM to the supervisor: the open listen ends with its result
#       (resultType "complete"), the supervisor exits 0 and every worker
#       pid is gone;
#   (e) bad --workers / --sse-keepalive arguments: exit 2.
# Waits are for events (log lines, answers), bounded only against hangs.
#
# Usage: run-mcp-workers.sh [path/to/acp]   (or ACP_BIN)
# Exit status: 0 all passed, 1 some failed, 77 skipped.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp "${1:-}"
for tool in curl grep sed; do need_cmd $tool; done

# The supervisor and the listen are waited for by the checks (and then
# cleared), so they are not in pids.
sup=""
listen_pid=""
cleanup_extra() {
  for p in $listen_pid $sup; do kill "$p" 2>/dev/null; done
  for p in $listen_pid $sup; do wait "$p" 2>/dev/null; done
}

# (e) the command line.
"$acp" mcp serve --http 127.0.0.1:0 --workers 0 2>"$work/e1"
[ $? -eq 2 ] && grep -q "workers wants 1..64" "$work/e1" &&
  pass "--workers 0: exit 2" || fail "--workers 0: exit 2"
"$acp" mcp serve --workers 2 </dev/null 2>"$work/e2"
[ $? -eq 2 ] && grep -q "needs --http" "$work/e2" &&
  pass "--workers without --http: exit 2" ||
  fail "--workers without --http: exit 2"
"$acp" mcp serve --http 127.0.0.1:0 --sse-keepalive x 2>"$work/e3"
[ $? -eq 2 ] && pass "--sse-keepalive x: exit 2" ||
  fail "--sse-keepalive x: exit 2"

log="$work/sup.log"
"$acp" mcp serve --http 127.0.0.1:0 --workers 2 --sse-keepalive 100 \
  2>"$log" &
sup=$!
if ! wait_for "$log" "serving http" || ! wait_for "$log" "worker w1 ready" ||
  ! wait_for "$log" "worker w2 ready"; then
  echo "FAIL the workers did not start"
  cat "$log"
  exit 1
fi
port=$(sed -n 's/.*serving http:[^ ]*:\([0-9]*\)\/mcp.*/\1/p' "$log")
url="http://127.0.0.1:$port/mcp"
pid_of() { sed -n "s/.*worker $1 ready (pid \\([0-9]*\\)).*/\\1/p" "$log" | tail -n 1; }

META26='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
# call26 N: one stateless tools/call echo on a new connection; sets $code,
# $worker, body in $work/body.
call26() {
  code=$(curl -s -o "$work/body" -D "$work/hdr" -w '%{http_code}' \
    -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' \
    -H 'Mcp-Name: echo' \
    --data-binary "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"m$1\"},$META26}}" \
    "$url")
  worker=$(tr -d '\r' <"$work/hdr" | sed -n 's/^[Xx]-[Aa]cp-[Ww]orker: //p')
}

# (a) calls until both workers answered (the kernel hashes each new
# connection; 200 tries miss one worker with probability ~2^-200).
seen1=0 seen2=0 bad=0 n=0
while [ $n -lt 200 ] && { [ $seen1 = 0 ] || [ $seen2 = 0 ]; }; do
  n=$((n + 1))
  call26 $n
  if [ "$code" != 200 ] || ! grep -q "\"text\":\"m$n\"" "$work/body"; then
    bad=$((bad + 1))
    continue
  fi
  case $worker in w1) seen1=1 ;; w2) seen2=1 ;; *) bad=$((bad + 1)) ;; esac
done
[ $bad = 0 ] && pass "stateless calls answered ($n calls)" ||
  fail "stateless calls: $bad of $n bad"
[ $seen1 = 1 ] && [ $seen2 = 1 ] && pass "both workers answered" ||
  fail "both workers answered (w1 $seen1, w2 $seen2)"

# (b) an open listen gets keep-alive comments.
curl -s -N -o "$work/listen" -D "$work/listen.hdr" \
  -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' \
  -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: subscriptions/listen' \
  --data-binary "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"subscriptions/listen\",\"params\":{$META26,\"notifications\":{\"toolsListChanged\":true}}}" \
  "$url" &
listen_pid=$!
wait_for "$work/listen" "subscriptions/acknowledged" &&
  pass "listen acknowledged" || fail "listen acknowledged"
if wait_for "$work/listen" "^: keep-alive"; then
  pass "listen gets keep-alive comments"
else
  fail "listen gets keep-alive comments"
fi

# (c) kill the worker that does not hold the listen: a replacement (new
# pid) comes back and serves.
lw=$(tr -d '\r' <"$work/listen.hdr" | sed -n 's/^[Xx]-[Aa]cp-[Ww]orker: //p')
case $lw in w1) victim=w2 keep=w1 ;; *) victim=w1 keep=w2 ;; esac
vpid=$(pid_of $victim)
kpid=$(pid_of $keep)
kill -9 "$vpid"
if wait_for "$log" "worker $victim (pid $vpid) killed by signal 9; restarting in"; then
  pass "$victim's death logged with its restart"
else
  fail "$victim's death logged with its restart"
  cat "$log"
fi
i=0
while [ "$(pid_of $victim)" = "$vpid" ] && [ $i -lt 300 ]; do i=$((i + 1)); sleep 0.1; done
npid=$(pid_of $victim)
[ -n "$npid" ] && [ "$npid" != "$vpid" ] && pass "$victim replaced (pid $vpid -> $npid)" ||
  fail "$victim replaced (pid $vpid -> $npid)"
seen=0 n2=0
while [ $n2 -lt 200 ] && [ $seen = 0 ]; do
  n2=$((n2 + 1))
  call26 $((1000 + n2))
  [ "$code" = 200 ] && [ "$worker" = $victim ] && seen=1
done
[ $seen = 1 ] && pass "the new $victim answers" || fail "the new $victim answers"

# (d) SIGTERM: the listen ends with its result, everything stops.
kill -TERM "$sup"
i=0
while kill -0 "$sup" 2>/dev/null && [ $i -lt 300 ]; do i=$((i + 1)); sleep 0.1; done
wait "$sup"
rc=$?
sup=""
[ $rc = 0 ] && pass "supervisor exits 0 on SIGTERM" ||
  fail "supervisor exits 0 on SIGTERM (rc $rc)"
grep -q "all workers stopped" "$log" && pass "supervisor logs the stop" ||
  fail "supervisor logs the stop"
gone=1
for p in $npid $kpid; do kill -0 "$p" 2>/dev/null && gone=0; done
[ $gone = 1 ] && pass "worker pids gone" || fail "worker pids gone ($npid $kpid)"
wait "$listen_pid"
listen_pid=""
if grep -q '"id":77' "$work/listen" &&
  grep -q '"resultType":"complete"' "$work/listen"; then
  pass "the open listen ended with its complete result"
else
  fail "the open listen ended with its complete result"
  cat "$work/listen"
fi

if [ $fail -ne 0 ]; then
  echo "--- supervisor log"
  cat "$log"
fi
finish
