#!/bin/sh
# run-mcp-scaleout.sh - the scale-out deployment of examples/deploy/: nginx
# (started unprivileged-capable, on 127.0.0.1, everything in a temp dir) in
# front of two `acp mcp serve --http --worker-id` workers, driven with curl.
#   (a) 2026-07-28 stateless tools/call requests spread over both workers;
#   (b) a 2025 session initialized through nginx stays on the worker that
#       created it (its id names it) for several requests;
#   (d) SSE through nginx: a 2026 subscriptions/listen gets its
#       acknowledgement and then keep-alive comments (--sse-keepalive 100),
#       a 2025 tools/call `ping` on w1's session gets the server's ping
#       request on its SSE response;
#   (e) requests in flight on a killed worker: w1 is stopped (SIGSTOP),
#       two stateless calls go out (one per worker), w1 is SIGKILLed: the
#       one held by w1 gets nginx's 502 at once (not a hang) and was passed
#       to one upstream only (the access log's $upstream_addr: a POST is
#       never resent, so a tool never runs twice), the other is answered by
#       w2; the in-flight SSE response of w1's session ends with a transfer
#       error (not a hang);
#   (c) with w1 dead: stateless requests keep succeeding on the other
#       (nginx retries connect failures), the killed worker's session gets
#       404 "Session not found" from the backup worker, the other worker's
#       session still works, and a re-initialize works.
# The nginx config is examples/deploy/nginx.conf itself, with its ports,
# pid, logs and temp paths rewritten into the temp dir.
#
# Usage: run-mcp-scaleout.sh [path/to/acp]   (or ACP_BIN)
# Exit status: 0 all passed, 1 some failed, 77 skipped (acp not built, or
# nginx / curl / python3 not installed).
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp "${1:-}"
nginx=$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; })
[ -n "$nginx" ] || skip "nginx is not installed (Debian package nginx)"
for tool in curl python3 grep sed; do need_cmd $tool; done

# nginx's worker processes run as `nobody` when the master is root: they
# must reach the temp dir.
chmod 755 "$work"
# nginx (started and stopped by the checks, then cleared) and the
# background clients; the workers are in pids.
ngx_pid=""
bg_pids=""
cleanup_extra() {
  for p in $bg_pids $ngx_pid; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
  for p in $bg_pids $ngx_pid; do wait "$p" 2>/dev/null; done
}

# Start worker NAME; sets $port_NAME and $pid_NAME.
start_worker() {
  start_bg "$work/$1.log" "serving http" "$acp" mcp serve --http 127.0.0.1:0 \
    --worker-id "$1" --sse-keepalive 100
  eval "pid_$1=$bg_pid"
  eval "port_$1=$(sed -n 's/.*serving http:[^ ]*:\([0-9]*\)\/mcp.*/\1/p' "$work/$1.log")"
}
start_worker w1
start_worker w2

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The example config with this run's ports and paths. worker_processes 1
# makes nginx's round robin one sequence (with several nginx processes each
# has its own, and a test could see every request land on one worker).
start_nginx() {
  nport=$(free_port)
  sed -e "s/127\.0\.0\.1:8101/127.0.0.1:$port_w1/g" \
      -e "s/127\.0\.0\.1:8102/127.0.0.1:$port_w2/g" \
      -e "s/127\.0\.0\.1:8100/127.0.0.1:$nport/" \
      -e "s/^worker_processes .*/worker_processes 1;/" \
      -e "s|^http {|http {\\
    log_format up '\$status \$upstream_addr \$request_time';\\
    access_log $work/access.log up;\\
    client_body_temp_path $work/client_body;\\
    proxy_temp_path $work/proxy;\\
    fastcgi_temp_path $work/fastcgi;\\
    uwsgi_temp_path $work/uwsgi;\\
    scgi_temp_path $work/scgi;|" \
      "$root/examples/deploy/nginx.conf" >"$work/nginx.conf"
  "$nginx" -p "$work" -c "$work/nginx.conf" \
    -g "daemon off; pid $work/nginx.pid; error_log $work/error.log;" \
    2>>"$work/nginx.stderr" &
  ngx_pid=$!
  i=0
  while [ $i -lt 100 ]; do
    kill -0 "$ngx_pid" 2>/dev/null || return 1
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$nport/" 2>/dev/null)
    [ "$code" != "000" ] && return 0
    i=$((i + 1))
    sleep 0.1
  done
  return 1
}
tries=0
until start_nginx; do
  # The free port may have been taken in between: try another one.
  wait "$ngx_pid" 2>/dev/null
  ngx_pid=""
  tries=$((tries + 1))
  if [ $tries -ge 3 ]; then
    echo "FAIL nginx did not start"
    cat "$work/nginx.stderr" "$work/error.log" 2>/dev/null
    exit 1
  fi
