#!/bin/sh
# run-remote-h2.sh - the Streamable HTTP profile of remote ACP over
# cleartext HTTP/2 with prior knowledge (h2c), served by `acp serve` on the
# same port as HTTP/1.1 and WebSocket, driven by Node's built-in
# node:http2 client (h2_peer.mjs; no npm package):
#   - full turn (permission, file read answered by POST), echo, cancel,
#     a 64 KiB and a 1 MiB echo;
#   - two ACP connections multiplexed on one HTTP/2 session, the second
#     one's POSTs on another session;
#   - session-scoped SSE routing: a session's updates and prompt answer on
#     its session stream, another session's on the connection stream;
#   - POSTs held while the agent does not read (503 past the cap), then
#     delivered whole, as streams of one HTTP/2 connection; held ones get
#     410 when their connection ends, 503 after 30 s without reading;
#   - --session-grace: an SSE stream reset mid-turn sends the agent
#     session/cancel for the turn's session;
#   - our client: acp client --http --h2 (a turn, a full turn with
#     permission, read and write, a 1 MB turn, Ctrl-C mid-turn: the agent
#     gets session/cancel and the turn ends cancelled, --h2 without
#     --http);
#   - HTTP/1.1 still served on the same port (curl);
#   - faults: wrong or missing token (401), foreign Origin (403), unknown
#     Acp-Connection-Id and another path (404), oversized POST (413, the
#     session goes on), not JSON (415), RST_STREAM of the SSE stream
#     mid-turn (its agent is stopped, by pid; the server keeps serving),
#     garbage after the preface (GOAWAY, then close); an idle connection
#     (no stream, nothing said for two --ping-ms and at least 10 s) gets
#     GOAWAY and is closed;
#   - backpressure: a reader that stops granting flow-control window stops
#     its agent (blocked writing its stdout) while the server's memory
#     stays small;
#   - shutdown: SIGTERM with an HTTP/2 client connected ends the server.
# Needs ACP_BIN, node and python3. Exit 77 without node. ACP_VALGRIND_WRAP (as in
# run-cli.sh) prefixes every acp serve started here.
. "$(cd "$(dirname "$0")" && pwd)/remote-common.sh"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is not installed"; exit 77; }
node -e 'require("node:http2")' 2>/dev/null || { echo "SKIP: node has no http2"; exit 77; }
peer() { timeout 60 node "$here/h2_peer.mjs" "$@" 2>&1; }

# acp serve on a free port (remote-common.sh's start_serve), and its URL.
serve_h2() {
  start_serve "$@"
  url=$serve_url
}

# Stop server $1 (pid) with SIGTERM: it must exit 0 (valgrind's errors,
# under ACP_VALGRIND_WRAP, make it 99). $2 names it, $3 is its log.
stop_serve() {
  kill -TERM "$1" 2>/dev/null
  code=""
  for _ in $(seq 1 1200); do
    if ! kill -0 "$1" 2>/dev/null; then wait "$1"; code=$?; break; fi
    sleep 0.05
  done
  if [ "$code" = 0 ]; then ok "$2: SIGTERM, exit 0"
  else ko "$2: SIGTERM" "exit '$code'" "$(tail -20 "$3")"; fi
}

# Wait until the agent of connection $2 (in log $1) is gone and the
# connection closed; prints the agent's pid, returns 0 if so.
agent_stopped() {
  apid=""
  for _ in $(seq 1 400); do
    apid=$(grep "connection $2: agent pid" "$1" | sed 's/.*agent pid //')
    if [ -n "$apid" ] && ! kill -0 "$apid" 2>/dev/null &&
       grep -q "connection $2 closed" "$1"; then
      echo "$apid"; return 0
    fi
    sleep 0.05
  done
  echo "$apid"; return 1
}

serve_h2 "$work/serve.log" --max-message 1048576 --ping-ms 200 -- "$acp" agent
main_pid=$serve_pid
echo "the first line of the served file" > "$work/served.txt"
echo "second line" >> "$work/served.txt"

# ---- turns --------------------------------------------------------------
out=$(peer full "$url" "$work/served.txt")
[ $? -eq 0 ] && ok "h2c: full turn (permission, file read, DELETE)" || ko "h2c: full turn" "$out"
out=$(peer echo "$url")
[ $? -eq 0 ] && ok "h2c: echo" || ko "h2c: echo" "$out"
out=$(peer cancel "$url")
[ $? -eq 0 ] && ok "h2c: cancel (stopReason cancelled)" || ko "h2c: cancel" "$out"
out=$(peer big "$url" 1000000)
[ $? -eq 0 ] && ok "h2c: 64 KiB and 1 MB echo" || ko "h2c: big echo" "$out"
out=$(peer multi "$url")
[ $? -eq 0 ] && ok "h2c: two ACP connections on one HTTP/2 session (and POSTs over a second one)" ||
  ko "h2c: multiplexed connections" "$out"

