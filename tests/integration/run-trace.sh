#!/bin/sh
# run-trace.sh - `acp trace` on traces recorded from real chains
# (acp client -> acp conductor --trace -> example proxies -> acp agent, with
# and without the MCP bridge, an error, a cancelled turn), on malformed
# traces, and on a generated trace of 100,000 messages. The summary is
# checked through --json; the page (--html) is checked for its data here
# and in a browser by run-trace-browser.sh.
#   ACP_VALGRIND_WRAP a command prefix for every `acp trace` run, e.g.
#                     "valgrind -q --error-exitcode=99 --leak-check=full"
#                     (the generated trace is then 5,000 messages)
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
need_cmd python3 "needed to read the JSON summaries"
AR="$acp proxy arrow"
wrap=${ACP_VALGRIND_WRAP:-}
# Under valgrind, exit status 99 is a memory error: noted in a file, since
# some runs are in pipelines, and failed at the end.
trace() {
  $wrap "$acp" trace "$@"
  rc=$?
  [ -n "$wrap" ] && [ $rc -eq 99 ] && echo "acp trace $*" >>"$work/vg-errors"
  return $rc
}
big=100000
[ -n "$wrap" ] && big=5000
# check NAME SUMMARY.json PYTHON-CONDITIONS: pass when every condition (one
# per line, over `s`, the summary) holds; print the failing ones otherwise.
check() {
  name=$1 file=$2 conds=$3
  if out=$(python3 - "$file" "$conds" <<'EOF' 2>&1
import json, sys
s = json.load(open(sys.argv[1]))
hop = {(h["from"], h["to"]): h for h in s["hops"]}
names = [c["name"] for c in s["components"]]
bad = [c for c in sys.argv[2].strip().splitlines()
       if c.strip() and not eval(c.strip())]
if bad:
    print("\n".join("not: " + c.strip() for c in bad))
    print(json.dumps({k: s[k] for k in s if k not in ("sessions",)})[:1500])
    sys.exit(1)
EOF
  ); then ok "$name"; else ko "$name" "$out"; fi
}

# ---- 1. a chain of two proxies and the agent ------------------------------
printf 'hello\n/tool Look\n' | timeout 30 "$acp" client --quiet --cwd "$work" \
  -- "$acp" conductor agent --trace "$work/chain.jsonl" "$AR" \
  "$acp proxy context" "$acp agent" >"$work/chain.out" 2>"$work/chain.err"
trace "$work/chain.jsonl" --json >"$work/chain.json" 2>"$work/err" ||
  ko "acp trace --json exits 0" "$(cat "$work/err")"
check "chain: lanes, every request answered on every hop, latency per hop" \
  "$work/chain.json" '
names == ["client", "arrow", "context", "agent"]
s["malformed"] == 0 and s["messages"] == s["lines"]
s["requests"] > 0 and s["paired"] == s["requests"] == s["responses"]
s["unanswered"] == 0 and s["unmatchedResponses"] == 0 and s["unpairable"] == 0
len(s["hops"]) == 6
all(hop[(a, b)]["requests"] == hop[(b, a)]["results"] + hop[(b, a)]["errors"] for a, b in [("client", "arrow"), ("arrow", "context"), ("context", "agent")])
all(h["latencyMs"]["count"] == h["requests"] for h in s["hops"])
all(0 <= h["latencyMs"]["p50"] <= h["latencyMs"]["p99"] <= h["latencyMs"]["max"] for h in s["hops"] if h["latencyMs"]["count"])
hop[("client", "arrow")]["latencyMs"]["max"] >= hop[("context", "agent")]["latencyMs"]["max"]
s["sessionCount"] == 1 and s["sessions"][0]["messages"] > 0
{m["method"]: m["count"] for m in s["methods"]}["session/prompt"] == 6
s["errors"] == 0 and s["cancels"] == 0'

# The text summary says the same in words.
trace "$work/chain.jsonl" >"$work/chain.txt"
if grep -q '^components: client, arrow, context, agent$' "$work/chain.txt" &&
  grep -q '^client -> arrow ' "$work/chain.txt" &&
  grep -q 'unanswered 0' "$work/chain.txt" && grep -q '^errors: none' "$work/chain.txt"; then
  ok "text summary: components, hops, answered requests"
else ko "text summary" "$(cat "$work/chain.txt")"; fi

# ---- 2. an error: a method nobody knows ----------------------------------
# The input ends right after the two requests; the conductor then waits up
# to its stdin grace for their answers (1 s by default). A slow start (an
# ASan build on a loaded machine: 1 s for the first answer was seen) would
# answer them with -32099 instead, so the grace here is generous; the
# conductor still ends as soon as nothing is in flight.
printf '%s\n' \
  '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}' \
  '{"jsonrpc":"2.0","id":1,"method":"nope/nothing","params":{}}' |
  timeout 30 "$acp" conductor agent --stdin-grace 20000 \
    --trace "$work/err.jsonl" "$AR" "$acp agent" \
    >"$work/err.out" 2>&1
