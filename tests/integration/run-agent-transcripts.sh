#!/bin/sh
# run-agent-transcripts.sh - replay tests/transcripts/agent/<case>/: in.jsonl
# is fed to `acp agent` on stdin all at once and its stdout must equal
# expect.jsonl byte for byte (the agent is deterministic: session ids are
# sess_1, sess_2... under ACP_AGENT_SEQUENTIAL_IDS=1, which this script
# sets; tool call ids tool_1...). In expect.jsonl, @VERSION@
# stands for the version `acp --version` prints. Optional files: case.txt
# (what the case shows), args (extra `acp agent` arguments, e.g. --echo).
# The agent must also exit 0 and print nothing on stderr.
#
# Env: ACP_BIN (default build/acp); ACP_VALGRIND_WRAP as in run-cli.sh
# (every agent runs under it; a report on stderr fails the case).
# Exit status: 0 all passed, 1 some failed, 77 skipped (acp not built).
set -u
export ACP_AGENT_SEQUENTIAL_IDS=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
wrap=${ACP_VALGRIND_WRAP:-}
dir=$root/tests/transcripts/agent
if [ ! -x "$acp" ]; then
  echo "SKIP: $acp is not built"
  exit 77
fi
if [ -n "$wrap" ]; then T=300; else T=30; fi
version=$("$acp" --version | sed -n 's/^acp \([^ ]*\) .*/\1/p')
if [ -z "$version" ]; then
  echo "FAIL: cannot read the version from $acp --version"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
n=0
for c in "$dir"/*/; do
  c=${c%/}
  name=$(basename "$c")
  n=$((n + 1))
  if [ ! -f "$c/in.jsonl" ] || [ ! -f "$c/expect.jsonl" ]; then
    fail=$((fail + 1))
    echo "FAIL $name: in.jsonl or expect.jsonl missing"
    continue
  fi
  args=""
  [ -f "$c/args" ] && args=$(cat "$c/args")
  sed "s/@VERSION@/$version/g" "$c/expect.jsonl" >"$work/want"
  # shellcheck disable=SC2086
  timeout $T $wrap "$acp" agent $args <"$c/in.jsonl" >"$work/out" \
    2>"$work/err"
  rc=$?
  why=""
  [ $rc -eq 0 ] || why="exit status $rc;"
  [ -s "$work/err" ] && why="$why stderr not empty;"
  cmp -s "$work/want" "$work/out" || why="$why stdout differs;"
  if [ -z "$why" ]; then
    pass=$((pass + 1))
    echo "PASS $name"
  else
    fail=$((fail + 1))
    echo "FAIL $name: $why"
    [ -f "$c/case.txt" ] && echo "     case: $(cat "$c/case.txt")"
    if [ -s "$work/err" ]; then
      echo "     stderr:"
      head -n 40 "$work/err" | sed 's/^/       /'
    fi
    diff -u "$work/want" "$work/out" | head -n 60 | sed 's/^/     /'
  fi
done
if [ $n -eq 0 ]; then
  echo "FAIL: no cases in $dir"
  exit 1
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
