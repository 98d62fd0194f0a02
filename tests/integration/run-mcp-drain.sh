#!/bin/sh
# run-mcp-drain.sh - stopping `acp mcp serve --http` with a call running:
#   (a) one server, --drain-timeout 3600000: a 2026 call that runs for an
#       hour (slow_compute, held because the client did not ask for a task;
#       its "started" progress says it runs); the first SIGTERM starts the
#       drain and the server stays up (the drain would last an hour); a
#       second SIGTERM stops it at once: exit 0, the call's client gets an
#       error, never the result;
#   (b) --drain-timeout 0: one SIGTERM stops at once with a call running;
#   (c) --workers 1 --drain-timeout 3600000: the supervisor forwards both
#       signals; the worker stops on the second one, the supervisor exits 0
#       without resorting to SIGKILL;
#   (d) bad --drain-timeout values exit 2.
# "At once" is shown by events, not time: with an hour-long drain the only
# way out is the second signal; waits below are liveness bounds (30 s).
#
# Usage: run-mcp-drain.sh [path/to/acp]   (or ACP_BIN)
# Exit status: 0 all passed, 1 some failed, 77 skipped.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp "${1:-}"
kill_sig=KILL

# start_server LOG ARGS...: acp mcp serve --everything --http ARGS in the
# background; sets $srv and $url.
start_server() {
  log=$1
  shift
  start_bg "$log" "serving http" "$acp" mcp serve --everything --http "$@"
  srv=$bg_pid
  url=$(sed -n 's/.*serving \(http:[^ ]*\).*/\1/p' "$log")
}

# start_call NAME: an hour-long 2026 call; returns once it runs.
start_call() {
  "$acp" mcp call --protocol 2026-07-28 --timeout 0 --url "$url" slow_compute \
    seconds=3600 label=L >"$work/$1.out" 2>"$work/$1.err" </dev/null &
  cpid=$!
  pids="$pids $cpid"
  wait_for "$work/$1.err" "progress:.*started"
}

# (d) the command line.
"$acp" mcp serve --http 127.0.0.1:0 --drain-timeout x 2>"$work/e1"
[ $? -eq 2 ] && grep -q "drain-timeout wants" "$work/e1" &&
  pass "--drain-timeout x: exit 2" || fail "--drain-timeout x: exit 2"
"$acp" mcp serve --drain-timeout 10 </dev/null 2>"$work/e2"
[ $? -eq 2 ] && grep -q "needs --http" "$work/e2" &&
  pass "--drain-timeout without --http: exit 2" ||
  fail "--drain-timeout without --http: exit 2"

# (a) a second SIGTERM cuts the drain short.
start_server "$work/a.log" 127.0.0.1:0 --drain-timeout 3600000
if start_call a; then
  pass "the hour-long call runs"
else
  fail "the hour-long call runs: $(cat "$work/a.err")"
fi
kill -TERM "$srv"
wait_for "$work/a.log" "acp mcp: stopping" &&
  pass "first SIGTERM: draining" || fail "first SIGTERM: draining"
if kill -0 "$srv" 2>/dev/null && kill -0 "$cpid" 2>/dev/null; then
  pass "the server drains: still up, the call still open"
else
  fail "the server drains: still up, the call still open"
fi
kill -TERM "$srv"
if wait_gone "$srv"; then
  wait "$srv"
  rc=$?
  [ $rc = 0 ] && pass "second SIGTERM: stopped, exit 0" ||
    fail "second SIGTERM: exit $rc"
else
  fail "second SIGTERM: the server is still running"
fi
grep -q "second signal: stopping now" "$work/a.log" &&
  pass "second SIGTERM logged" || fail "second SIGTERM logged"
if wait_gone "$cpid"; then
  wait "$cpid"
  rc=$?
  if [ $rc = 1 ] && ! grep -q "Computed" "$work/a.out"; then
    pass "the call's client got an error (exit 1), no result"
  else
    fail "the call's client: exit $rc, $(cat "$work/a.out" "$work/a.err")"
  fi
else
  fail "the call's client is still waiting"
fi

# (b) --drain-timeout 0: no drain.
start_server "$work/b.log" 127.0.0.1:0 --drain-timeout 0
start_call b || fail "(b) the call runs: $(cat "$work/b.err")"
kill -TERM "$srv"
if wait_gone "$srv"; then
  wait "$srv"
  rc=$?
  [ $rc = 0 ] && pass "--drain-timeout 0: one SIGTERM stops at once" ||
    fail "--drain-timeout 0: exit $rc"
else
  fail "--drain-timeout 0: the server is still running"
fi
grep -q "second signal: stopping now" "$work/b.log" && fail "--drain-timeout 0: no second signal needed"

# (c) --workers: both signals forwarded.
log="$work/c.log"
"$acp" mcp serve --everything --http 127.0.0.1:0 --workers 1 \
  --drain-timeout 3600000 2>"$log" </dev/null &
sup=$!
pids="$pids $sup"
if ! wait_for "$log" "serving http" || ! wait_for "$log" "worker w1 ready"; then
  echo "FAIL the workers did not start"
  cat "$log"
  exit 1
fi
wpid=$(sed -n 's/.*worker w1 ready (pid \([0-9]*\)).*/\1/p' "$log" | tail -n 1)
port=$(sed -n 's/.*serving http:[^ ]*:\([0-9]*\)\/mcp.*/\1/p' "$log")
url="http://127.0.0.1:$port/mcp"
start_call c || fail "(c) the call runs: $(cat "$work/c.err")"
kill -TERM "$sup"
wait_for "$log" "acp mcp: stopping (open" &&
  pass "workers: the first SIGTERM reached the worker" ||
  fail "workers: the first SIGTERM reached the worker"
kill -0 "$wpid" 2>/dev/null && pass "workers: the worker drains" ||
  fail "workers: the worker drains"
kill -TERM "$sup"
if wait_gone "$sup"; then
  wait "$sup"
  rc=$?
  [ $rc = 0 ] && pass "workers: second SIGTERM: supervisor exit 0" ||
    fail "workers: supervisor exit $rc"
else
  fail "workers: the supervisor is still running"
fi
grep -q "second signal: stopping now" "$log" &&
  pass "workers: the worker got the second signal" ||
  fail "workers: the worker got the second signal"
grep -q "SIGKILL" "$log" && fail "workers: the supervisor had to SIGKILL"
kill -0 "$wpid" 2>/dev/null && fail "workers: the worker pid is still there"

if [ $fail -ne 0 ]; then
  for f in a b c; do echo "--- $f.log"; cat "$work/$f.log"; done
fi
finish
