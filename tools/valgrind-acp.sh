#!/bin/sh
# valgrind-acp.sh: stands in for the acp program (ACP_BIN) so that every
# acp process a test starts runs under memcheck: this process, and through
# --trace-children the programs it execs (acp-mcp for `acp mcp ...`, the
# shim, the HTTP bridge helper, the relay). Components a conductor spawns
# by command line come back through this script and get their own
# valgrind. One log per process in ACP_VG_LOGS; check them with
#   tools/valgrind-acp.sh --check DIR   (exit 1 and print any non-empty log).
# Env: ACP_VG_REAL the real acp program; ACP_VG_LOGS the log directory.
#
# Under memcheck a process takes far longer to exit, so a conductor is
# given a 10 s stdin grace (default 1 s): otherwise its shutdown ladder
# would SIGTERM components in the middle of their own clean exit and the
# leak report would show their half-freed state.
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "$2"/*.log; do
    [ -s "$f" ] || continue
    echo "valgrind: $f" >&2
    head -60 "$f" >&2
    bad=1
  done
  n=$(ls "$2" 2>/dev/null | wc -l)
  [ "$n" -gt 0 ] || { echo "valgrind-acp: no logs in $2" >&2; exit 1; }
  [ $bad = 0 ] && echo "valgrind-acp: $n processes, no error or leak"
  exit $bad
fi
: "${ACP_VG_REAL:?the real acp program}" "${ACP_VG_LOGS:?a log directory}"
if [ "${1:-}" = conductor ] && [ "${2:-}" = agent ]; then
  shift 2
  set -- conductor agent --stdin-grace 10000 "$@"
fi
exec valgrind -q --trace-children=yes \
  --trace-children-skip='*/sh,*/dash,*/bash,*/env,*/timeout,*/curl,*/sleep,*/cat,*/valgrind-acp.sh,*valgrind*' \
  --error-exitcode=99 --leak-check=full \
  --errors-for-leak-kinds=definite,indirect,possible \
  --log-file="$ACP_VG_LOGS/%p.log" "$ACP_VG_REAL" "$@"
