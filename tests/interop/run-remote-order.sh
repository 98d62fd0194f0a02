#!/bin/sh
# run-remote-order.sh - `acp client --http` sends a session's messages only
# once that session's SSE stream is open (its 200 head arrived), as the
# SDK's client does. order_server.mjs routes like a real server: a prompt
# POSTed before its session stream is registered gets its answer on the
# connection stream at once and its update on the session stream later,
# so a client that does not wait prints an empty turn (the intermittent
# failure behind HAProxy, issue 14). Each run must print the update and
# the server must log "ordered session/prompt" (never "early").
# Needs ACP_BIN and node; exit 77 without node.
. "$(cd "$(dirname "$0")" && pwd)/remote-common.sh"
RUNS=${ACP_ORDER_RUNS:-5}
node "$here/order_server.mjs" >"$work/server.log" 2>&1 &
pids="$pids $!"
port=""
for _ in $(seq 1 200); do
  port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$work/server.log")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { echo "order_server did not start:"; cat "$work/server.log"; exit 1; }
for i in $(seq 1 "$RUNS"); do
  out=$(timeout 30 "$acp" client --quiet --url "http://127.0.0.1:$port/acp" --http -p "hi" 2>&1)
  rc=$?
  if [ "$out" = "in order" ] && [ $rc -eq 0 ]; then
    ok "run $i: the turn's update arrived before its answer"
  else
    ko "run $i: exit $rc, output [$out]"
  fi
done
early=$(grep -c '^early' "$work/server.log")
ordered=$(grep -c '^ordered session/prompt' "$work/server.log")
if [ "$early" -eq 0 ] && [ "$ordered" -eq "$RUNS" ]; then
  ok "every session POST came after its session stream was open ($ordered)"
else
  ko "session POSTs before their stream was open: $early (ordered prompts: $ordered of $RUNS)"
fi

# A session stream refused with 404: the client fails and says why (exit
# 1), never an empty turn with exit 0.
node "$here/order_server.mjs" --refuse-sessions >"$work/server404.log" 2>&1 &
pids="$pids $!"
port=""
for _ in $(seq 1 200); do
  port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$work/server404.log")
  [ -n "$port" ] && break
  sleep 0.05
done
out=$(timeout 30 "$acp" client --quiet --url "http://127.0.0.1:$port/acp" --http -p "hi" 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "session stream was refused: HTTP 404"; then
  ok "a session stream refused 404: exit $rc, says so ($out)"
else
  ko "session stream 404: exit $rc, output [$out]"
fi
# A 1 MiB prompt puts the client's link over its mark, so the link stops
# reading while that prompt waits for its session stream: the stream's
# head must still be read (it was not: 0 turns, exit 0, nothing left on
# the loop). Two 1 MiB turns through acp serve must complete.
start_serve "$work/serve.log" -- "$acp" agent --echo
out=$(timeout 60 "$acp" bench-client --payload 1048576 --turns 2 \
      --url "$serve_url" --http 2>&1)
rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q '"turns":2,'; then
  ok "two 1 MiB turns over Streamable HTTP (the session stream's head is read while the link is paused)"
else
  ko "1 MiB turns over Streamable HTTP: exit $rc: $out"
fi
check_serve_logs
finish
