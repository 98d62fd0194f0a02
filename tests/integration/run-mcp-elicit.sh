#!/bin/sh
# run-mcp-elicit.sh - `acp mcp call` answering a server's form elicitation,
# against `acp mcp serve --everything --http`:
#   - at 2026-07-28 (an input request of an input_required result, answered
#     on the retry) and at 2025-11-25 (a real elicitation/create request):
#     --elicit-json FILE accepts with the file's object, --accept with the
#     schema's defaults, --decline declines;
#   - on a terminal (a pty from python3) without those options the fields
#     are asked one by one; a bad number is asked again; end of input
#     cancels;
#   - without any of them and without a terminal, elicitation is not
#     offered (the tool says so) - the old behaviour;
#   - a 2026-07-28 task asking while it runs (input_required in tasks/get,
#     answered with tasks/update), stdio and HTTP;
#   - a 2025-11-25 task asking while it runs (stdio, and HTTP where the
#     request comes on the GET stream): answered, resumed;
#   - bad command lines: exit 2 with a message.
#
# Usage: run-mcp-elicit.sh [path/to/acp]   (or ACP_BIN)
# Exit status: 0 all passed, 1 some failed, 77 skipped.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${1:-${ACP_BIN:-$root/build/acp}}
if [ ! -x "$acp" ]; then
  echo "SKIP: $acp is not built"
  exit 77
fi

work=$(mktemp -d)
srv=""
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

"$acp" mcp serve --everything --http 127.0.0.1:0 2>"$work/srv.log" </dev/null &
srv=$!
i=0
while ! grep -q "serving http" "$work/srv.log" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 100 ]; then echo "FAIL the server did not start"; cat "$work/srv.log"; exit 1; fi
  sleep 0.1
done
url=$(sed -n 's/.*serving \(http:[^ ]*\).*/\1/p' "$work/srv.log")

# expect NAME STATUS TEXT -- ARGS...: run acp with stdin from /dev/null.
expect() {
  name=$1 want=$2 text=$3
  shift 4
  "$acp" "$@" </dev/null >"$work/out" 2>"$work/err"
  rc=$?
  if [ $rc = "$want" ] && grep -q -- "$text" "$work/out" "$work/err"; then
    pass "$name"
  else
    fail "$name: exit $rc, out: $(head -c 300 "$work/out") err: $(head -c 300 "$work/err")"
  fi
}

echo '{"name":"Ada"}' >"$work/name.json"
for pv in 2026-07-28 2025-11-25; do
  expect "$pv --elicit-json" 0 "Hello, Ada!" -- mcp call --protocol $pv \
    --elicit-json "$work/name.json" --url "$url" \
    test_input_required_result_elicitation
  expect "$pv --accept (defaults)" 0 '"name":"John Doe"' -- mcp call \
    --protocol $pv --accept --url "$url" test_elicitation_sep1034_defaults
  grep -q '"age":30' "$work/out" && grep -q '"verified":true' "$work/out" &&
    pass "$pv --accept sent every default" ||
    fail "$pv --accept sent every default: $(head -c 300 "$work/out")"
  expect "$pv --decline" 0 'action=decline' -- mcp call --protocol $pv \
    --decline --url "$url" test_elicitation_sep1034_defaults
  # No option, no terminal: elicitation is not offered.
  "$acp" mcp call --protocol $pv --url "$url" \
    test_input_required_result_elicitation </dev/null >"$work/out" 2>"$work/err"
  rc=$?
  if [ $rc -ne 0 ] && ! grep -q "Hello" "$work/out"; then
    pass "$pv without a callback: not offered (exit $rc)"
  else
    fail "$pv without a callback: exit $rc: $(head -c 300 "$work/out")"
  fi
done

# A 2025-11-25 task that asks while it runs (over stdio): the server sends
# elicitation/create tied to the task (related-task _meta), the task is
# input_required until the answer, which resumes it.
echo '{"confirm":true}' >"$work/yes.json"
expect "2025 task asks while running: accepted" 0 "Deleted" -- mcp call --task \
  --protocol 2025-11-25 --elicit-json "$work/yes.json" --stdio "$acp" mcp serve \
  --everything -- confirm_delete filename=x
expect "2025 task asks while running: declined" 0 "Kept" -- mcp call --task \
  --protocol 2025-11-25 --decline --stdio "$acp" mcp serve --everything -- \
  confirm_delete filename=x
# Over Streamable HTTP the request comes on the session's GET stream,
# which `--task` opens.
expect "2025 task asks while running (HTTP): accepted" 0 "Deleted" -- mcp call \
  --task --protocol 2025-11-25 --elicit-json "$work/yes.json" --url "$url" \
  confirm_delete filename=x

