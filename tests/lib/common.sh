# common.sh - the setup every shell test shares, sourced (never run) by the
# scripts under tests/integration and tests/interop, so that each of them
# says only what it tests. Needs nothing but a POSIX shell and grep/sed; a
# script that needs node, curl, python3 ... asks for it with need_cmd (so a
# script that does not need node never skips for want of it).
#
# Source it first thing, with the path from the script's own folder:
#   . "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
#
# It gives the caller:
#   here root            the script's folder and the repository (found by
#                        looking up from here for tests/lib/common.sh)
#   work                 a temp folder, removed at exit
#   pids                 processes to stop at exit (append with
#                        pids="$pids $!"); at exit each is sent SIGCONT (in
#                        case a test stopped it), then $kill_sig (default
#                        TERM; a script may set kill_sig=KILL), then waited
#                        for. A script with more to undo defines
#                        cleanup_extra, run first.
#   skip REASON...       prints "SKIP: REASON" and exits 77
#   need_cmd TOOL [WHY]  skip unless TOOL is on PATH (WHY: e.g. which
#                        Debian package has it)
#   find_acp [PATH]      sets acp to PATH, else $ACP_BIN, else build/acp,
#                        made absolute; skip when it is not executable
#   ok NAME / ko NAME [DETAIL...]   PASS / FAIL lines, counted in pass/fail;
#                        pass NAME / fail NAME are the same two. ko prints
#                        each DETAIL indented, then the first 20 lines of
#                        each file named in ko_show (relative to $work,
#                        e.g. ko_show="out err": what the last command
#                        wrote), where it exists
#   finish [LABEL]       prints the counts (after "LABEL: "); its status is
#                        the script's (0 when nothing failed): end with it
#   need_peers           skip unless tools/install-peers.sh installs (or
#                        finds) the ACP TypeScript SDK peers
#   wait_until TENTHS CMD...  until CMD succeeds (checked every 0.1 s); 1
#                        after TENTHS checks
#   wait_for FILE PATTERN [TENTHS]  until grep finds PATTERN in FILE; 1 after
#                        TENTHS tenths of a second (default 300: 30 s, a
#                        liveness bound, not a timing check)
#   wait_gone PID [TENTHS]  until PID has exited; 1 if still there
#   stop_pid PID         kills PID (TERM), waits for it and takes it out
#                        of pids
#   start_bg LOG PATTERN CMD [ARGS...]  runs CMD in the background, stderr
#                        to LOG, stdin from /dev/null, adds it to pids, sets
#                        bg_pid, and waits until LOG has a line matching
#                        PATTERN (waiting $start_wait tenths of a second at
#                        most, default 300); when CMD exits first or never
#                        says it, prints the log and exits 1 (nothing else
#                        would work without it)
#   start_mcp_http LOG [ARGS...]  start_bg of `acp mcp serve --http
#                        127.0.0.1:0 ARGS`; sets url (http://.../mcp), port
#                        and mcp_pid
# shellcheck shell=sh
# shellcheck disable=SC2034 # what it sets is for the script that sources it
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$here
while [ ! -f "$root/tests/lib/common.sh" ] && [ "$root" != / ]; do
  root=$(dirname "$root")
done

skip() {
  echo "SKIP: $*"
  exit 77
}

need_cmd() {
  command -v "$1" >/dev/null 2>&1 || skip "$1 is not installed${2:+ ($2)}"
}

need_peers() {
  "$root/tools/install-peers.sh" >/dev/null 2>&1 ||
    skip "the ACP TypeScript SDK could not be installed (tools/install-peers.sh)"
}

find_acp() {
  acp=${1:-${ACP_BIN:-$root/build/acp}}
  case $acp in
  /*) ;;
  */*) acp=$(cd "$(dirname "$acp")" 2>/dev/null && pwd)/$(basename "$acp") ;;
  *) acp=$PWD/$acp ;;
  esac
  [ -x "$acp" ] || skip "$acp is not built"
}

