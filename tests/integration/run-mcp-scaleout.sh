#!/bin/sh
# run-mcp-scaleout.sh - the scale-out deployment of examples/deploy/: nginx
# (started unprivileged-capable, on 127.0.0.1, everything in a temp dir) in
# front of two `acp mcp serve --http --worker-id` workers, driven with curl.
#   (a) 2026-07-28 stateless tools/call requests spread over both workers;
#   (b) a 2025 session initialized through nginx stays on the worker that
#       created it (its id names it) for several requests;
#   (c) one worker killed: stateless requests keep succeeding on the other
#       (nginx retries connect failures), the killed worker's session gets
#       404 "Session not found" from the backup worker, the other worker's
#       session still works, and a re-initialize works.
# The nginx config is examples/deploy/nginx.conf itself, with its ports,
# pid, logs and temp paths rewritten into the temp dir.
#
# Usage: run-mcp-scaleout.sh [path/to/acp]   (or ACP_BIN)
# Exit status: 0 all passed, 1 some failed, 77 skipped (acp not built, or
# nginx / curl / python3 not installed).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${1:-${ACP_BIN:-$root/build/acp}}
if [ ! -x "$acp" ]; then
  echo "SKIP: $acp is not built"
  exit 77
fi
nginx=$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; })
if [ -z "$nginx" ]; then
  echo "SKIP: nginx is not installed (Debian package nginx)"
  exit 77
fi
for tool in curl python3 grep sed; do
  command -v $tool >/dev/null 2>&1 || { echo "SKIP: $tool missing"; exit 77; }
done

work=$(mktemp -d)
# nginx's worker processes run as `nobody` when the master is root: they
# must reach the temp dir.
chmod 755 "$work"
pids=""
ngx_pid=""
cleanup() {
  for p in $pids $ngx_pid; do kill "$p" 2>/dev/null; done
  for p in $pids $ngx_pid; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# Start worker NAME; sets $port_NAME and $pid_NAME.
start_worker() {
  "$acp" mcp serve --http 127.0.0.1:0 --worker-id "$1" 2>"$work/$1.log" &
  eval "pid_$1=$!"
  pids="$pids $!"
  i=0
  while ! grep -q "serving http" "$work/$1.log" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 100 ]; then echo "FAIL worker $1 did not start"; cat "$work/$1.log"; exit 1; fi
    sleep 0.1
  done
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
    access_log $work/access.log;\\
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

# --- (c) a worker dies ---
kill "$pid_w1"
wait "$pid_w1" 2>/dev/null
pids=$(echo "$pids" | sed "s/ $pid_w1//")
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

if [ $fails -gt 0 ]; then
  echo "--- nginx error.log"; cat "$work/error.log" 2>/dev/null | tail -20
  echo "$fails check(s) failed"
  exit 1
fi
echo "all passed"