trace "$work/err.jsonl" --json >"$work/err.json"
check "errors by code and method, counted on each hop back" "$work/err.json" '
s["errorsByCode"] == [{"code": -32601, "method": "nope/nothing", "count": 2}]
s["errors"] == 2 and hop[("agent", "arrow")]["errors"] == 1 and hop[("arrow", "client")]["errors"] == 1
s["paired"] == s["requests"] == 4'

# ---- 3. a cancelled turn (Ctrl-C in acp client) --------------------------
: >"$work/c.out"
"$acp" client -p "/wait" -- "$acp" conductor agent --trace "$work/cancel.jsonl" \
  "$AR" "$AR" "$acp agent" >"$work/c.out" 2>&1 &
cpid=$!
i=0
while [ $i -lt 100 ] && ! grep -q "waiting for session/cancel" "$work/c.out"; do
  sleep 0.1; i=$((i + 1)); done
kill -INT $cpid
wait $cpid
trace "$work/cancel.jsonl" --json >"$work/cancel.json"
check "cancellation: session/cancel on each of the 3 hops, the turn still answered" \
  "$work/cancel.json" '
s["cancels"] == 3 and s["cancelledTurns"] == 3 and s["cancelledRequests"] == 0
[h["cancels"] for h in s["hops"] if h["cancels"]] == [1, 1, 1]
hop[("client", "arrow")]["cancels"] == 1 and hop[("arrow", "agent")]["cancels"] == 1
s["unanswered"] == 0 and s["paired"] == s["requests"]'

# ---- 4. the MCP bridge: its traffic in lanes of its own ------------------
timeout 30 "$acp" client -p '/mcp-call tools echo {"message":"traced"}' -- \
  "$acp" conductor agent --trace "$work/bridge.jsonl" "$acp proxy tools" \
  "$acp agent --mcp-acp off" >"$work/bridge.out" 2>&1
trace "$work/bridge.jsonl" --json >"$work/bridge.json"
check "MCP bridge: bridge, server and endpoint lanes; MCP requests answered" \
  "$work/bridge.json" '
names[:3] == ["client", "tools", "agent"] and names[3:] == ["bridge", "bridge:tools", "endpoint:1"]
hop[("endpoint:1", "bridge:tools")]["requests"] == hop[("bridge:tools", "endpoint:1")]["results"] >= 2
hop[("endpoint:1", "bridge:tools")]["unanswered"] == 0
hop[("bridge", "tools")]["requests"] >= 3 and hop[("tools", "bridge")]["results"] >= 3
"tools/call" in [m["method"] for m in s["methods"]] and "mcp/message" in [m["method"] for m in s["methods"]]
s["unmatchedResponses"] == 0'

# ---- 5. the page holds every message, byte for byte ----------------------
trace "$work/chain.jsonl" --html "$work/chain.html" >"$work/h.out" 2>&1
if python3 - "$work/chain.jsonl" "$work/chain.html" <<'EOF'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
page = open(sys.argv[2]).read()
def block(name):
    m = re.search(r'<script id="%s" type="application/json">(.*?)</script>' % name, page, re.S)
    return json.loads(m.group(1))
raw, ix = block("trace-raw"), block("trace-index")
assert "http://" not in page and "https://" not in page, "the page must not load anything"
assert len(raw) == len(lines) == len(ix["k"]), (len(raw), len(lines))
src = [l for l in open(sys.argv[1]) if l.strip()]
for r, l in zip(raw, src):
    # exact bytes: the message is the text between "message": and the end
    assert '"message":' + r in l, (r[:80], l[:120])
assert ix["lanes"] == ["client", "arrow", "context", "agent"]
for i, p in enumerate(ix["p"]):
    if ix["k"][i] == 0:
        assert p > i and ix["p"][p] == i and ix["k"][p] in (2, 3), i
EOF
then ok "page: every message's exact bytes, lanes, each request linked to its response"
else ko "page data"; fi