out=$(peer sessions "$url")
[ $? -eq 0 ] && ok "h2c: a session's updates and prompt answer go on its session stream, the others' on the connection stream" ||
  ko "h2c: session-scoped SSE routing" "$out"

# HTTP/1.1 on the same port still works.
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST \
     -H "Content-Type: text/plain" -d '{}' "$url")
[ "$st" = 415 ] && ok "HTTP/1.1 on the same port (415 for text/plain)" || ko "HTTP/1.1 beside h2c" "status $st"

# ---- our client over HTTP/2: acp client --http --h2 -> acp serve -----------
out=$(timeout 30 $wrap "$acp" client --verbose --quiet --url "$url" --http --h2 -p "hello over h2" 2>"$work/c2err")
if [ "$out" = "hello over h2" ] && grep -q "connected over HTTP/2" "$work/c2err"; then
  ok "acp client --h2 -> acp serve: a turn over h2c"
else ko "acp client --h2 -> acp serve: a turn" "$out" "$(cat "$work/c2err")"; fi
if full_turn h2out.txt "written over h2" --url "$url" --http --h2; then
  ok "acp client --h2 -> acp serve: full turn (permission, read, write)"
else
  ko "acp client --h2 -> acp serve: full turn" "exit $turn_rc" "$turn_out" "$(cat "$work/turn.err")"
fi
# a 1 MB prompt (a line on stdin: too long for argv) echoed back
python3 -c 'print("x" * 1048000)' > "$work/big.txt"
timeout 60 $wrap "$acp" client --quiet --url "$url" --http --h2 <"$work/big.txt" >"$work/big.out" 2>"$work/c2err"
n=$(tr -cd x <"$work/big.out" | wc -c)
if [ "$n" -eq 1048000 ]; then ok "acp client --h2 -> acp serve: a 1 MB turn"
else ko "acp client --h2: a 1 MB turn" "got $n bytes" "$(tail -c 300 "$work/c2err")"; fi
# --h2 needs --http
timeout 10 "$acp" client --url "$url" --h2 -p x >/dev/null 2>"$work/c2err"
[ $? -eq 2 ] && grep -q -- "--h2 goes with --http" "$work/c2err" && ok "acp client --h2 without --http: usage error" ||
  ko "acp client --h2 without --http" "$(cat "$work/c2err")"

# ---- refusals -------------------------------------------------------------
out=$(peer status "$url" 403 "" "http://evil.example")
[ $? -eq 0 ] && ok "h2c: foreign Origin: 403" || ko "h2c: foreign Origin" "$out"
out=$(peer unknown "$url")
[ $? -eq 0 ] && ok "h2c: unknown Acp-Connection-Id (POST, GET, DELETE) and another path: 404" ||
  ko "h2c: 404s" "$out"
out=$(peer toobig "$url" 2000000)
[ $? -eq 0 ] && ok "h2c: oversized POST: 413, the session goes on" || ko "h2c: 413" "$out"
out=$(peer nojson "$url")
[ $? -eq 0 ] && ok "h2c: POST not JSON: 415" || ko "h2c: 415" "$out"
out=$(peer garbage "$url")
[ $? -eq 0 ] && ok "h2c: garbage after the preface: GOAWAY and close" || ko "h2c: garbage" "$out"

out=$(peer idle "$url")
[ $? -eq 0 ] && ok "h2c: a connection without streams is closed after a while (GOAWAY)" ||
  ko "h2c: idle connection" "$out"

# ---- RST_STREAM of the SSE stream mid-turn ------------------------------------
out=$(peer rst "$url")
rc=$?
cid=$(printf '%s' "$out" | sed -n 's/.*"cid":"\([^"]*\)".*/\1/p')
apid=$(agent_stopped "$work/serve.log" "$cid")
gone=$?
if [ $rc -eq 0 ] && [ -n "$cid" ] && [ $gone -eq 0 ]; then
  ok "h2c: RST_STREAM of the SSE stream mid-turn stops its agent (pid $apid)"
else
  ko "h2c: RST_STREAM mid-turn" "$out" "agent $apid" "$(tail -5 "$work/serve.log")"
fi
out=$(peer echo "$url")
[ $? -eq 0 ] && ok "h2c: the server keeps serving after the faults" || ko "h2c: serving after faults" "$out"

# ---- backpressure: a reader that grants no window -----------------------------
# flood_agent.py answers a prompt with 64 KiB updates forever, with blocking
# writes; the client stops reading its SSE stream at the first one.
serve_h2 "$work/serve3.log" -- python3 "$here/flood_agent.py"
node "$here/h2_peer.mjs" slow "$url" 0 >"$work/slow.out" 2>&1 &
slow_pid=$!
pids="$pids $slow_pid"
cid=""
for _ in $(seq 1 400); do
  cid=$(sed -n 's/.*"cid":"\([^"]*\)".*/\1/p' "$work/slow.out")
  [ -n "$cid" ] && break
  sleep 0.05