done
url="http://127.0.0.1:$nport/mcp"

# post [SESSION] BODY [HEADER...]: POST through nginx; sets $code, $worker
# (X-Acp-Worker), $sid (MCP-Session-Id of the answer) and leaves the body in
# $work/body.
post() {
  s=$1
  b=$2
  shift 2
  if [ -n "$s" ]; then set -- "$@" -H "MCP-Session-Id: $s"; fi
  code=$(curl -s -o "$work/body" -D "$work/hdr" -w '%{http_code}' \
    -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    "$@" --data-binary "$b" "$url")
  worker=$(tr -d '\r' <"$work/hdr" | sed -n 's/^[Xx]-[Aa]cp-[Ww]orker: //p')
  sid=$(tr -d '\r' <"$work/hdr" | sed -n 's/^[Mm][Cc][Pp]-[Ss]ession-[Ii]d: //p')
}
META26='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
call26() {
  post "" "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"m$1\"},$META26}}" \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo'
}
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"scaleout","version":"1"}}}'
# initialize, then notifications/initialized; sets $sid and $worker.
init25() {
  post "" "$INIT"
  [ "$code" = 200 ] || return 1
  isid=$sid
  iworker=$worker
  post "$isid" '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    -H 'MCP-Protocol-Version: 2025-11-25'
  [ "$code" = 202 ] || return 1
  sid=$isid
  worker=$iworker
}
# call25 SESSION ID: tools/call echo in a 2025 session.
call25() {
  post "$1" "{\"jsonrpc\":\"2.0\",\"id\":$2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"s$2\"}}}" \
    -H 'MCP-Protocol-Version: 2025-11-25'
}

# --- (a) stateless requests spread over both workers ---
n1=0
n2=0
bad=0
for k in 1 2 3 4 5 6 7 8; do
  call26 $k
  if [ "$code" = 200 ] && grep -q "\"text\":\"m$k\"" "$work/body"; then
    case $worker in w1) n1=$((n1 + 1)) ;; w2) n2=$((n2 + 1)) ;; *) bad=$((bad + 1)) ;; esac
  else
    bad=$((bad + 1))
    echo "  request $k: HTTP $code: $(head -c 300 "$work/body")"
  fi
done
if [ $bad = 0 ] && [ $n1 -gt 0 ] && [ $n2 -gt 0 ]; then
  pass "2026 stateless calls spread over both workers (w1: $n1, w2: $n2)"
else
  fail "2026 stateless calls spread (w1: $n1, w2: $n2, failed: $bad)"
fi

# --- (b) 2025 sessions stay on their worker ---
sid_w1=""
sid_w2=""
k=0
while [ $k -lt 6 ] && { [ -z "$sid_w1" ] || [ -z "$sid_w2" ]; }; do
  k=$((k + 1))
  if init25; then
    case $sid in
      "$worker"-????????????????????????????????)
        case $worker in w1) sid_w1=$sid ;; w2) sid_w2=$sid ;; esac ;;
      *) fail "session id '$sid' does not name its worker '$worker'" ;;
    esac
  else
    fail "initialize through nginx: HTTP $code: $(head -c 300 "$work/body")"
  fi
