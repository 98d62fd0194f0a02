# remote-common.sh - the setup the remote ACP interop scripts share, sourced
# by run-remote-interop.sh, run-remote-tls.sh, run-remote-h2.sh,
# run-haproxy.sh and run-remote-order.sh (not a test by itself: no run-
# prefix). It gives the caller:
#   here root acp wrap   the script's folder, the repo, ACP_BIN (default
#                        build/acp), ACP_VALGRIND_WRAP (prefix of every
#                        acp serve started here)
#   work pids            a temp folder and the processes to stop; both go
#                        at exit (serve_pids: the acp serve ones)
#   ok NAME / ko NAME [DETAIL...]   PASS / FAIL lines, counted
#   start_serve LOG [ARGS...]       acp serve --listen 127.0.0.1:0 --verbose
#                        ARGS, stderr to LOG; waits for its URL and sets
#                        port, serve_pid, serve_url (http:// or https://)
#   free_port            a free loopback port (for a process that needs
#                        one before it starts, e.g. HAProxy)
#   wait_log FILE PATTERN  waits (10 s at most) for a line a server logs
#                        at an event, maybe after the client exited
#   check_serve_logs     stops the acp serve processes and fails on a
#                        sanitizer report in their logs ($work/serve*.log),
#                        or, under ACP_VALGRIND_WRAP, on valgrind's lines
#   finish               prints the counts; its status is the script's
# Needs node (exit 77 without it, as every one of these scripts does).
# shellcheck shell=sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
wrap=${ACP_VALGRIND_WRAP:-}
# acp runs its remote commands and the terminal client in acp-remote
# (exec): under valgrind, follow that exec, and only it (acp processes they
# spawn, node and the shells stay as before: not under this valgrind).
case $wrap in
*valgrind*--trace-children=yes*) ;;
*valgrind*) wrap="$wrap --trace-children=yes --trace-children-skip=*/acp,*/node,*/sh,*/dash,*/bash,*/env,*/python3*,*/timeout,*/cat,*/sleep" ;;
esac
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed"; exit 77; }
work=$(mktemp -d)
pids=""
serve_pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

start_serve() {
  log=$1; shift
  # shellcheck disable=SC2086
  $wrap "$acp" serve --listen 127.0.0.1:0 --verbose "$@" 2>"$log" &
  serve_pid=$!
  pids="$pids $serve_pid"
  serve_pids="$serve_pids $serve_pid"
  port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's/.*listening on wss\{0,1\}:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$log")
    if [ -n "$port" ]; then
      if grep -q 'listening on wss:' "$log"; then
        serve_url="https://127.0.0.1:$port/acp"
      else
        serve_url="http://127.0.0.1:$port/acp"
      fi
      return 0
    fi
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "acp serve did not start:"; cat "$log"; exit 1
}

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close();});'
}

wait_log() {
  for _ in $(seq 1 200); do
    grep -q "$2" "$1" && return 0
    sleep 0.05
  done
  return 1
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

finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