# ---- 6. malformed traces ---------------------------------------------------
good=$(head -n 1 "$work/chain.jsonl")
{
  echo "$good"
  echo 'not json at all'
  echo '{"time":1,"from":"client"'
  echo '[1,2,3]'
  echo '{"time":"x","from":"a","to":"b","message":{}}'
  echo '{"time":2,"from":"a","to":"b","message":42}'
  echo '{"time":3,"from":"a","to":"b","message":{"jsonrpc":"2.0"}}'
  printf '\377\376 binary \001\n'
  echo ''
  echo '{"time":4,"from":"client","fromLink":0,"to":"arrow","toLink":1,"dir":"right","message":[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":7,"method":"m"}]}'
  echo '{"time":5,"from":"arrow","fromLink":1,"to":"client","toLink":0,"dir":"left","message":{"jsonrpc":"2.0","id":7,"result":null},"answers":{"link":1,"id":7}}'
  echo '{"time":6,"from":"arrow","fromLink":1,"to":"client","toLink":0,"dir":"left","message":{"jsonrpc":"2.0","id":8,"error":{"code":-1}},"answers":{"link":"x"}}'
  printf '{"time":7,"from":"a","to":"b","message":{"jsonrpc":"2.0","method":"cut'
} >"$work/bad.jsonl"
trace "$work/bad.jsonl" --json >"$work/bad.json" 2>"$work/bad.err"
rc=$?
if [ $rc -eq 0 ]; then
  check "malformed lines counted and listed by number, the rest still read" \
    "$work/bad.json" '
s["lines"] == 13 and s["malformed"] == 8
[b["line"] for b in s["malformedLines"]] == [2, 3, 4, 5, 6, 7, 8, 13]
s["batches"] == 1 and s["paired"] == 1 and s["unmatchedResponses"] == 1
s["unanswered"] == 1 and s["errorsByCode"] == [{"code": -1, "method": "?", "count": 1}]'
else ko "malformed trace: exit $rc" "$(cat "$work/bad.err")"; fi
if trace "$work/bad.jsonl" --html "$work/bad.html" >"$work/bad.txt" 2>&1 &&
  grep -q 'line 2: not JSON' "$work/bad.txt" && grep -q 'trace-raw' "$work/bad.html"; then
  ok "malformed trace: text summary names the lines, the page is still written"
else ko "malformed trace text/html" "$(cat "$work/bad.txt")"; fi
: >"$work/empty.jsonl"
if trace "$work/empty.jsonl" --json | grep -q '"messages":0'; then
  ok "empty trace"; else ko "empty trace"; fi
# A line longer than the 64 MiB cap is skipped, not kept.
python3 -c "import sys; sys.stdout.write('{\"x\":\"' + 'a' * (65 << 20) + '\"}\n')" >"$work/long.jsonl"
echo "$good" >>"$work/long.jsonl"
if trace "$work/long.jsonl" --json >"$work/long.json" 2>&1; then
  check "over-long line skipped and reported" "$work/long.json" '
s["malformed"] == 1 and s["malformedLines"][0]["reason"].startswith("line longer") and s["messages"] == 1'
else ko "over-long line" "$(cat "$work/long.json")"; fi
rm -f "$work/long.jsonl"

# ---- 7. command line -------------------------------------------------------
trace "$work/nope.jsonl" >/dev/null 2>&1; r1=$?
trace --bogus "$work/chain.jsonl" >/dev/null 2>&1; r2=$?
trace >/dev/null 2>&1; r3=$?
trace - --html "$work/x.html" </dev/null >/dev/null 2>&1; r4=$?
trace "$work/chain.jsonl" --html "$work/no/such/dir/x.html" >/dev/null 2>&1; r5=$?
if [ $r1 -eq 1 ] && [ $r2 -eq 2 ] && [ $r3 -eq 2 ] && [ $r4 -eq 2 ] && [ $r5 -eq 1 ] &&
  trace --help | grep -q -- '--html' &&
  trace - --json <"$work/chain.jsonl" | grep -q '"messages":'; then
  ok "command line: missing file 1, bad usage 2, --help, stdin"
else ko "command line" "$r1 $r2 $r3 $r4 $r5"; fi

# ---- 8. 100,000 messages ---------------------------------------------------
python3 "$here/gen-trace.py" $big >"$work/big.jsonl"
t0=$(date +%s%N)
trace "$work/big.jsonl" --json >"$work/big.json"
t1=$(date +%s%N)
trace "$work/big.jsonl" --html "$work/big.html" >/dev/null
t2=$(date +%s%N)
echo "$big messages ($(wc -c <"$work/big.jsonl") bytes): summary $(((t1 - t0) / 1000000)) ms," \
  "page $(((t2 - t1) / 1000000)) ms ($(wc -c <"$work/big.html") bytes)"
check "$big generated messages summarised, every request paired" "$work/big.json" "
s['messages'] == $big"'
s["malformed"] == 0
s["paired"] == s["requests"] == s["responses"] and s["unanswered"] == 0
s["errors"] == s["errorsByCode"][0]["count"] > 0 and s["cancels"] > 0
names == ["client", "conductor", "p1", "p2", "agent"]
s["sessionCount"] == 50'

if [ -s "$work/vg-errors" ]; then ko "valgrind reported errors" "$(cat "$work/vg-errors")"; fi
finish