done
if [ -n "$sid_w1" ] && [ -n "$sid_w2" ]; then
  pass "initialize through nginx opened a session on each worker"
else
  fail "no session on each worker after $k initializes (w1: '$sid_w1', w2: '$sid_w2')"
fi
for w in w1 w2; do
  eval "s=\$sid_$w"
  [ -n "$s" ] || continue
  ok=0
  for k in 11 12 13 14 15 16; do
    call25 "$s" $k
    if [ "$code" = 200 ] && [ "$worker" = "$w" ] &&
       grep -q "\"text\":\"s$k\"" "$work/body"; then
      ok=$((ok + 1))
    else
      echo "  $w session, request $k: HTTP $code from '$worker': $(head -c 300 "$work/body")"
    fi
  done
  if [ $ok = 6 ]; then
    pass "2025 session of $w: 6 calls, all answered by $w"
  else
    fail "2025 session of $w: $ok of 6 calls answered by $w"
  fi
done

# --- (d) SSE through nginx ---
bg_pids=""
curl -s -N -o "$work/listen" -D "$work/listen.hdr" \
  -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' \
  -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: subscriptions/listen' \
  --data-binary "{\"jsonrpc\":\"2.0\",\"id\":90,\"method\":\"subscriptions/listen\",\"params\":{$META26,\"notifications\":{\"toolsListChanged\":true}}}" \
  "$url" &
listen_pid=$!
bg_pids="$bg_pids $listen_pid"
if wait_for "$work/listen" "notifications/subscriptions/acknowledged" &&
   wait_for "$work/listen" "^: keep-alive"; then
  pass "2026 listen through nginx: acknowledgement, then keep-alive comments"
else
  fail "2026 listen through nginx: $(head -c 300 "$work/listen")"
fi
if [ -n "$sid_w1" ]; then
  # The ping tool pings the client (10 s timeout) on the POST's stream:
  # the request stays in flight on w1 while we do not answer.
  curl -s -N -o "$work/ping" -H "MCP-Session-Id: $sid_w1" \
    -H 'MCP-Protocol-Version: 2025-11-25' \
    -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    --data-binary '{"jsonrpc":"2.0","id":91,"method":"tools/call","params":{"name":"ping"}}' \
    "$url" &
  ping_pid=$!
  bg_pids="$bg_pids $ping_pid"
  if wait_for "$work/ping" '"method":"ping"'; then
    pass "2025 POST stream through nginx: the server's ping request arrives"
  else
    fail "2025 POST stream through nginx: $(head -c 300 "$work/ping")"
  fi
fi

# --- (e) requests in flight on a killed worker ---
# Stopped, w1 still takes connections (the kernel's backlog) and requests
# (socket buffers) but answers nothing: a request nginx passed to it is in
# flight there, before any response header.
kill -STOP "$pid_w1"
: >"$work/access.log"
for k in 1 2; do
  curl -s -o "$work/inflight$k" -D "$work/inflight$k.hdr" -w '%{http_code}' \
    -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' \
    -H 'Mcp-Name: echo' \
    --data-binary "{\"jsonrpc\":\"2.0\",\"id\":$((80 + k)),\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"f$k\"},$META26}}" \
    "$url" >"$work/inflight$k.code" &
  eval "inflight_pid$k=$!"
  bg_pids="$bg_pids $!"
done
# One of the two reached w2 and is answered; the other waits on w1.
i=0
while [ $i -lt 300 ] && [ ! -s "$work/inflight1.code" ] &&
      [ ! -s "$work/inflight2.code" ]; do
  i=$((i + 1)); sleep 0.1
