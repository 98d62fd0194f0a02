#!/bin/sh
# run-proxies.sh - the example proxies (arrow, context, guard, trace) doing
# their job inside a real chain: acp client -> acp conductor -> proxy -> acp
# agent. The conductor itself is covered by run-conductor.sh.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp

# arrow: one '>' per proxy in front of each agent message, not of each
# chunk. `acp agent` streams each line of text as a chunk of its own.
AR="$acp proxy arrow"
arrow() { # arrow PROMPT -> stdout of acp client through two arrows
  timeout 30 "$acp" client --quiet --cwd "$work" -p "$1" \
    -- "$acp" conductor agent "$AR" "$AR" "$acp agent" 2>"$work/err"
}
out=$(arrow "$(printf 'hello\nstreamed\nworld')")
want=$(printf '>>hello\nstreamed\nworld')
if [ "$out" = "$want" ]; then ok "arrow: first chunk of a streamed message only"
else ko "arrow: streamed message" "got: $out" "want: $want"; fi

out=$(arrow "$(printf 'before\n/tool Look\nafter\n/think hm\nlast')")
want=$(printf '>>before\n>>after\n>>last')
if [ "$out" = "$want" ]; then ok "arrow: another update in between starts a new message"
else ko "arrow: update in between" "got: $out" "want: $want"; fi

out=$(arrow '/update {"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"a"}}
/update {"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"b"}}
/update {"sessionUpdate":"agent_message_chunk","messageId":"m2","content":{"type":"text","text":"c"}}')
if [ "$out" = ">>ab>>c" ]; then ok "arrow: a new messageId starts a new message"
else ko "arrow: messageId" "got: $out" "want: >>ab>>c"; fi

out=$(printf 'first\nsecond\n' | timeout 30 "$acp" client --quiet --cwd "$work" \
      -- "$acp" conductor agent "$AR" "$acp agent" 2>"$work/err")
want=$(printf '>first\n>second')
if [ "$out" = "$want" ]; then ok "arrow: each prompt turn starts a new message"
else ko "arrow: prompt turns" "got: $out" "want: $want"; fi

# context: AGENTS.md goes in front of the first prompt of a session only.
mkdir -p "$work/ctx"
echo "RULES: be brief" > "$work/ctx/AGENTS.md"
out=$(printf 'first\nsecond\n' | timeout 30 "$acp" client --quiet --cwd "$work/ctx" \
      -- "$acp" conductor agent "$acp proxy context" "$acp agent" 2>"$work/err")
want=$(printf 'RULES: be brief\nfirst\nsecond')
if [ "$out" = "$want" ]; then ok "context: AGENTS.md before the first prompt only"
else ko "context: first prompt only" "got: $out" "$(cat "$work/err")"; fi

echo "from a chosen file" > "$work/notes.txt"
out=$(timeout 30 "$acp" client --quiet --cwd "$work/ctx" -p "hello" \
      -- "$acp" conductor agent "$acp proxy context --file $work/notes.txt" \
      "$acp agent" 2>"$work/err")
want=$(printf 'from a chosen file\nhello')
if [ "$out" = "$want" ]; then ok "context --file: that file instead of AGENTS.md"
else ko "context --file" "got: $out" "$(cat "$work/err")"; fi

mkdir -p "$work/plain"
out=$(timeout 30 "$acp" client --quiet --cwd "$work/plain" -p "hello" \
      -- "$acp" conductor agent "$acp proxy context" "$acp agent" 2>"$work/err")
if [ "$out" = "hello" ]; then ok "context: no AGENTS.md, prompt unchanged"
else ko "context without AGENTS.md" "got: $out"; fi

# guard: matching tool calls are rejected by the proxy, the client never
# sees the question; others reach the client.
ask() { # ask PATTERN-ARGS PROMPT
  timeout 30 "$acp" client --yes --cwd "$work/plain" -p "$2" \
    -- "$acp" conductor agent "$acp proxy guard $1" "$acp agent" \
    >"$work/out" 2>"$work/err"
}
ask "--deny delete" "/ask:edit Delete everything"
if grep -q "permission denied" "$work/out" && ! grep -q "\[permission\]" "$work/err"
then ok "guard: title matching --deny rejected by the proxy"
else ko "guard: title match" "$(cat "$work/out" "$work/err")"; fi

ask "--deny EDIT" "/ask:edit Tidy the notes"
if grep -q "permission denied" "$work/out" && ! grep -q "\[permission\]" "$work/err"
then ok "guard: kind matching --deny (case-insensitive) rejected"
else ko "guard: kind match" "$(cat "$work/out" "$work/err")"; fi

ask "--deny delete" "/ask:read Read the notes"
if grep -q "permission granted" "$work/out" && grep -q "\[permission\]" "$work/err"
then ok "guard: other tool calls reach the client"
else ko "guard: forward" "$(cat "$work/out" "$work/err")"; fi

# trace: every message logged, output unchanged.
out=$(timeout 30 "$acp" client --quiet --cwd "$work/plain" -p "traced" \
      -- "$acp" conductor agent "$acp proxy trace --file $work/trace.jsonl" \
      "$acp agent" 2>"$work/err")
if [ "$out" = "traced" ] && grep -q '"session/prompt"' "$work/trace.jsonl" &&
   grep -q '"from":"agent"' "$work/trace.jsonl" &&
   grep -q '"from":"client"' "$work/trace.jsonl" &&
   python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' \
     "$work/trace.jsonl"; then
  ok "trace: every line valid JSON, both directions, output unchanged"
else
  ko "trace" "got: $out" "$(head -c 600 "$work/trace.jsonl" 2>/dev/null)"
fi

finish proxies
