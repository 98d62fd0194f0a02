#!/bin/sh
# run-mcp-sampling.sh - `acp mcp call` answering a server's sampling and
# roots requests, against `acp mcp serve --everything --http`:
#   - at 2026-07-28 (input requests of an input_required result, answered
#     on the retry) and at 2025-11-25 (real sampling/createMessage and
#     roots/list requests): --sample-reply TEXT, --sample-json FILE,
#     --root DIR (repeatable, percent-encoded file:// URIs); all three
#     kinds at once with --accept;
#   - the capabilities are declared only when the client can answer
#     (test_missing_capability, and the tools' "not supported" without the
#     options and without a terminal);
#   - on a terminal (a pty from python3) the sampling request is shown and
#     the reply typed; an empty line rejects it;
#   - bad command lines exit 2 with a message; --elicit-json with a path
#     whose third character is 'a' or 'd' still reads the file.
#
# Usage: run-mcp-sampling.sh [path/to/acp]   (or ACP_BIN)
# Exit status: 0 all passed, 1 some failed, 77 skipped.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp "${1:-}"

start_mcp_http "$work/srv.log" --everything

mkdir -p "$work/proj one" "$work/b"
r1=$(cd "$work/proj one" && pwd -P)
r2=$(cd "$work/b" && pwd -P)
cat >"$work/sample.json" <<'JSON'
{"role":"assistant","content":{"type":"text","text":"from the file"},"model":"m-1","stopReason":"endTurn"}
JSON
echo '{"name":"Ada"}' >"$work/name.json"

for pv in 2026-07-28 2025-11-25; do
  expect_acp "$pv --sample-reply" 0 "LLM response: Paris" -- mcp call \
    --protocol $pv --sample-reply Paris --url "$url" \
    test_input_required_result_sampling
  expect_acp "$pv --sample-json" 0 "LLM response: from the file" -- mcp call \
    --protocol $pv --sample-json "$work/sample.json" --url "$url" \
    test_sampling prompt=hi
  expect_acp "$pv --root (two, percent-encoded)" 0 \
    "Roots: file://$(echo "$r1" | sed 's/ /%20/g') file://$r2" -- mcp call \
    --protocol $pv --root "$work/proj one" --root "$work/b/" --url "$url" \
    test_input_required_result_list_roots
  expect_acp "$pv elicitation, sampling and roots at once" 0 \
    "Received all inputs: name, greeting, roots" -- mcp call --protocol $pv \
    --accept --sample-reply hi --root "$work/b" --url "$url" \
    test_input_required_result_multiple_inputs
  expect_acp "$pv sampling declared with --sample-reply" 0 \
    "The client declared sampling" -- mcp call --protocol $pv \
    --sample-reply x --url "$url" test_missing_capability
  # Without the options and without a terminal: not offered.
  expect_acp "$pv no sampling capability without an option" 1 \
    "Missing required client capability: sampling" -- mcp call \
    --protocol $pv --url "$url" test_missing_capability
  expect_acp "$pv sampling not offered" 3 "does not support sampling" -- mcp call \
    --protocol $pv --url "$url" test_input_required_result_sampling
  expect_acp "$pv roots not offered" 3 "does not support roots" -- mcp call \
    --protocol $pv --sample-reply x --url "$url" \
    test_input_required_result_list_roots
done

# --elicit-json FILE where FILE's third character is 'a': read, not taken
# for --accept.
expect_acp "--elicit-json ./a.json is the file" 0 "Hello, Ada!" -- mcp call \
  --elicit-json "$work/name.json" --url "$url" \
  test_input_required_result_elicitation
(cd "$work" && cp name.json a.json && "$acp" mcp call --elicit-json ./a.json \
  --url "$url" test_input_required_result_elicitation </dev/null \
  >"$work/out" 2>&1)
grep -qF "Hello, Ada!" "$work/out" && pass "--elicit-json ./a.json reads the file" ||
  fail "--elicit-json ./a.json: $(head -c 300 "$work/out")"

# Bad command lines.
expect_acp "--root missing dir: exit 2" 2 "is not a directory" -- mcp call \
  --root "$work/nope" --url "$url" x
: >"$work/file"
expect_acp "--root a file: exit 2" 2 "is not a directory" -- mcp call \
  --root "$work/file" --url "$url" x
expect_acp "--sample-reply twice: exit 2" 2 "give one of" -- mcp call \
  --sample-reply a --sample-json "$work/sample.json" --url "$url" x
echo '{"role":"assistant","content":{"type":"text","text":"x"}}' >"$work/nomodel.json"
expect_acp "--sample-json without model: exit 2" 2 'no "model"' -- mcp call \
  --sample-json "$work/nomodel.json" --url "$url" x
echo '[1]' >"$work/arr.json"
expect_acp "--sample-json not an object: exit 2" 2 "not a JSON object" -- mcp call \
  --sample-json "$work/arr.json" --url "$url" x
expect_acp "--sample-json missing file: exit 2" 2 "cannot read" -- mcp call \
  --sample-json "$work/nope.json" --url "$url" x

# On a terminal: a pty, answers typed when each prompt appears.
if command -v python3 >/dev/null 2>&1; then
  for pv in 2026-07-28 2025-11-25; do
    pty_run "$work/pty1.txt" 'empty line: reject): \tLyon\n' "$acp" \
      mcp call --protocol $pv --url "$url" test_sampling prompt=capital-of-france
    if [ $pty_rc = 0 ] && grep -qF "[user] capital-of-france" "$work/pty1.txt" &&
       grep -qF "maxTokens 100" "$work/pty1.txt" &&
       grep -qF "LLM response: Lyon" "$work/pty1.txt"; then
      pass "$pv terminal: the request shown, the typed reply sent"
    else
      fail "$pv terminal sampling (exit $pty_rc): $(tail -c 600 "$work/pty1.txt")"
    fi
    pty_run "$work/pty2.txt" 'empty line: reject): \t\n' "$acp" \
      mcp call --protocol $pv --url "$url" test_sampling prompt=x
    # 2025: the tool reports the client's error; 2026: the error ends the call.
    if [ $pty_rc != 0 ] && grep -qF "acp mcp: sampling rejected" "$work/pty2.txt" &&
       ! grep -qF "LLM response" "$work/pty2.txt" &&
       { [ $pv = 2026-07-28 ] || grep -qF "User rejected sampling request" "$work/pty2.txt"; }; then
      pass "$pv terminal: an empty line rejects (exit $pty_rc)"
    else
      fail "$pv terminal reject (exit $pty_rc): $(tail -c 600 "$work/pty2.txt")"
    fi
  done
else
  echo "skip terminal checks: python3 missing"
fi

finish