done
kill -KILL "$pid_w1"
kill -CONT "$pid_w1" 2>/dev/null
wait "$pid_w1" 2>/dev/null
pids=$(echo "$pids" | sed "s/ $pid_w1//")
wait "$inflight_pid1" "$inflight_pid2"
c1=$(cat "$work/inflight1.code")
c2=$(cat "$work/inflight2.code")
case "$c1 $c2" in
  "200 502"|"502 200") pass "in flight on the killed w1: 502 (the other call: 200)" ;;
  *) fail "in flight on the killed w1: HTTP $c1 and $c2 (want 200 and 502)" ;;
esac
for k in 1 2; do
  if [ "$(cat "$work/inflight$k.code")" = 200 ]; then
    w=$(tr -d '\r' <"$work/inflight$k.hdr" | sed -n 's/^[Xx]-[Aa]cp-[Ww]orker: //p')
    if [ "$w" = w2 ] && grep -q "\"text\":\"f$k\"" "$work/inflight$k"; then
      pass "the other call was answered by w2"
    else
      fail "the other call: worker '$w': $(head -c 200 "$work/inflight$k")"
    fi
  fi
done
# nginx logged each request once; the 502's $upstream_addr names one
# upstream (a resent POST would list two, "A, B").
if grep -q "^502 127.0.0.1:$port_w1 " "$work/access.log" &&
   ! grep -q "^502 .*, " "$work/access.log"; then
  pass "the 502 request went to w1 only (never resent to w2)"
else
  fail "the 502 request's upstreams: $(cat "$work/access.log")"
fi
if [ -n "$sid_w1" ]; then
  wait "$ping_pid"
  rc=$?
  if [ $rc -ne 0 ] && ! grep -q '"id":91' "$work/ping"; then
    pass "the in-flight SSE response of w1's session ends with an error (curl $rc)"
  else
    fail "the in-flight SSE response of w1's session: curl $rc: $(head -c 300 "$work/ping")"
  fi
fi
case $(tr -d '\r' <"$work/listen.hdr" | sed -n 's/^[Xx]-[Aa]cp-[Ww]orker: //p') in
  w2) kill "$listen_pid" 2>/dev/null ;;
esac
wait "$listen_pid" 2>/dev/null

# --- (c) with w1 dead ---
ok=0
for k in 21 22 23 24 25 26; do
  call26 $k
  if [ "$code" = 200 ] && [ "$worker" = w2 ] &&
     grep -q "\"text\":\"m$k\"" "$work/body"; then
    ok=$((ok + 1))
  else
    echo "  request $k: HTTP $code from '$worker': $(head -c 300 "$work/body")"
  fi
done
if [ $ok = 6 ]; then
  pass "w1 killed: 6 of 6 stateless calls answered by w2"
else
  fail "w1 killed: $ok of 6 stateless calls answered by w2"
fi
if [ -n "$sid_w1" ]; then
  call25 "$sid_w1" 31
  if [ "$code" = 404 ] && grep -q "Session not found" "$work/body"; then
    pass "w1's session gets 404 Session not found (from backup w2)"
  else
    fail "w1's session after the kill: HTTP $code: $(head -c 300 "$work/body")"
  fi
fi
if [ -n "$sid_w2" ]; then
  call25 "$sid_w2" 32
  if [ "$code" = 200 ] && [ "$worker" = w2 ]; then
    pass "w2's session still works"
  else
    fail "w2's session after the kill: HTTP $code from '$worker'"
  fi
fi
if init25 && case $sid in w2-*) true ;; *) false ;; esac; then
  s=$sid
  call25 "$s" 33
  if [ "$code" = 200 ] && grep -q '"text":"s33"' "$work/body"; then
    pass "re-initialize after the kill: new session $(echo "$s" | cut -c1-3)... works"
  else
    fail "call in the new session: HTTP $code"
  fi
else
  fail "re-initialize after the kill: HTTP $code, id '$sid'"
fi

if [ $fail -gt 0 ]; then
  echo "--- nginx error.log"; cat "$work/error.log" 2>/dev/null | tail -20
fi
finish