work=$(mktemp -d)
pids=""
kill_sig=TERM
cleanup() {
  if command -v cleanup_extra >/dev/null 2>&1; then cleanup_extra; fi
  for p in $pids; do
    kill -CONT "$p" 2>/dev/null
    kill -"$kill_sig" "$p" 2>/dev/null
  done
  for p in $pids; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

pass=0
fail=0
ok() {
  pass=$((pass + 1))
  echo "PASS $1"
}
ko() {
  fail=$((fail + 1))
  echo "FAIL $1"
  shift
  for l in "$@"; do echo "     $l"; done
  for t_f in ${ko_show:-}; do
    [ -f "$work/$t_f" ] && sed "s/^/  $t_f: /" "$work/$t_f" | head -20
  done
  return 0
}
pass() { ok "$@"; }
fail() { ko "$@"; }
finish() {
  echo "${1:+$1: }$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}

# wait_until TENTHS CMD...: until CMD succeeds, checked every tenth of a
# second; 1 after TENTHS checks.
wait_until() {
  t_n=$1
  shift
  t_i=0
  until "$@"; do
    t_i=$((t_i + 1))
    [ $t_i -gt "$t_n" ] && return 1
    sleep 0.1
  done
  return 0
}
t_gone() { ! kill -0 "$1" 2>/dev/null; }
wait_for() { wait_until "${3:-300}" grep -qs -- "$2" "$1"; }
wait_gone() { wait_until "${2:-300}" t_gone "$1"; }

stop_pid() {
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  pids=$(echo " $pids " | sed "s/ $1 / /; s/^ *//; s/ *$//")
}

start_bg() {
  t_log=$1 t_pat=$2
  shift 2
  "$@" 2>"$t_log" </dev/null &
  bg_pid=$!
  pids="$pids $bg_pid"
  # Wait while the process lives: one that dies at once fails here, not
  # after the whole bound.
  wait_until "${start_wait:-300}" t_said_or_gone "$t_log" "$t_pat" "$bg_pid"
  grep -qs -- "$t_pat" "$t_log" && return 0
  echo "FAIL $1 did not start (no \"$t_pat\" in $t_log):"
  cat "$t_log"
  exit 1
}
t_said_or_gone() { grep -qs -- "$2" "$1" || t_gone "$3"; }

start_mcp_http() {
  t_mlog=$1
  shift
  start_bg "$t_mlog" "serving http" "$acp" mcp serve --http 127.0.0.1:0 "$@"
  mcp_pid=$bg_pid
  url=$(sed -n 's/.*serving \(http:[^ ]*\).*/\1/p' "$t_mlog" | head -1)
  port=$(echo "$url" | sed -n 's/.*:\([0-9]*\)\/mcp.*/\1/p')
}

# pty_run OUT SCRIPT CMD [ARGS...]: CMD on a pseudo-terminal (python3,
# tests/lib/pty_drive.py), answers typed as SCRIPT says (printf-style text
# of "PROMPT-SUBSTRING\tANSWER" lines, "EOF" for end of input); OUT gets
# what it wrote, carriage returns removed; pty_rc its exit status. The
# caller checks for python3 first (need_cmd, or its own skip message).
pty_run() {
  t_out=$1
  # shellcheck disable=SC2059
  printf "$2" >"$t_out.script"
  shift 2
  python3 "$root/tests/lib/pty_drive.py" "$t_out.raw" "$t_out.script" "$@"
  pty_rc=$?
  tr -d '\r' <"$t_out.raw" >"$t_out"
}

# expect_acp NAME STATUS TEXT -- ARGS...: runs "$acp" ARGS with stdin from
# /dev/null, stdout to $work/out, stderr to $work/err (the caller may look
# further); ok when it exits STATUS and TEXT (a fixed string) is in either.
expect_acp() {
  t_name=$1 t_want=$2 t_text=$3
  shift 4
  "$acp" "$@" </dev/null >"$work/out" 2>"$work/err"
  t_rc=$?
  if [ $t_rc = "$t_want" ] && grep -qF -- "$t_text" "$work/out" "$work/err"; then
    ok "$t_name"
  else
    ko "$t_name: exit $t_rc" "out: $(head -c 300 "$work/out")" \
      "err: $(head -c 300 "$work/err")"
  fi
}
