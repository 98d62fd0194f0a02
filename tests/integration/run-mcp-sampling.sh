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
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${1:-${ACP_BIN:-$root/build/acp}}
if [ ! -x "$acp" ]; then
  echo "SKIP: $acp is not built"
  exit 77
fi
case $acp in /*) ;; *) acp=$PWD/$acp ;; esac

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

# expect NAME STATUS TEXT -- ARGS...: run acp with stdin from /dev/null;
# TEXT is a fixed string looked for in stdout and stderr.
expect() {
  name=$1 want=$2 text=$3
  shift 4
  "$acp" "$@" </dev/null >"$work/out" 2>"$work/err"
  rc=$?
  if [ $rc = "$want" ] && grep -qF -- "$text" "$work/out" "$work/err"; then
    pass "$name"
  else
    fail "$name: exit $rc, out: $(head -c 300 "$work/out") err: $(head -c 300 "$work/err")"
  fi
}

mkdir -p "$work/proj one" "$work/b"
r1=$(cd "$work/proj one" && pwd -P)
r2=$(cd "$work/b" && pwd -P)
cat >"$work/sample.json" <<'JSON'
{"role":"assistant","content":{"type":"text","text":"from the file"},"model":"m-1","stopReason":"endTurn"}
JSON
echo '{"name":"Ada"}' >"$work/name.json"

for pv in 2026-07-28 2025-11-25; do
  expect "$pv --sample-reply" 0 "LLM response: Paris" -- mcp call \
    --protocol $pv --sample-reply Paris --url "$url" \
    test_input_required_result_sampling
  expect "$pv --sample-json" 0 "LLM response: from the file" -- mcp call \
    --protocol $pv --sample-json "$work/sample.json" --url "$url" \
    test_sampling prompt=hi
  expect "$pv --root (two, percent-encoded)" 0 \
    "Roots: file://$(echo "$r1" | sed 's/ /%20/g') file://$r2" -- mcp call \
    --protocol $pv --root "$work/proj one" --root "$work/b/" --url "$url" \
    test_input_required_result_list_roots
  expect "$pv elicitation, sampling and roots at once" 0 \
    "Received all inputs: name, greeting, roots" -- mcp call --protocol $pv \
    --accept --sample-reply hi --root "$work/b" --url "$url" \
    test_input_required_result_multiple_inputs
  expect "$pv sampling declared with --sample-reply" 0 \
    "The client declared sampling" -- mcp call --protocol $pv \
    --sample-reply x --url "$url" test_missing_capability
  # Without the options and without a terminal: not offered.
  expect "$pv no sampling capability without an option" 1 \
    "Missing required client capability: sampling" -- mcp call \
    --protocol $pv --url "$url" test_missing_capability
  expect "$pv sampling not offered" 3 "does not support sampling" -- mcp call \
    --protocol $pv --url "$url" test_input_required_result_sampling
  expect "$pv roots not offered" 3 "does not support roots" -- mcp call \
    --protocol $pv --sample-reply x --url "$url" \
    test_input_required_result_list_roots
done

# --elicit-json FILE where FILE's third character is 'a': read, not taken
# for --accept.
expect "--elicit-json ./a.json is the file" 0 "Hello, Ada!" -- mcp call \
  --elicit-json "$work/name.json" --url "$url" \
  test_input_required_result_elicitation
(cd "$work" && cp name.json a.json && "$acp" mcp call --elicit-json ./a.json \
  --url "$url" test_input_required_result_elicitation </dev/null \
  >"$work/out" 2>&1)
grep -qF "Hello, Ada!" "$work/out" && pass "--elicit-json ./a.json reads the file" ||
  fail "--elicit-json ./a.json: $(head -c 300 "$work/out")"

# Bad command lines.
expect "--root missing dir: exit 2" 2 "is not a directory" -- mcp call \
  --root "$work/nope" --url "$url" x
: >"$work/file"
expect "--root a file: exit 2" 2 "is not a directory" -- mcp call \
  --root "$work/file" --url "$url" x
expect "--sample-reply twice: exit 2" 2 "give one of" -- mcp call \
  --sample-reply a --sample-json "$work/sample.json" --url "$url" x
echo '{"role":"assistant","content":{"type":"text","text":"x"}}' >"$work/nomodel.json"
expect "--sample-json without model: exit 2" 2 'no "model"' -- mcp call \
  --sample-json "$work/nomodel.json" --url "$url" x
echo '[1]' >"$work/arr.json"
expect "--sample-json not an object: exit 2" 2 "not a JSON object" -- mcp call \
  --sample-json "$work/arr.json" --url "$url" x
expect "--sample-json missing file: exit 2" 2 "cannot read" -- mcp call \
  --sample-json "$work/nope.json" --url "$url" x

# On a terminal: a pty, answers typed when each prompt appears.
if command -v python3 >/dev/null 2>&1; then
  cat >"$work/drive_tty.py" <<'PY'
import os, pty, sys, select
# argv: LOG then acp args; PTY_SCRIPT lines: "PROMPT-SUBSTRING\tANSWER" ("EOF" ends input)
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
PY
  for pv in 2026-07-28 2025-11-25; do
    printf 'empty line: reject): \tLyon\n' >"$work/s1"
    PTY_SCRIPT="$work/s1" python3 "$work/drive_tty.py" "$work/pty1.log" "$acp" \
      mcp call --protocol $pv --url "$url" test_sampling prompt=capital-of-france
    rc=$?
    tr -d '\r' <"$work/pty1.log" >"$work/pty1.txt"
    if [ $rc = 0 ] && grep -qF "[user] capital-of-france" "$work/pty1.txt" &&
       grep -qF "maxTokens 100" "$work/pty1.txt" &&
       grep -qF "LLM response: Lyon" "$work/pty1.txt"; then
      pass "$pv terminal: the request shown, the typed reply sent"
    else
      fail "$pv terminal sampling (exit $rc): $(tail -c 600 "$work/pty1.txt")"
    fi
    printf 'empty line: reject): \t\n' >"$work/s2"
    PTY_SCRIPT="$work/s2" python3 "$work/drive_tty.py" "$work/pty2.log" "$acp" \
      mcp call --protocol $pv --url "$url" test_sampling prompt=x
    rc=$?
    tr -d '\r' <"$work/pty2.log" >"$work/pty2.txt"
    # 2025: the tool reports the client's error; 2026: the error ends the call.
    if [ $rc != 0 ] && grep -qF "acp mcp: sampling rejected" "$work/pty2.txt" &&
       ! grep -qF "LLM response" "$work/pty2.txt" &&
       { [ $pv = 2026-07-28 ] || grep -qF "User rejected sampling request" "$work/pty2.txt"; }; then
      pass "$pv terminal: an empty line rejects (exit $rc)"
    else
      fail "$pv terminal reject (exit $rc): $(tail -c 600 "$work/pty2.txt")"
    fi
  done
else
  echo "skip terminal checks: python3 missing"
fi

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all passed"
