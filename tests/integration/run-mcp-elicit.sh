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
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp "${1:-}"

start_mcp_http "$work/srv.log" --everything

echo '{"name":"Ada"}' >"$work/name.json"
for pv in 2026-07-28 2025-11-25; do
  expect_acp "$pv --elicit-json" 0 "Hello, Ada!" -- mcp call --protocol $pv \
    --elicit-json "$work/name.json" --url "$url" \
    test_input_required_result_elicitation
  expect_acp "$pv --accept (defaults)" 0 '"name":"John Doe"' -- mcp call \
    --protocol $pv --accept --url "$url" test_elicitation_sep1034_defaults
  grep -q '"age":30' "$work/out" && grep -q '"verified":true' "$work/out" &&
    pass "$pv --accept sent every default" ||
    fail "$pv --accept sent every default: $(head -c 300 "$work/out")"
  expect_acp "$pv --decline" 0 'action=decline' -- mcp call --protocol $pv \
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
expect_acp "2025 task asks while running: accepted" 0 "Deleted" -- mcp call --task \
  --protocol 2025-11-25 --elicit-json "$work/yes.json" --stdio "$acp" mcp serve \
  --everything -- confirm_delete filename=x
expect_acp "2025 task asks while running: declined" 0 "Kept" -- mcp call --task \
  --protocol 2025-11-25 --decline --stdio "$acp" mcp serve --everything -- \
  confirm_delete filename=x
# Over Streamable HTTP the request comes on the session's GET stream,
# which `--task` opens.
expect_acp "2025 task asks while running (HTTP): accepted" 0 "Deleted" -- mcp call \
  --task --protocol 2025-11-25 --elicit-json "$work/yes.json" --url "$url" \
  confirm_delete filename=x

# A 2026 task that needs input: tasks/get shows input_required with its
# inputRequests; acp mcp call answers them with the same options and sends
# tasks/update (acp_mcp_client_task_answer()), then polls to the end.
expect_acp "2026 task asks while running: accepted" 0 "Deleted" -- mcp call --task \
  --protocol 2026-07-28 --elicit-json "$work/yes.json" --stdio "$acp" mcp \
  serve --everything -- confirm_delete filename=x
expect_acp "2026 task asks while running: declined" 0 "Kept" -- mcp call --task \
  --protocol 2026-07-28 --decline --stdio "$acp" mcp serve --everything -- \
  confirm_delete filename=x
expect_acp "2026 task asks while running (HTTP): accepted" 0 "Deleted" -- mcp call \
  --task --protocol 2026-07-28 --elicit-json "$work/yes.json" --url "$url" \
  confirm_delete filename=x

# Bad command lines.
expect_acp "--accept and --decline: exit 2" 2 "give one of" -- mcp call --accept \
  --decline --url "$url" test_elicitation_sep1034_defaults
expect_acp "--elicit-json missing file: exit 2" 2 "cannot read" -- mcp call \
  --elicit-json "$work/nope.json" --url "$url" x
echo '[1,2]' >"$work/arr.json"
expect_acp "--elicit-json not an object: exit 2" 2 "not a JSON object" -- mcp call \
  --elicit-json "$work/arr.json" --url "$url" x
printf '{"name":' >"$work/bad.json"
expect_acp "--elicit-json bad JSON: exit 2" 2 "not a JSON object" -- mcp call \
  --elicit-json "$work/bad.json" --url "$url" x

# On a terminal: a pty, answers typed when each prompt appears.
if command -v python3 >/dev/null 2>&1; then
  # Accept; a bad age is asked again; defaults for the rest.
  pty_run "$work/pty1.log" '(d)ecline or (c)ancel [a]: \t\nname - User name\tGrace\nage - User age\tforty\nnot a valid integer\t41\nscore\t\nstatus\t\nverified\tn\n' \
    "$acp" mcp call --protocol 2026-07-28 --url "$url" test_elicitation_sep1034_defaults
  rc=$pty_rc
  if [ $rc = 0 ] && grep -q '"name":"Grace"' "$work/pty1.log" &&
     grep -q '"age":41' "$work/pty1.log" && grep -q '"score":95.5' "$work/pty1.log" &&
     grep -q '"verified":false' "$work/pty1.log" &&
     grep -q "the server asks: Please review" "$work/pty1.log"; then
    pass "terminal: fields asked, a bad integer asked again, defaults kept"
  else
    fail "terminal prompts (exit $rc): $(tail -c 600 "$work/pty1.log")"
  fi
  # End of input at the first question: cancel.
  pty_run "$work/pty2.log" '(d)ecline or (c)ancel [a]: \tEOF\n' "$acp" mcp call \
    --protocol 2025-11-25 --url "$url" test_elicitation_sep1034_defaults
  rc=$pty_rc
  if [ $rc = 0 ] && grep -q 'action=cancel' "$work/pty2.log"; then
    pass "terminal: end of input cancels"
  else
    fail "terminal cancel (exit $rc): $(tail -c 600 "$work/pty2.log")"
  fi
else
  echo "skip terminal checks: python3 missing"
fi

finish
