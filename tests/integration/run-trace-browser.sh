#!/bin/sh
# run-trace-browser.sh - pages written by `acp trace --html` in headless
# Chromium (Debian's `chromium`), driven over the DevTools protocol by
# trace-browser.mjs: a page from a recorded chain loads with no console
# error and shows its lanes and one arrow per message; a request opens to
# its exact bytes and is linked to its response; the method and session
# filters work; a page of 100,000 messages loads (its load time is printed,
# not judged). Screenshots are kept in BUILD/trace-artifacts/.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
case $acp in /*) ;; *) acp=$PWD/$acp ;; esac
if [ ! -x "$acp" ]; then echo "SKIP: $acp not built"; exit 77; fi
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$chromium" ]; then
  echo "SKIP: chromium is not installed (apt-get install chromium; make deps does)"; exit 77
fi
if ! command -v node >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: node and python3 are needed to drive and check the browser"; exit 77
fi
out=$(dirname "$acp")/trace-artifacts
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A real chain: acp client -> conductor -> arrow -> context -> acp agent.
printf 'hello\n/tool Look\n' | timeout 30 "$acp" client --quiet --cwd "$work" \
  -- "$acp" conductor agent --trace "$work/chain.jsonl" "$acp proxy arrow" \
  "$acp proxy context" "$acp agent" >/dev/null 2>"$work/chain.err" ||
  { echo "FAIL recording the chain"; cat "$work/chain.err"; exit 1; }
"$acp" trace "$work/chain.jsonl" --html "$out/trace-chain.html" >/dev/null &&
  "$acp" trace "$work/chain.jsonl" --json >"$work/chain.json" ||
  { echo "FAIL acp trace"; exit 1; }
# What the page must show, from the trace itself.
python3 - "$work/chain.json" "$work/chain.jsonl" >"$work/expect.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
sid = s["sessions"][0]["id"]
def method(m):
    if m.get("method") in ("proxy/successor", "_proxy/successor"):
        return m["params"]["method"]
    return m.get("method")
req_at = {}  # (link, id) -> the request line
for e in lines:
    if "method" in e["message"] and "id" in e["message"]:
        req_at[(e["toLink"], e["message"]["id"])] = e
pair = {}  # a request or response line -> its other half
for e in lines:
    a = e.get("answers")
    if a and (a["link"], a["id"]) in req_at:
        r = req_at[(a["link"], a["id"])]
        pair[id(e)], pair[id(r)] = r, e
def has_sid(e):
    return sid in json.dumps(e["message"])
n_new = sum(1 for e in lines if method(e["message"]) == "session/new" or
            (id(e) in pair and method(pair[id(e)]["message"]) == "session/new"))
# A message belongs to a session when it names it or its other half does
# (a prompt's answer; the session/new that made it).
in_session = sum(1 for e in lines if has_sid(e) or
                 (id(e) in pair and has_sid(pair[id(e)])))
json.dump({"lanes": [c["name"] for c in s["components"]], "messages": s["messages"],
           "method": "session/new", "methodCount": n_new,
           "session": sid, "sessionMessages": in_session}, sys.stdout)
PY
python3 "$here/gen-trace.py" 100000 >"$work/big.jsonl"
"$acp" trace "$work/big.jsonl" --html "$out/trace-big.html" >/dev/null ||
  { echo "FAIL acp trace (100,000 messages)"; exit 1; }

# Node 20 has WebSocket behind a flag; 22 and later by default.
flag=
node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null ||
  flag=--experimental-websocket
timeout 180 node $flag --no-warnings "$here/trace-browser.mjs" "$chromium" \
  "$out/trace-chain.html" "$work/expect.json" "$out/trace-big.html" "$out"
rc=$?
rm -f "$out/trace-big.html"
echo "screenshots: $out/trace-chain.png $out/trace-open.png $out/trace-big.png"
exit $rc
