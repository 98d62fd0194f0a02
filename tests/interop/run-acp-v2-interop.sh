#!/bin/sh
# run-acp-v2-interop.sh - the ACP v2 draft against the official ACP
# TypeScript SDK's `experimental/v2` client (sdk_v2_client.mjs, SDK pinned in
# package.json): `acp agent --protocol-v2` directly, behind `acp conductor`,
# and behind `acp conductor` with a proxy (acp proxy trace) in the chain;
# initialize answers 2, a prompt turn streams its text and ends on the idle
# state_update. Also: a v2 client against `acp agent` without the opt-in
# gets protocolVersion 1 (the SDK then refuses it: not a pass). And the
# other way round: `acp client --protocol-v2` against the SDK's v2 agent
# (sdk_v2_agent.mjs), directly and behind `acp conductor`.
# Needs ACP_BIN (the built acp) and node; installs the SDK if missing.
# Exit 77 (skipped, with the reason) when node or the SDK cannot be had.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
acp=${ACP_BIN:-$root/build/acp}
need_cmd node
need_peers

run() { # NAME CMD...
  name=$1; shift
  out=$(timeout 60 node "$here/sdk_v2_client.mjs" -- "$@" 2>&1)
  if [ $? -eq 0 ]; then ok "$name"; else ko "$name" "$out"; fi
}
run "SDK v2 client -> acp agent --protocol-v2" "$acp" agent --protocol-v2
run "SDK v2 client -> acp conductor -> acp agent --protocol-v2" \
  "$acp" conductor agent "$acp agent --protocol-v2"
run "SDK v2 client -> acp conductor (proxy trace) -> acp agent --protocol-v2" \
  "$acp" conductor agent "$acp proxy trace --file $work/trace.jsonl" \
  "$acp agent --protocol-v2"
# The v2 semantics that differ from v1, as the SDK parses them (see
# sdk_v2_client.mjs --scenario semantics).
runs() { # NAME CMD...
  name=$1; shift
  out=$(timeout 60 node "$here/sdk_v2_client.mjs" --scenario semantics -- "$@" 2>&1)
  if [ $? -eq 0 ]; then ok "$name"; else ko "$name" "$out"; fi
}
runs "SDK v2 client -> acp agent --protocol-v2: v2 semantics (plans, tool calls, diffs, permission states, tool_call/cancel, resume/replay)" \
  "$acp" agent --protocol-v2
runs "SDK v2 client -> acp conductor -> acp agent --protocol-v2: v2 semantics" \
  "$acp" conductor agent "$acp agent --protocol-v2"
# The proxy saw the v2 traffic as it was: the idle state_update went by.
if grep -q '"state_update"' "$work/trace.jsonl" 2>/dev/null &&
   grep -q '"protocolVersion":2' "$work/trace.jsonl"; then
  ok "the proxy carried the v2 messages"
else
  ko "the proxy carried the v2 messages" "$(head -c 2000 "$work/trace.jsonl" 2>&1)"
fi
out=$(timeout 60 node "$here/sdk_v2_client.mjs" -- "$acp" agent 2>&1)
case $out in
  *'"protocolVersion":null'*|*'"protocolVersion":1'*) ok "acp agent without --protocol-v2 does not answer 2 (the SDK v2 client refuses its v1 answer)" ;;
  *) ko "acp agent without --protocol-v2 does not answer 2" "$out" ;;
esac

# acp client --protocol-v2 -> the SDK's experimental/v2 agent
# (sdk_v2_agent.mjs), directly and through acp conductor: a turn with
# streamed chunks, requires_action around a permission request (allowed
# with --yes, rejected from stdin), a tool call's updates, an echo, and
# Ctrl-C cancelling the turn (exit 3).
v2agent="node $here/sdk_v2_agent.mjs"
for via in direct conductor; do
  if [ $via = direct ]; then set -- $v2agent; else
    set -- "$acp" conductor agent "$v2agent"; fi
  out=$(timeout 60 "$acp" client --protocol-v2 --yes --cwd "$work" -p "go" \
        -- "$@" 2>"$work/err")
  rc=$?
  if [ $rc -eq 0 ] && [ "$out" = "Hello from the v2 agent.
 allowed" ] && grep -q "^protocol version 2" "$work/err" &&
     grep -q "^\[waiting for you\]" "$work/err" &&
     grep -q "^\[permission\] Read notes" "$work/err" &&
     grep -q "^\[tool\] Read notes: completed" "$work/err"; then
    ok "acp client --protocol-v2 -> SDK v2 agent ($via): turn, permission, tool call"
  else
    ko "acp client --protocol-v2 -> SDK v2 agent ($via): turn" "exit $rc" \
      "$out" "$(cat "$work/err")"
  fi
  out=$(echo 2 | timeout 60 "$acp" client --protocol-v2 --cwd "$work" -p "go" \
        -- "$@" 2>"$work/err")
  rc=$?
  if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "denied" &&
     grep -q -- "-> reject" "$work/err" &&
     grep -q "^\[tool\] Read notes: failed" "$work/err"; then
    ok "acp client --protocol-v2 -> SDK v2 agent ($via): permission rejected"
  else
    ko "acp client --protocol-v2 -> SDK v2 agent ($via): reject" "exit $rc" \
      "$out" "$(cat "$work/err")"
  fi
  out=$(timeout 60 "$acp" client --protocol-v2 --quiet --cwd "$work" \
        -p "echo:hi there" -- "$@" 2>&1)
  rc=$?
  if [ $rc -eq 0 ] && [ "$out" = "hi there" ]; then
    ok "acp client --protocol-v2 -> SDK v2 agent ($via): echo"
  else
    ko "acp client --protocol-v2 -> SDK v2 agent ($via): echo" "exit $rc" "$out"
  fi
  rm -f "$work/out" "$work/err"
  "$acp" client --protocol-v2 --cwd "$work" -p "wait" -- "$@" \
    >"$work/out" 2>"$work/err" &
  pid=$!
  i=0
  while [ $i -lt 600 ] && ! grep -q "waiting" "$work/out" 2>/dev/null; do
    sleep 0.05; i=$((i + 1))
  done
  kill -INT $pid 2>/dev/null
  i=0
  while [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
    sleep 0.05; i=$((i + 1)); done
  if kill -0 $pid 2>/dev/null; then kill -KILL $pid; fi
  wait $pid
  rc=$?
  if [ $rc -eq 3 ] && grep -q "^\[stop\] cancelled" "$work/err"; then
    ok "acp client --protocol-v2 -> SDK v2 agent ($via): Ctrl-C cancels (exit 3)"
  else
    ko "acp client --protocol-v2 -> SDK v2 agent ($via): cancel" "exit $rc" \
      "$(cat "$work/out" "$work/err")"
  fi
done

finish "acp v2 interop"