done
apid=$(grep "connection $cid: agent pid" "$work/serve3.log" | sed 's/.*agent pid //')
# The agent blocks in write(2) on its stdout and stays so: nothing reads
# its pipe while the SSE stream has no window.
blocked_writing "$apid"
held_rss "$serve_pid" # 0 under valgrind and ASan: the blocked agent is the evidence there
if [ -n "$cid" ] && [ $blocked -ge 20 ] && [ "${rss:-999999}" -lt 24576 ]; then
  ok "h2c: a reader that grants no window stops its agent (blocked writing; server RSS ${rss} KiB)"
else
  ko "h2c: backpressure" "cid=$cid agent=$apid blocked=$blocked rss=${rss}KiB" "$(cat "$work/slow.out")"
fi
kill "$slow_pid" 2>/dev/null; wait "$slow_pid" 2>/dev/null
apid2=$(agent_stopped "$work/serve3.log" "$cid")
[ $? -eq 0 ] && ok "h2c: the dropped TCP connection ends its ACP connection (agent $apid2 stopped)" ||
  ko "h2c: dropped connection" "agent $apid2" "$(tail -5 "$work/serve3.log")"
stop_serve "$serve_pid" "the flooded server" "$work/serve3.log"

# ---- the stall timeout per stream: a reader that grants no window ---------------
# The same reader against --stall-timeout 300 (issue 14): it keeps reading
# the socket, so only the per-stream rule can see the stall. The server
# resets the paused stream (RST_STREAM CANCEL) and stops its agent; the
# HTTP/2 session goes on (a new initialize on it: 200), and so does serve.
serve_h2 "$work/serve4.log" --stall-timeout 300 -- python3 "$here/flood_agent.py"
out=$(peer stall "$url" 0)
rc=$?
cid=$(printf '%s' "$out" | sed -n 's/.*"cid":"\([^"]*\)".*/\1/p' | head -1)
apid=$(agent_stopped "$work/serve4.log" "$cid")
gone=$?
if [ $rc -eq 0 ] && [ -n "$cid" ] && [ $gone -eq 0 ]; then
  ok "h2c: a stream given no window is reset after --stall-timeout, its agent stopped (pid $apid), the session goes on"
else
  ko "h2c: per-stream stall" "$out" "agent $apid" "$(tail -5 "$work/serve4.log")"
fi
out=$(peer status "$url" 200)
[ $? -eq 0 ] && ok "h2c: the server keeps serving after a stalled stream" ||
  ko "h2c: serving after a stalled stream" "$out"
stop_serve "$serve_pid" "the stalled server" "$work/serve4.log"
stop_serve "$main_pid" "the first server" "$work/serve.log"

# ---- POSTs wait while the agent's stdin is backed up ---------------------------
mkdir -p "$work/hold"
serve_h2 "$work/serve-hold.log" -- sh -c "read l; printf '%s\n' '{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1}}'; while [ ! -e '$work/hold/go' ]; do sleep 0.05; done; cat >'$work/hold/got'"
out=$(peer hold "$url" "$work/hold")
[ $? -eq 0 ] && ok "h2c: POSTs are held while the agent does not read (503 past the cap), then delivered whole" ||
  ko "h2c: held POSTs" "$out" "$(tail -5 "$work/serve-hold.log")"
stop_serve "$serve_pid" "the holding server" "$work/serve-hold.log"
serve_h2 "$work/serve-gone.log" -- sh -c "read l; printf '%s\n' '{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1}}'; exec sleep 600"
out=$(peer gone "$url")
[ $? -eq 0 ] && ok "h2c: held POSTs are answered 410 when their connection ends" ||
  ko "h2c: held POSTs at the end of the connection" "$out" "$(tail -5 "$work/serve-gone.log")"
stop_serve "$serve_pid" "the server of the ended connection" "$work/serve-gone.log"
# Nothing reads: the held ones get 503 once their hold timeout is up
# (--hold-timeout 300 ms; the peer waits for the answers, no timing is
# checked), over HTTP/2 and over HTTP/1.1 on the same port.
serve_h2 "$work/serve-expire.log" --hold-timeout 300 -- sh -c "read l; printf '%s\n' '{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1}}'; exec sleep 600"
for v in h2 h1; do
  out=$(peer expire "$url" $v)
  [ $? -eq 0 ] && ok "$v: held POSTs are answered 503 once --hold-timeout is up when the agent never reads ($out)" ||
    ko "$v: held POSTs past their deadline" "$out" "$(tail -5 "$work/serve-expire.log")"
