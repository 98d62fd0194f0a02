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
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
RUNS=${ACP_ORDER_RUNS:-5}
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed"; exit 77; }
work=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
node "$here/order_server.mjs" >"$work/server.log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 200); do
  port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$work/server.log")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { echo "order_server did not start:"; cat "$work/server.log"; exit 1; }
fail=0
for i in $(seq 1 "$RUNS"); do
  out=$(timeout 30 "$acp" client --quiet --url "http://127.0.0.1:$port/acp" --http -p "hi" 2>&1)
  rc=$?
  if [ "$out" = "in order" ] && [ $rc -eq 0 ]; then
    echo "PASS run $i: the turn's update arrived before its answer"
  else
    echo "FAIL run $i: exit $rc, output [$out]"
    fail=$((fail + 1))
  fi
done
early=$(grep -c '^early' "$work/server.log")
ordered=$(grep -c '^ordered session/prompt' "$work/server.log")
if [ "$early" -eq 0 ] && [ "$ordered" -eq "$RUNS" ]; then
  echo "PASS every session POST came after its session stream was open ($ordered)"
else
  echo "FAIL session POSTs before their stream was open: $early (ordered prompts: $ordered of $RUNS)"
  fail=$((fail + 1))
fi

# A 1 MiB prompt puts the client's link over its mark, so the link stops
# reading while that prompt waits for its session stream: the stream's
# head must still be read (it was not: 0 turns, exit 0, nothing left on
# the loop). Two 1 MiB turns through acp serve must complete.
"$acp" serve --listen 127.0.0.1:0 --verbose -- "$acp" agent --echo 2>"$work/serve.log" &
spid=$!
sport=""
for _ in $(seq 1 200); do
  sport=$(sed -n 's/.*listening on ws:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$work/serve.log")
  [ -n "$sport" ] && break
  sleep 0.05
done
out=$(timeout 60 "$acp" bench-client --payload 1048576 --turns 2 \
      --url "http://127.0.0.1:$sport/acp" --http 2>&1)
rc=$?
kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q '"turns":2,'; then
  echo "PASS two 1 MiB turns over Streamable HTTP (the session stream's head is read while the link is paused)"
else
  echo "FAIL 1 MiB turns over Streamable HTTP: exit $rc: $out"
  fail=$((fail + 1))
fi
[ "$fail" -eq 0 ]