# A 2026 task that needs input: tasks/get shows input_required with its
# inputRequests; acp mcp call answers them with the same options and sends
# tasks/update (acp_mcp_client_task_answer()), then polls to the end.
expect "2026 task asks while running: accepted" 0 "Deleted" -- mcp call --task \
  --protocol 2026-07-28 --elicit-json "$work/yes.json" --stdio "$acp" mcp \
  serve --everything -- confirm_delete filename=x
expect "2026 task asks while running: declined" 0 "Kept" -- mcp call --task \
  --protocol 2026-07-28 --decline --stdio "$acp" mcp serve --everything -- \
  confirm_delete filename=x
expect "2026 task asks while running (HTTP): accepted" 0 "Deleted" -- mcp call \
  --task --protocol 2026-07-28 --elicit-json "$work/yes.json" --url "$url" \
  confirm_delete filename=x

# Bad command lines.
expect "--accept and --decline: exit 2" 2 "give one of" -- mcp call --accept \
  --decline --url "$url" test_elicitation_sep1034_defaults
expect "--elicit-json missing file: exit 2" 2 "cannot read" -- mcp call \
  --elicit-json "$work/nope.json" --url "$url" x
echo '[1,2]' >"$work/arr.json"
expect "--elicit-json not an object: exit 2" 2 "not a JSON object" -- mcp call \
  --elicit-json "$work/arr.json" --url "$url" x
printf '{"name":' >"$work/bad.json"
expect "--elicit-json bad JSON: exit 2" 2 "not a JSON object" -- mcp call \
  --elicit-json "$work/bad.json" --url "$url" x

# On a terminal: a pty, answers typed when each prompt appears.
if command -v python3 >/dev/null 2>&1; then
  cat >"$work/drive_tty.py" <<'EOF'
import os, pty, sys, select
# argv: LOG then acp args; stdin lines: "PROMPT-SUBSTRING\tANSWER" ("EOF" ends input)
log = open(sys.argv[1], "wb")
script = [l.rstrip("\n").split("\t", 1) for l in open(os.environ["PTY_SCRIPT"])]
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
buf = b""
step = 0
while True:
    r, _, _ = select.select([fd], [], [], 30)
    if not r:
        log.write(b"\n[timeout]\n"); os.kill(pid, 9); break
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    log.write(data); log.flush()
    buf += data
    while step < len(script) and script[step][0].encode() in buf:
        buf = buf[buf.index(script[step][0].encode()) + len(script[step][0]):]
        ans = script[step][1]
        os.write(fd, b"\x04" if ans == "EOF" else (ans + "\n").encode())
        step += 1
_, st = os.waitpid(pid, 0)
sys.exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 1)
EOF
  # Accept; a bad age is asked again; defaults for the rest.
  printf '(d)ecline or (c)ancel [a]: \t\nname - User name\tGrace\nage - User age\tforty\nnot a valid integer\t41\nscore\t\nstatus\t\nverified\tn\n' >"$work/s1"
  PTY_SCRIPT="$work/s1" python3 "$work/drive_tty.py" "$work/pty1.log" "$acp" mcp call \
    --protocol 2026-07-28 --url "$url" test_elicitation_sep1034_defaults
  rc=$?
  if [ $rc = 0 ] && grep -q '"name":"Grace"' "$work/pty1.log" &&
     grep -q '"age":41' "$work/pty1.log" && grep -q '"score":95.5' "$work/pty1.log" &&
     grep -q '"verified":false' "$work/pty1.log" &&
     grep -q "the server asks: Please review" "$work/pty1.log"; then
    pass "terminal: fields asked, a bad integer asked again, defaults kept"
  else
    fail "terminal prompts (exit $rc): $(tr -d '\r' <"$work/pty1.log" | tail -c 600)"
  fi
  # End of input at the first question: cancel.
  printf '(d)ecline or (c)ancel [a]: \tEOF\n' >"$work/s2"
  PTY_SCRIPT="$work/s2" python3 "$work/drive_tty.py" "$work/pty2.log" "$acp" mcp call \
    --protocol 2025-11-25 --url "$url" test_elicitation_sep1034_defaults
  rc=$?
  if [ $rc = 0 ] && grep -q 'action=cancel' "$work/pty2.log"; then
    pass "terminal: end of input cancels"
  else
    fail "terminal cancel (exit $rc): $(tr -d '\r' <"$work/pty2.log" | tail -c 600)"
  fi
else
  echo "skip terminal checks: python3 missing"
fi

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all passed"