done
stop_serve "$serve_pid" "the server of the expired POSTs" "$work/serve-expire.log"

# ---- session grace: an SSE stream reset mid-turn cancels the turn --------------
: >"$work/ag.in"; : >"$work/ag.out"
serve_h2 "$work/serve-grace.log" --session-grace 30000 -- \
  sh -c "tee -a '$work/ag.in' | '$acp' agent | tee -a '$work/ag.out'"
out=$(peer rst "$url")
sid=$(grep -o '"sessionId":"[^"]*"' "$work/ag.in" | head -1)
seen=0
for _ in $(seq 1 200); do
  if [ -n "$sid" ] && grep '"session/cancel"' "$work/ag.in" | grep -qF "$sid" &&
     grep -q '"stopReason":"cancelled"' "$work/ag.out"; then seen=1; break; fi
  sleep 0.05
done
if [ "$seen" = 1 ] && grep -q "cancelled the turn of session" "$work/serve-grace.log"; then
  ok "h2c, --session-grace: the SSE stream reset mid-turn; the agent got session/cancel and ended the turn cancelled"
else
  ko "h2c: session grace cancel" "$out" "$(tail -5 "$work/serve-grace.log")" \
    "agent in: $(cut -c1-200 "$work/ag.in")" "agent out: $(cut -c1-200 "$work/ag.out")"
fi
stop_serve "$serve_pid" "the server with a grace" "$work/serve-grace.log"

# ---- Ctrl-C mid-turn, our client over HTTP/2 ------------------------------------
# acp client --http --h2 sends session/cancel (a POST on its own stream,
# with Acp-Session-Id) while the turn waits for it: the agent sees the
# cancel, ends the turn with stopReason "cancelled", and the client exits 3.
: >"$work/cx.in"; : >"$work/cx.out"
serve_h2 "$work/serve-cx.log" -- \
  sh -c "tee -a '$work/cx.in' | '$acp' agent | tee -a '$work/cx.out'"
$wrap "$acp" client --verbose --url "$url" --http --h2 -p "/wait" \
  >"$work/cx.cout" 2>"$work/cx.cerr" </dev/null &
cx_pid=$!
pids="$pids $cx_pid"
for _ in $(seq 1 600); do
  grep -q "waiting for session/cancel" "$work/cx.cout" && break
  sleep 0.05
done
kill -INT "$cx_pid" 2>/dev/null
wait "$cx_pid"
rc=$?
sid=$(grep -o '"sessionId":"[^"]*"' "$work/cx.in" | head -1)
seen=0
for _ in $(seq 1 200); do
  if [ -n "$sid" ] && grep '"session/cancel"' "$work/cx.in" | grep -qF "$sid" &&
     grep '"stopReason":"cancelled"' "$work/cx.out" | grep -q '"result"'; then seen=1; break; fi
  sleep 0.05
done
if [ $rc -eq 3 ] && [ "$seen" = 1 ] && grep -q "connected over HTTP/2" "$work/cx.cerr"; then
  ok "acp client --h2 -> acp serve: Ctrl-C mid-turn, the agent got session/cancel and ended the turn cancelled (exit 3)"
else
  ko "acp client --h2: cancel mid-turn" "exit $rc" "$(cat "$work/cx.cout")" "$(tail -5 "$work/cx.cerr")" \
    "agent in: $(cut -c1-200 "$work/cx.in")" "agent out: $(cut -c1-200 "$work/cx.out")"
fi
stop_serve "$serve_pid" "the server of the cancelled turn" "$work/serve-cx.log"

# ---- tokens -------------------------------------------------------------------
serve_h2 "$work/serve2.log" --token s3cret -- "$acp" agent
out=$(peer status "$url" 401)
[ $? -eq 0 ] && ok "h2c: no token: 401" || ko "h2c: no token" "$out"
out=$(peer status "$url" 401 wrong)
[ $? -eq 0 ] && ok "h2c: wrong token: 401" || ko "h2c: wrong token" "$out"
out=$(peer status "$url" 200 s3cret)
[ $? -eq 0 ] && ok "h2c: right token: 200" || ko "h2c: right token" "$out"

# ---- shutdown with an HTTP/2 client connected: GOAWAY, the server exits --------
node "$here/h2_peer.mjs" slow "$url" 1000 >"$work/idle.out" 2>&1 &
idle_pid=$!
pids="$pids $idle_pid"
for _ in $(seq 1 400); do
  grep -q '"cid"' "$work/idle.out" && break
  sleep 0.05
done
stop_serve "$serve_pid" "h2c: with an HTTP/2 client connected (GOAWAY)" "$work/serve2.log"
kill "$idle_pid" 2>/dev/null; wait "$idle_pid" 2>/dev/null

# Sanitizer reports (an ASan build as ACP_BIN) in any server's log.
check_serve_logs
finish
