# remote-common.sh - the setup the remote ACP interop scripts share, sourced
# by run-remote-interop.sh, run-remote-tls.sh, run-remote-h2.sh,
# run-haproxy.sh and run-remote-order.sh (not a test by itself: no run-
# prefix). On top of tests/lib/common.sh (here root work pids skip need_cmd
# ok ko finish wait_for start_bg ...: see there) it gives the caller:
#   acp wrap             ACP_BIN (default build/acp), ACP_VALGRIND_WRAP
#                        (prefix of every acp serve started here)
#   serve_pids           the acp serve processes (also in pids)
#   start_serve LOG [ARGS...]       acp serve --listen 127.0.0.1:0 --verbose
#                        ARGS, stderr to LOG; waits for its URL and sets
#                        port, serve_pid, serve_url (http:// or https://)
#   free_port            a free loopback port (for a process that needs
#                        one before it starts, e.g. HAProxy)
#   wait_log FILE PATTERN  waits (10 s at most) for a line a server logs
#                        at an event, maybe after the client exited
#   full_turn FILE TEXT ARGS...  acp client --yes --cwd $work ARGS (the URL,
#                        transport, CA ...) with a turn in which the agent
#                        asks permission, reads $work/served.txt (made if
#                        missing) and writes TEXT to $work/FILE; status 0
#                        when all three happened and the client exited 0;
#                        turn_out its stdout, turn_rc its status, its
#                        stderr in $work/turn.err
#   check_serve_logs     stops the acp serve processes and fails on a
#                        sanitizer report in their logs ($work/serve*.log),
#                        or, under ACP_VALGRIND_WRAP, on valgrind's lines
# Needs node (exit 77 without it, as every one of these scripts does).
# shellcheck shell=sh
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
acp=${ACP_BIN:-$root/build/acp}
wrap=${ACP_VALGRIND_WRAP:-}
# acp runs its remote commands and the terminal client in acp-remote
# (exec): under valgrind, follow that exec, and only it (acp processes they
# spawn, node and the shells stay as before: not under this valgrind).
case $wrap in
*valgrind*--trace-children=yes*) ;;
*valgrind*) wrap="$wrap --trace-children=yes --trace-children-skip=*/acp,*/node,*/sh,*/dash,*/bash,*/env,*/python3*,*/timeout,*/cat,*/sleep" ;;
esac
need_cmd node
serve_pids=""

start_serve() {
  log=$1
  shift
  # shellcheck disable=SC2086
  start_bg "$log" 'listening on wss\{0,1\}://127\.0\.0\.1:[0-9]*/acp' \
    $wrap "$acp" serve --listen 127.0.0.1:0 --verbose "$@"
  serve_pid=$bg_pid
  serve_pids="$serve_pids $serve_pid"
  port=$(sed -n 's/.*listening on wss\{0,1\}:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$log" | head -1)
  if grep -q 'listening on wss:' "$log"; then
    serve_url="https://127.0.0.1:$port/acp"
  else
    serve_url="http://127.0.0.1:$port/acp"
  fi
}

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();});'
}

wait_log() { wait_for "$1" "$2" 100; }

full_turn() {
  t_file=$1 t_text=$2
  shift 2
  [ -f "$work/served.txt" ] || echo "served file" >"$work/served.txt"
  rm -f "$work/$t_file"
  # shellcheck disable=SC2086
  turn_out=$(timeout 60 $wrap "$acp" client --yes --cwd "$work" "$@" -p "/ask:edit change it
/read served.txt
/write $t_file $t_text" 2>"$work/turn.err")
  turn_rc=$?
  [ $turn_rc -eq 0 ] && grep -q "\[permission\]" "$work/turn.err" &&
    grep -q "\[fs\] read" "$work/turn.err" &&
    [ "$(cat "$work/$t_file" 2>/dev/null)" = "$t_text" ]
}

# blocked_writing PID: wait (30 s at most) until PID has been seen blocked
# in write(2) on its stdout 20 samples in a row; $blocked is the count.
blocked_writing() {
  blocked=0
  for _ in $(seq 1 600); do
    sc=$(cut -d' ' -f1,2 "/proc/$1/syscall" 2>/dev/null)
    if [ "$sc" = "1 0x1" ]; then blocked=$((blocked + 1)); else blocked=0; fi
    [ $blocked -ge 20 ] && break
    sleep 0.05
  done
}

# held_rss PID: $rss, its resident KiB; 0 under valgrind or ASan, whose own
# memory (shadow, the quarantine of freed blocks: 76 MiB was seen in CI)
# grows with the allocations made, not with what is held.
held_rss() {
  rss=$(sed -n 's/^VmRSS:[^0-9]*\([0-9]*\).*/\1/p' "/proc/$1/status")
  [ -n "$wrap" ] && rss=0
  ldd "$acp" 2>/dev/null | grep -q libasan && rss=0
}

check_serve_logs() {
  for p in $serve_pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  set -- "$work"/serve*.log
  [ -e "$1" ] || return 0
  if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$@"; then
    ko "acp serve under sanitizers" "$(grep -hE -A12 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$@" | head -40)"
  fi
  if [ -n "$wrap" ]; then
    if grep -q '^==[0-9]*== ' "$@"; then
      ko "acp serve under $wrap" "$(grep '^==[0-9]*== ' "$@" | head -20)"
    else
      ok "acp serve clean under $wrap"
    fi
  fi
}
