#!/bin/sh
# run-acp-interop.sh - libacp against the official ACP TypeScript SDK
# (@agentclientprotocol/sdk, pinned in package.json), both directions:
#   - the SDK client (sdk_client.mjs) drives `acp agent`: a full turn with a
#     tool call, a permission request and a file read; an echo turn; a
#     cancelled turn;
#   - `acp client` drives the SDK agent (sdk_agent.mjs): the same three, with
#     the cancellation coming from Ctrl-C (SIGINT) as a user would send it.
# Needs ACP_BIN (the built acp) and node; installs the SDK if missing.
# Exit 77 (skipped, with the reason) when node or the SDK cannot be had.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
acp=${ACP_BIN:-$root/build/acp}
need_cmd node
need_peers

# SDK client -> acp agent
for sc in full echo cancel; do
  out=$(timeout 60 node "$here/sdk_client.mjs" --dialect acp --scenario $sc \
        -- "$acp" agent 2>&1)
  if [ $? -eq 0 ]; then ok "SDK client -> acp agent: $sc"; else
    ko "SDK client -> acp agent: $sc" "$out"; fi
done
out=$(timeout 60 node "$here/sdk_client.mjs" --dialect acp --scenario unstable \
      -- "$acp" agent --unstable 2>&1)
if [ $? -eq 0 ]; then ok "SDK client -> acp agent --unstable: the newest unstable methods"
else ko "SDK client -> acp agent --unstable" "$out"; fi
out=$(timeout 60 node "$here/sdk_client.mjs" --dialect acp --scenario unstable \
      -- "$acp" conductor agent "$acp proxy arrow" "$acp agent --unstable" 2>&1)
if [ $? -eq 0 ]; then ok "SDK client -> acp conductor -> acp agent --unstable"
else ko "SDK client -> acp conductor -> acp agent --unstable" "$out"; fi
out=$(timeout 120 node "$here/sdk_client.mjs" --scenario bench --turns 200 \
      --payload 65536 -- "$acp" agent --echo 2>&1)
if [ $? -eq 0 ]; then ok "SDK client -> acp agent --echo: 200 turns of 64 KiB"
else ko "SDK client -> acp agent --echo: bench" "$out"; fi

# acp client -> SDK agent
agent="$here/sdk_agent.mjs"
echo "hello from the file" > "$work/hello.txt"
out=$(timeout 60 "$acp" client --yes --cwd "$work" -p "read $work/hello.txt" \
      -- node "$agent" 2>"$work/err")
rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "hello from the file" &&
   grep -q "\[permission\]" "$work/err" && grep -q "\[fs\] read" "$work/err"; then
  ok "acp client -> SDK agent: full turn (permission, file read)"
else
  ko "acp client -> SDK agent: full turn" "exit $rc" "$out" "$(cat "$work/err")"
fi

out=$(timeout 60 "$acp" client --quiet --cwd "$work" -p "echo:hi there" \
      -- node "$agent" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$out" = "hi there" ]; then
  ok "acp client -> SDK agent: echo"
else
  ko "acp client -> SDK agent: echo" "exit $rc" "got: $out"
fi

# Without --yes and with "2" (Reject) typed on stdin, the permission is
# rejected and the file is never read.
out=$(echo 2 | timeout 60 "$acp" client --cwd "$work" -p "read $work/hello.txt" \
      -- node "$agent" 2>"$work/err")
rc=$?
if [ $rc -eq 0 ] && ! grep -q "\[fs\] read" "$work/err" &&
   grep -q -- "-> reject" "$work/err"; then
  ok "acp client -> SDK agent: permission answered 'reject' on stdin"
else
  ko "acp client -> SDK agent: reject" "exit $rc" "$out" "$(cat "$work/err")"
fi

# Cancellation: Ctrl-C while the agent waits; the turn must end "cancelled"
# (exit status 3).
"$acp" client --cwd "$work" -p "wait" -- node "$agent" >"$work/out" 2>"$work/err" &
pid=$!
i=0
while [ $i -lt 200 ] && ! grep -q "waiting" "$work/out" 2>/dev/null; do
  sleep 0.05; i=$((i + 1))
done
kill -INT $pid 2>/dev/null
i=0
while [ $i -lt 200 ] && kill -0 $pid 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
if kill -0 $pid 2>/dev/null; then kill -KILL $pid; fi
wait $pid
rc=$?
if [ $rc -eq 3 ] && grep -q "cancelled" "$work/err"; then
  ok "acp client -> SDK agent: Ctrl-C cancels the turn (exit 3)"
else
  ko "acp client -> SDK agent: cancel" "exit $rc" "$(cat "$work/out" "$work/err")"
fi

finish "acp interop"
