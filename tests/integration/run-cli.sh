#!/bin/sh
# shellcheck disable=SC2086 # $wrap is split into words on purpose
# run-cli.sh - the `acp` program end to end: `acp client` driving
# `acp agent`, both real processes, through every command of the agent's
# prompt language (see `acp agent --help`), checking the exact stdout, the
# client's notes on stderr, the files touched and the exit status. Also the
# client against broken agents, the interactive mode, `acp demo`, --help,
# --version and bad options.
#
# Env: ACP_BIN           the built acp (default: build/acp)
#      ACP_VALGRIND_WRAP a command prefix, e.g. "valgrind -q
#                        --error-exitcode=99 --leak-check=full
#                        --errors-for-leak-kinds=definite,indirect,possible";
#                        every acp process (client and agent) runs under
#                        it and any report it prints on stderr fails the
#                        check. The slow /big case is skipped then.
# Exit status: 0 all passed, 1 some failed, 77 skipped (acp not built).
set -u
# The reference agent numbers sessions sess_1, sess_2... (acp agent --help)
export ACP_AGENT_SEQUENTIAL_IDS=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
wrap=${ACP_VALGRIND_WRAP:-}
if [ ! -x "$acp" ]; then
  echo "SKIP: $acp is not built"
  exit 77
fi
case $acp in /*) ;; *) acp=$(cd "$(dirname "$acp")" && pwd)/$(basename "$acp") ;; esac
if [ -n "$wrap" ]; then T=600; POLL=3000; else T=60; POLL=600; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cwd=$work/cwd
mkdir "$cwd"
pass=0
fail=0
skipped=""
ok() { pass=$((pass + 1)); echo "PASS $1"; }
ko() {
  fail=$((fail + 1))
  echo "FAIL $1"
  shift
  for l in "$@"; do printf '     %s\n' "$l"; done
}

# Report anything the valgrind wrapper printed (lines like ==123== ...).
vg_check() {
  if [ -n "$wrap" ] && grep -q '^==[0-9]*==' "$work/err"; then
    ko "$1: valgrind is clean" "$(grep '^==[0-9]*==' "$work/err" | head -40)"
  fi
}

# cl NAME STDIN [CLIENT OPTIONS...]: acp client --cwd $cwd OPTIONS --
# acp agent, stdin from the file STDIN; sets rc, out in $work/out, err in
# $work/err.
cl() {
  _name=$1
  _in=$2
  shift 2
  timeout $T $wrap "$acp" client --cwd "$cwd" "$@" -- $wrap "$acp" agent \
    <"$_in" >"$work/out" 2>"$work/err"
  rc=$?
  vg_check "$_name"
}

# run NAME CMD...: any command with stdin from /dev/null.
run() {
  _name=$1
  shift
  timeout $T "$@" </dev/null >"$work/out" 2>"$work/err"
  rc=$?
  vg_check "$_name"
}

# check NAME RC OUT [ERR...]: the last run exited RC, wrote exactly OUT on
# stdout, and each ERR text appears on stderr (as part of a line). An ERR
# starting with '!' must NOT appear.
check() {
  _name=$1
  _rc=$2
  printf '%s' "$3" >"$work/want"
  shift 3
  _why=""
  [ "$rc" = "$_rc" ] || _why="exit status $rc, want $_rc;"
  cmp -s "$work/want" "$work/out" || _why="$_why stdout differs;"
  for _e in "$@"; do
    case $_e in
    !*)
      if grep -qF -- "${_e#!}" "$work/err"; then
        _why="$_why stderr has '${_e#!}';"
      fi
      ;;
    *)
      grep -qF -- "$_e" "$work/err" || _why="$_why stderr lacks '$_e';"
      ;;
    esac
  done
  if [ -z "$_why" ]; then
    ok "$_name"
  else
    ko "$_name" "$_why" "stdout: $(head -c 1500 "$work/out")" \
      "want:   $(head -c 1500 "$work/want")" \
      "stderr: $(head -c 2500 "$work/err")"
  fi
}

# expect NAME CONDITION-COMMAND...: a check that is any shell test.
expect() {
  _name=$1
  shift
  if "$@"; then ok "$_name"; else ko "$_name" "failed: $*"; fi
}

none=/dev/null
printf '3\n' >"$work/in3"
printf '2\n' >"$work/in2"
printf '9\n' >"$work/in9"
printf 'Ada Lovelace\n' >"$work/in-ada"
printf 'inside text\nline 2\n' >"$cwd/in.txt"
printf 'secret\n' >"$work/outside.txt"
ln -s "$work/outside.txt" "$cwd/escape"
printf '#!/bin/sh\necho to-stdout\necho to-stderr >&2\nexit 7\n' >"$cwd/fail.sh"
printf '#!/bin/sh\nkill -9 $$\n' >"$cwd/die.sh"
chmod +x "$cwd/fail.sh" "$cwd/die.sh"
real_cwd=$(cd "$cwd" && pwd -P)

# MARK: - The prompt language, one command at a time

cl text $none -p "hello
world"
check "text: streamed lines, newline added at the end" 0 "hello
world
"
expect "text: nothing on stderr" test ! -s "$work/err"

# Markdown streamed in 2-byte chunks to a pipe (not a terminal): the bytes
# are the agent's, unchanged, with --color auto and never; --color always
# renders them (styles, no markers).
md='# T\n- a **b** `c`\n```\nx *y*\n```'
md_plain='# T
- a **b** `c`
```
x *y*
```
'
cl md-pipe $none -p "/chunks 2 $md"
check "markdown to a pipe: unchanged bytes" 0 "$md_plain"
cl md-never $none --color never -p "/chunks 2 $md"
check "markdown with --color never: unchanged bytes" 0 "$md_plain"
cl md-always $none --color always -p "/chunks 2 $md"
check "markdown with --color always: rendered" 0 "$(printf '\033[1mT\033[0m\n\342\200\242 a \033[1mb\033[0m \033[36mc\033[0m\n\033[2m```\033[0m\n\033[33mx *y*\033[0m\n\033[2m```\033[0m')
"

cl text-nl $none -p "one line
"
check "text ending in a newline gets no extra one" 0 "one line
"

# A long -p prompt is lent to the library (acp_client_prompt_text_ref():
# written from the argument, not copied into the session's output): it
# comes back byte for byte; one with bytes to escape (quotes, a backslash,
# a tab) takes the copying path and comes back the same.
long=$(head -c 100000 /dev/zero | tr '\0' 'x')
cl long-lent $none -p "$long"
check "a 100 KB -p prompt, lent: echoed byte for byte" 0 "$long
"
cl long-escaped $none -p "\"$long\\	\""
check "a 100 KB -p prompt with escapes: echoed byte for byte" 0 "\"$long\\	\"
"

cl empty $none -p ""
check "empty prompt: end_turn, no output" 0 ""

cl think $none -p "/think pondering deeply
answer"
check "/think: a thought note, then the text" 0 "answer
" "(thinking) pondering deeply"

cl quiet $none --quiet -p "/think hidden
/tool Hidden tool
visible"
check "--quiet: only the agent's text" 0 "visible
"
expect "--quiet: stderr empty" test ! -s "$work/err"

cl plan $none -p "/plan Look around; Read the notes; Write it"
check "/plan: all pending first, all completed last" 0 "" \
  "[plan] [ ] Look around [ ] Read the notes [ ] Write it" \
  "[plan] [>] Look around [ ] Read the notes [ ] Write it" \
  "[plan] [x] Look around [x] Read the notes [>] Write it" \
  "[plan] [x] Look around [x] Read the notes [x] Write it"
expect "/plan: 7 plan updates (1 + 2 per entry)" \
  test "$(grep -c '^\[plan\]' "$work/err")" = 7
expect "/plan: the last plan update is all completed" \
  test "$(grep '^\[plan\]' "$work/err" | tail -n 1)" = \
  "[plan] [x] Look around [x] Read the notes [x] Write it"

cl tool $none -p "/tool Search the web"
check "/tool: pending, in_progress, completed" 0 "" \
  "[tool] Search the web (pending)" "[tool] Search the web: in_progress" \
  "[tool] Search the web: completed" "!tool_1"

cl tool-kind $none -p "/tool:fetch Get the page
/tool:think Second"
check "/tool:KIND: title without the kind, ids count up" 0 "" \
  "[tool] Get the page (pending)" "[tool] Second (pending)" \
  "[tool] Second: completed" "!fetch"

cl ask-yes $none --yes -p "/ask Edit main.c"
check "/ask --yes: granted (first allow option)" 0 \
  "permission granted (allow_once)
" "[permission] Edit main.c" "  1) Allow once" "  4) Always reject" \
  "--yes: allowing" "-> allow_once" "[tool] Edit main.c: completed"

cl ask-3 "$work/in3" -p "/ask:delete Remove files"
check "/ask answered 3 on stdin: rejected" 0 \
  "permission denied (reject_once)
" "[permission] Remove files" "choose 1-4: -> reject_once" \
  "[tool] Remove files: failed"

cl ask-2 "$work/in2" -p "/ask Edit"
check "/ask answered 2 on stdin: always allow" 0 \
  "permission granted (allow_always)
" "-> allow_always" "[tool] Edit: completed"

cl ask-9 "$work/in9" -p "/ask Edit"
check "/ask answered 9 (no such option): rejected" 0 \
  "permission denied (reject_once)
" "no such option; rejecting" "-> reject_once" "!Request cancelled"

cl ask-eof $none -p "/ask Edit"
check "/ask with stdin at EOF and no --yes: rejected" 0 \
  "permission denied (reject_once)
" "no input to answer with; rejecting" "-> reject_once" \
  "[tool] Edit: failed"

cl read $none -p "/read in.txt"
check "/read inside cwd (relative path)" 0 "inside text
line 2
" "[fs] read $real_cwd/in.txt" "[tool] Read $cwd/in.txt (in_progress)" \
  "[tool] Read $cwd/in.txt: completed"

cl read-abs $none -p "/read $cwd/in.txt"
check "/read inside cwd (absolute path)" 0 "inside text
line 2
" "[fs] read $real_cwd/in.txt"

refused_read="fs/read_text_file failed: Invalid params: path is outside the session's working directory (-32602)
"
cl read-out $none -p "/read $work/outside.txt"
check "/read outside cwd: refused by the client, reported by the agent" 0 \
  "$refused_read" "[fs] refused read outside" "[tool] Read $work/outside.txt: failed" \
  "![fs] read "

cl read-dotdot $none -p "/read ../outside.txt"
check "/read ../ escaping cwd: refused" 0 "$refused_read" \
  "[fs] refused read outside" "![fs] read "

cl read-link $none -p "/read escape"
check "/read of a symlink pointing outside cwd: refused" 0 "$refused_read" \
  "[fs] refused read outside" "![fs] read "

cl read-missing $none -p "/read missing.txt"
check "/read of a missing file: resource not found" 0 \
  "fs/read_text_file failed: Resource not found (-32002)
" "[tool] Read $cwd/missing.txt: failed" "![fs] read "

cl write $none -p "/write new.txt hello file"
check "/write inside cwd" 0 "file written
" "[fs] wrote $real_cwd/new.txt (10 bytes)" "[tool] Write $cwd/new.txt: completed"
expect "/write: the file holds exactly the text" \
  test "$(cat "$cwd/new.txt" 2>/dev/null)" = "hello file"
expect "/write: no trailing newline added" \
  test "$(wc -c <"$cwd/new.txt" 2>/dev/null)" -eq 10

cl write-over $none -p "/write new.txt second"
check "/write replaces an existing file" 0 "file written
"
expect "/write: replaced content" test "$(cat "$cwd/new.txt")" = "second"

cl write-out $none -p "/write $work/evil.txt pwned"
check "/write outside cwd: refused" 0 \
  "fs/write_text_file failed: Invalid params: path is outside the session's working directory (-32602)
" "[fs] refused write outside" "[tool] Write $work/evil.txt: failed" "![fs] wrote"
expect "/write outside cwd: no file created" test ! -e "$work/evil.txt"

cl write-link $none -p "/write escape pwned"
check "/write through a symlink pointing outside: refused" 0 \
  "fs/write_text_file failed: Invalid params: path is outside the session's working directory (-32602)
" "[fs] refused write outside"
expect "/write through a symlink: target untouched" \
  test "$(cat "$work/outside.txt")" = "secret"

cl run $none -p "/run printf hello"
check "/run printf hello: output shown, completed" 0 "hello
" "[terminal] term_1 started" "[tool] printf hello (pending)" \
  "[tool] printf hello: in_progress" "[tool] printf hello: completed"

cl run-false $none -p "/run false"
check "/run false: exit status 1 reported, tool failed" 0 "exit status 1
" "[tool] false: failed"

cl run-fail $none -p "/run ./fail.sh"
check "/run of a failing script: stdout+stderr then exit status 7" 0 \
  "to-stdout
to-stderr
exit status 7
" "[tool] ./fail.sh: failed"

cl run-sig $none -p "/run ./die.sh"
check "/run of a command killed by SIGKILL" 0 "killed by SIGKILL
" "[tool] ./die.sh: failed"

cl run-missing $none -p "/run no-such-command-xyz"
expect "/run of a missing command: exit status 127" \
  grep -qx "exit status 127" "$work/out"

cl run-cwd $none -p "/run pwd"
check "/run runs in the session's cwd" 0 "$real_cwd
"

cl mode $none -p "/mode ask
/mode bogus"
check "/mode: mode update, unknown mode reported" 0 "unknown mode 'bogus'
" "[mode] ask"

cl config $none -p "/config model smart
/config verbose true
/config nope 1"
check "/config: two updates, bad option shows usage" 0 \
  "usage: /config model fast|smart, /config verbose true|false
" "[config] model=smart verbose=false" "[config] model=smart verbose=true"
expect "/config: exactly two config updates" \
  test "$(grep -c '^\[config\] ' "$work/err")" = 2

cl title $none -p "/title My session"
check "/title: session info update" 0 "" "[title] My session"

cl usage $none -p "/usage"
check "/usage: usage update" 0 "" "[usage] 1234/200000 tokens (0.6%)"

cl commands $none -p "/commands"
check "/commands: available commands update" 0 "" \
  "[commands] /plan /read /wait"

# Every kind of session/update of the v1 schema (stable and unstable), sent
# as is with /update: each is a readable line, none a bare [kind].
cl updates $none -p '/update {"sessionUpdate":"usage_update","used":50000,"size":200000,"cost":{"amount":0.42,"currency":"USD"}}
/update {"sessionUpdate":"session_info_update","title":null,"updatedAt":"2026-01-02T03:04:05Z"}
/update {"sessionUpdate":"session_info_update","updatedAt":"2026-01-02T03:04:06Z"}
/update {"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"earlier question"}}
/update {"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"pondering"}}
/update {"sessionUpdate":"agent_message_chunk","content":{"type":"resource_link","name":"notes.md","uri":"file:///n.md"}}
/update {"sessionUpdate":"agent_message_chunk","content":{"type":"image","mimeType":"image/png","data":"AAAA"}}
/update {"sessionUpdate":"plan","entries":[{"content":"P","priority":"low","status":"completed"}]}
/update {"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p1","entries":[{"content":"X","priority":"high","status":"in_progress"}]}}
/update {"sessionUpdate":"plan_update","plan":{"type":"markdown","planId":"p2","content":"# Steps"}}
/update {"sessionUpdate":"plan_update","plan":{"type":"file","planId":"p3","uri":"file:///plan.md"}}
/update {"sessionUpdate":"plan_removed","planId":"p1"}
/update {"sessionUpdate":"current_mode_update","currentModeId":"ask"}
/update {"sessionUpdate":"available_commands_update","availableCommands":[]}
/update {"sessionUpdate":"notice","severity":"warning","title":"Rate limited","description":"retrying"}
/update {"sessionUpdate":"compaction_update","compactionId":"c1","status":"in_progress"}
/update {"sessionUpdate":"compaction_summary_chunk","compactionId":"c1","content":{"type":"text","text":"we talked"}}
/update {"sessionUpdate":"compaction_update","compactionId":"c1","status":"failed","error":"too long"}
/update {"sessionUpdate":"tool_call","toolCallId":"t9","title":"Fetch page","status":"in_progress"}
/update {"sessionUpdate":"tool_call_update","toolCallId":"t9","title":"Fetch example.com"}
/update {"sessionUpdate":"tool_call_update","toolCallId":"t9","status":"completed"}
/update {"sessionUpdate":"tool_call_update","toolCallId":"t7","status":"failed"}
/update {"sessionUpdate":"brand_new_kind"}
/update not json'
check "/update: every update kind rendered" 0 \
  "usage: /update {\"sessionUpdate\":...}
" "[usage] 50000/200000 tokens (25.0%), cost 0.42 USD" \
  "[title] (cleared) (updated 2026-01-02T03:04:05Z)" \
  "[session] updated 2026-01-02T03:04:06Z" "> earlier question" \
  "(thinking) pondering" "[link] notes.md (file:///n.md)" "[image image/png]" \
  "[plan] [x] P" "[plan p1] [>] X" "[plan p2]" "# Steps" \
  "[plan p3] file:///plan.md" "[plan p1] removed" "[mode] ask" \
  "[commands] none" "[warning] Rate limited: retrying" \
  "[compaction c1] in_progress" "[compaction c1] we talked" \
  "[compaction c1] failed: too long" "[tool] Fetch page (in_progress)" \
  "[tool] Fetch example.com" "[tool] Fetch example.com: completed" \
  "[tool] t7: failed" "[update] brand_new_kind (a kind this client does not know)"
expect "/update: no bare [kind] line" \
  test "$(grep -c '^\[[a-z_]*\]$' "$work/err")" = 0

cl elicit-yes $none --yes -p "/elicit What is your name?"
check "/elicit with --yes: declined" 0 "elicitation: decline
" "[question] What is your name?" "declined (no interactive answer)"

cl elicit-ans "$work/in-ada" -p "/elicit What is your name?"
check "/elicit answered on stdin: accepted with the answer" 0 \
  "elicitation: accept
{\"answer\":\"Ada Lovelace\"}
" "[question] What is your name?"

cl elicit-eof $none -p "/elicit Name?"
check "/elicit with stdin at EOF: not accepted" 0 "elicitation: cancel
"

cl sleep $none -p "before
/sleep 50
after"
check "/sleep 50 then text" 0 "before
after
"

cl error $none -p "some text
/error 123 boom"
check "/error 123 boom: exit 1, message shown" 1 "some text
" "error 123: boom"

cl error-dflt $none -p "/error"
check "/error with no code: internal error" 1 "" \
  "error -32603: error requested by the prompt"

cl stop-ref $none -p "/stop refusal"
check "/stop refusal: exit 4" 4 "" "[stop] refusal"
cl stop-tok $none -p "partial
/stop max_tokens
not sent"
check "/stop max_tokens: exit 5, later steps not run" 5 "partial
" "[stop] max_tokens"
cl stop-req $none -p "/stop max_turn_requests"
check "/stop max_turn_requests: exit 6" 6 "" "[stop] max_turn_requests"
cl stop-can $none -p "/stop cancelled"
check "/stop cancelled: exit 3" 3 "" "[stop] cancelled"
cl stop-end $none -p "/stop end_turn"
check "/stop end_turn: exit 0" 0 ""

cl unknown $none -p "/frobnicate the widget
/9 is text"
check "unknown command reported as text; /9 is plain text" 0 \
  "unknown command: /frobnicate the widget
/9 is text
"

if [ -n "$wrap" ]; then
  skipped="$skipped /big"
else
  cl big $none --quiet -p "/big 3000000"
  yes 'The quick brown fox jumps over the lazy dog; 0123456789 ACP/MCP.' |
    head -c 3000000 >"$work/big"
  echo >>"$work/big"
  expect "/big 3000000: exit 0" test "$rc" = 0
  expect "/big 3000000: stdout is exactly the 3000000 bytes + newline" \
    cmp -s "$work/big" "$work/out"
  expect "/big 3000000: byte count 3000001" \
    test "$(wc -c <"$work/out")" -eq 3000001
fi
cl big-line $none -p "/big 65"
check "/big 65: one whole line, no newline added" 0 \
  "The quick brown fox jumps over the lazy dog; 0123456789 ACP/MCP.
"

# MARK: - Cancellation with SIGINT

# wait_for FILE TEXT: poll until FILE contains TEXT (bounded).
wait_for() {
  _i=0
  while [ $_i -lt $POLL ] && ! grep -qF -- "$2" "$1" 2>/dev/null; do
    sleep 0.1
    _i=$((_i + 1))
  done
}

$wrap "$acp" client --cwd "$cwd" -p "/wait" -- $wrap "$acp" agent \
  </dev/null >"$work/out" 2>"$work/err" &
pid=$!
wait_for "$work/out" "waiting for session/cancel"
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
vg_check "wait-sigint"
check "/wait + SIGINT: cancelled, exit 3" 3 "waiting for session/cancel
" "^C: cancelling the turn (again to quit)" "[stop] cancelled"

# A tool call still running when Ctrl-C sends session/cancel: the client
# shows it cancelled at once (prompt-turn Cancellation, the client's
# SHOULD), and the v1 agent's later "failed" for it is not shown over that.
$wrap "$acp" client --cwd "$cwd" -p "/cancellable Long job" -- $wrap "$acp" agent \
  </dev/null >"$work/out" 2>"$work/err" &
pid=$!
wait_for "$work/err" "[tool] Long job (in_progress)"
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
vg_check "cancellable-sigint"
check "v1 tool call running + SIGINT: shown cancelled, exit 3" 3 "" \
  "[tool] Long job (in_progress)" "[tool] Long job: cancelled" "[stop] cancelled" \
  "![tool] Long job: failed"

# A permission question pending when Ctrl-C comes: answered "cancelled".
mkfifo "$work/fifo"
$wrap "$acp" client --cwd "$cwd" -p "/ask Edit
not reached" -- $wrap "$acp" agent <"$work/fifo" >"$work/out" 2>"$work/err" &
pid=$!
exec 3>"$work/fifo"
wait_for "$work/err" "choose 1-4"
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
exec 3>&-
vg_check "ask-sigint"
check "/ask pending + SIGINT: cancelled, exit 3" 3 "" "[stop] cancelled" \
  "!-> reject" "!-> allow"

# MARK: - Broken agents

run no-agent $wrap "$acp" client --cwd "$cwd" -p hi -- "$work/no/such/agent"
check "agent command that does not exist: clear error, exit 1" 1 "" \
  "acp client: cannot start the agent '$work/no/such/agent': no such file or directory"

run false-agent $wrap "$acp" client --cwd "$cwd" -p hi -- false
check "agent that exits at once (false): exit 1, says so" 1 "" \
  "the agent exited (status 1, signal 0)"

run garbage $wrap "$acp" client --cwd "$cwd" -p hi -- \
  sh -c 'echo "this is not json"; echo "{\"jsonrpc\":"; exit 0'
check "agent that prints garbage then exits: exit 1" 1 "" \
  "initialize failed: Connection closed"

run garbage-2 $wrap "$acp" client --cwd "$cwd" -p hi -- \
  sh -c 'echo "garbage"; exit 9'
check "agent that prints garbage then exits 9: exit 1, status shown" 1 "" \
  "the agent exited (status 9, signal 0)"

run bad-cwd $wrap "$acp" client --cwd "$work/no/such/dir" -p hi
check "--cwd that does not exist: exit 2" 2 "" "acp client: --cwd"

# MARK: - Interactive mode (prompts read from stdin)

printf 'first answer\nsecond answer\n' >"$work/lines"
cl inter "$work/lines"
check "interactive: two piped prompts both answered, EOF exits 0" 0 \
  "first answer
second answer
" "session sess_1 in $real_cwd"

printf 'one\n\n/stop refusal\n/quit\nnever sent\n' >"$work/lines"
cl inter-quit "$work/lines"
check "interactive: empty line skipped, stop reason noted, /quit exits 0" 0 \
  "one
" "[stop] refusal"

printf '/ask Edit\n1\nlast line without newline' >"$work/lines"
cl inter-ask "$work/lines"
check "interactive: a permission answered by the next line" 0 \
  "permission granted (allow_once)
last line without newline
" "-> allow_once"

cl inter-eof $none
check "interactive: immediate EOF exits 0" 0 ""

# MARK: - ACP v2 (--protocol-v2 on both sides)

# The interactive front end over v2: a diff shown from its changes and git
# patch, /mode through set_config_option (v2 has no session/set_mode),
# requires_action before a permission answered by the next line, /resume
# without replay, /load as a resume replaying from the start (v2 has no
# session/load: the permission text comes back), /auth as auth/login.
printf '//diff src/a.c\n/mode ask\n//ask Edit\n1\n/resume sess_1\n/load sess_1\n/auth nope\n//plan-other:notes Remember the cache\n//diff:move a.c b.c\n//diff:add:binary img.png\n/help\n' \
  >"$work/lines"
timeout $T $wrap "$acp" client --cwd "$cwd" --interactive --protocol-v2 \
  -- $wrap "$acp" agent --protocol-v2 <"$work/lines" >"$work/out" 2>"$work/err"
rc=$?
vg_check inter-v2
check "interactive v2: diff, /mode, permission, /resume, /load, /auth" 0 \
  "permission granted (allow_once)
permission granted (allow_once)
" "protocol version 2" "modify $real_cwd/src/a.c (text)" "  +new line" \
  "[waiting for you]" "-> allow_once" "/auth failed: error -32602" \
  "[commands] /plan /read /wait" "the agent's commands (sent as prompts): /plan /read /wait" \
  "[plan notes] (_acp_note) Remember the cache" \
  "move $real_cwd/a.c -> $real_cwd/b.c (text)" "rename from $real_cwd/a.c" \
  "add $real_cwd/img.png (binary)" \
  "!unknown command" "!error -32601" "!a kind this client does not know"

# /cancel-tool ID while a v2 turn runs: the line is taken at once (the
# cancellable call is shown with its id), tool_call/cancel ends that call
# and the turn goes on; once idle, the same command is refused by the agent.
rm -f "$work/fifo"
mkfifo "$work/fifo"
$wrap "$acp" client --cwd "$cwd" --interactive --protocol-v2 -- \
  $wrap "$acp" agent --protocol-v2 <"$work/fifo" >"$work/out" 2>"$work/err" &
pid=$!
exec 3>"$work/fifo"
printf '//cancellable Long job\n' >&3
wait_for "$work/err" "/cancel-tool tool_1"
printf '/cancel-tool tool_1\nafter\n' >&3
wait_for "$work/out" "after"
printf '/cancel-tool tool_1\n' >&3
wait_for "$work/err" "/cancel-tool failed"
exec 3>&-
wait $pid
rc=$?
vg_check "cancel-tool"
check "interactive v2: /cancel-tool during the turn, refused when idle" 0 \
  "tool call cancelled
after
" "[tool] Long job can be cancelled: /cancel-tool tool_1" \
  "[cancel-tool] accepted" "[tool] Long job: cancelled" \
  "/cancel-tool failed: error -32602"

# The v2 cancel of a turn: Ctrl-C sends session/cancel and the client waits
# for the idle state_update (stop reason cancelled) before it exits 3. A /run
# (the agent runs the command itself under v2; its output is shown) is
# stopped, a pending permission question (requires_action) is answered
# cancelled.
printf '#!/bin/sh\necho $$ >"%s"\necho started\nexec sleep 60\n' "$work/slow.pid" \
  >"$cwd/slow.sh"
chmod +x "$cwd/slow.sh"
rm -f "$work/slow.pid"
: >"$work/err" # wait_for must not see the previous run's "started"
$wrap "$acp" client --cwd "$cwd" --protocol-v2 -p "/run ./slow.sh" -- \
  $wrap "$acp" agent --protocol-v2 </dev/null >"$work/out" 2>"$work/err" &
pid=$!
wait_for "$work/err" "started"
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
vg_check "v2-run-sigint"
# (the command's end is reported before the idle state_update, which ends
# the client: its exit status shows here)
check "v2 /run + SIGINT: the turn ends idle/cancelled, exit 3" 3 "" \
  "[terminal term_1] ./slow.sh" "started" "[terminal term_1] killed by SIGTERM" \
  "[stop] cancelled" "!a kind this client does not know"
_i=0
while [ -s "$work/slow.pid" ] && kill -0 "$(cat "$work/slow.pid")" 2>/dev/null &&
  [ $_i -lt $POLL ]; do
  sleep 0.1
  _i=$((_i + 1))
done
expect "v2 /run + SIGINT: the command was stopped" \
  sh -c "[ -s '$work/slow.pid' ] && ! kill -0 \$(cat '$work/slow.pid') 2>/dev/null"
# A command that leaves a child holding its output open: the turn ends
# when the command has exited, not when the child closes the pipe.
printf '#!/bin/sh\nsleep 60 &\necho $! >"%s"\necho started\nwait\n' "$work/orphan.pid" \
  >"$cwd/orphan.sh"
chmod +x "$cwd/orphan.sh"
: >"$work/err" # wait_for must not see the previous run's "started"
$wrap "$acp" client --cwd "$cwd" --protocol-v2 -p "/run ./orphan.sh" -- \
  $wrap "$acp" agent --protocol-v2 </dev/null >"$work/out" 2>"$work/err" &
pid=$!
wait_for "$work/err" "started"
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
[ -s "$work/orphan.pid" ] && kill "$(cat "$work/orphan.pid")" 2>/dev/null
vg_check "v2-run-orphan-sigint"
check "v2 /run + SIGINT, the command's child keeps its stdout: ends at its exit" 3 "" \
  "[terminal term_1] killed by SIGTERM" "[stop] cancelled"
# A command that ignores SIGTERM (ignored signals survive exec, so the
# sleep itself ignores it): after the grace it gets SIGKILL, its exit is
# reported and the turn ends (the previous agent waited for it forever).
printf '#!/bin/sh\ntrap "" TERM\necho $$ >"%s"\necho started\nexec sleep 60\n' \
  "$work/deaf.pid" >"$cwd/deaf.sh"
chmod +x "$cwd/deaf.sh"
rm -f "$work/deaf.pid"
: >"$work/err" # wait_for must not see the previous run's "started"
$wrap "$acp" client --cwd "$cwd" --protocol-v2 -p "/run ./deaf.sh" -- \
  $wrap "$acp" agent --protocol-v2 --kill-grace 200 </dev/null >"$work/out" \
  2>"$work/err" &
pid=$!
wait_for "$work/err" "started"
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
[ -s "$work/deaf.pid" ] && kill -KILL "$(cat "$work/deaf.pid")" 2>/dev/null
vg_check "v2-run-deaf-sigint"
check "v2 /run of a command ignoring SIGTERM + SIGINT: SIGKILL, exit reported" 3 "" \
  "[terminal term_1] killed by SIGKILL" "[stop] cancelled"
run "agent --kill-grace soon" "$acp" agent --kill-grace soon
check "agent --kill-grace soon: usage error" 2 "" "--kill-grace: expected milliseconds"
$wrap "$acp" client --cwd "$cwd" --protocol-v2 -p "/ask Edit
not reached" -- $wrap "$acp" agent --protocol-v2 <"$work/fifo" >"$work/out" \
  2>"$work/err" &
pid=$!
exec 3>"$work/fifo"
wait_for "$work/err" "choose 1-4"
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
exec 3>&-
vg_check "v2-ask-sigint"
check "v2 /ask pending + SIGINT: answered cancelled, idle/cancelled, exit 3" 3 "" \
  "[waiting for you]" "[stop] cancelled" "!-> reject" "!-> allow" "!not reached"

# MARK: - Unstable methods (acp agent --unstable)

# The newest unstable updates and calls, end to end: the agent sends them,
# acp client renders each (nothing as a bare [kind]) and answers terminal/kill
# and the url elicitation; usage comes back in the PromptResponse.
printf '/subagent sess_child Research\n/message sess_child Look into the logs\n/auth unauthenticated\n/turn-usage 120 30\n/kill sleep 30\n/elicit-url https://example.invalid/login\ndone' >"$work/uprompt"
run unstable "$acp" client --cwd "$cwd" --yes -p "$(cat "$work/uprompt")" -- \
  $wrap "$acp" agent --unstable
check "unstable: subagent, session message, auth, usage, kill, url elicitation" 0 \
  "terminal killed
killed by SIGKILL
elicitation: accept
elicitation complete
done
" "[subagent sess_child] Research (running)" \
  "[message msg_1] sess_1 -> sess_child" "[message msg_1] Look into the logs" \
  "[auth] unauthenticated" "[tool] sleep 30: failed" \
  "[visit] Please sign in: https://example.invalid/login" \
  "[visit elicit_1] done" "[turn] 120 tokens in, 30 out, 150 total" \
  "!a kind this client does not know"
run unstable-decline "$acp" client --cwd "$cwd" -p "/elicit-url https://example.invalid/x" -- \
  $wrap "$acp" agent --unstable
check "unstable: a url elicitation without --yes is declined" 0 \
  "elicitation: decline
" "[visit] Please sign in: https://example.invalid/x" "declined" "![visit elicit_1] done"

# MARK: - The echo agent and the bench client

# acp agent --echo forwards a single text block as it came (escapes kept);
# a lone surrogate escape is decoded (U+FFFD) and escaped again.
printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}' \
  '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}' \
  '{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"a\n\u00e9\"b\/c"}]}}' \
  '{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"x\ud800y"}]}}' \
  >"$work/echo-in"
timeout $T $wrap "$acp" agent --echo --read-spin-us 100 <"$work/echo-in" >"$work/out" 2>"$work/err"
rc=$?
vg_check echo-agent
expect "acp agent --echo: the text block forwarded as it came" \
  grep -qF '"content":{"type":"text","text":"a\n\u00e9\"b\/c"}' "$work/out"
expect "acp agent --echo: a lone surrogate escape comes back as U+FFFD" \
  sh -c "[ $rc = 0 ] && grep -qF '\"text\":\"x$(printf '\357\277\275')y\"' '$work/out'"
expect "acp agent --echo: both turns end" \
  sh -c "[ \$(grep -c '\"stopReason\":\"end_turn\"' '$work/out') = 2 ]"

# Large turns, read in place, with and without the read-side spin.
if [ -z "$wrap" ]; then
  for spin in 0 200; do
    run "bench-1m-spin$spin" "$acp" bench-client --read-spin-us $spin --payload 1048576 --turns 3 -- "$acp" agent --echo --read-spin-us $spin
    expect "acp bench-client: three 1 MiB turns echoed (spin $spin us)" \
      sh -c "[ $rc = 0 ] && grep -q '\"payload\":1048576,\"turns\":3,' '$work/out' && grep -q '\"agent_exit\":0,\"client_cpu_us\":' '$work/out'"
  done
  run bench-small "$acp" bench-client --read-spin-us 50 --payload 5 --turns 200 -- "$acp" agent --echo --read-spin-us 50
  expect "acp bench-client: 200 small turns with a 50 us spin" \
    sh -c "[ $rc = 0 ] && grep -q '\"turns\":200,' '$work/out'"
  # Text of 2-, 3- and 4-byte characters: the JSON layer's UTF-8 steps
  # on both sides, every echo compared byte for byte by the client.
  for size in 65536 65537 1048575; do
    run "bench-utf8-$size" "$acp" bench-client --text utf8 --payload $size --turns 5 -- "$acp" agent --echo
    expect "acp bench-client --text utf8: $size-byte turns echoed byte for byte" \
      sh -c "[ $rc = 0 ] && grep -q '\"payload\":$size,\"turns\":5,' '$work/out'"
  done
  run bench-text-bad "$acp" bench-client --text latin1 -- "$acp" agent --echo
  expect "acp bench-client --text latin1: refused with a usage error" \
    sh -c "[ $rc = 2 ] && grep -q 'text takes ascii or utf8' '$work/err'"
else
  skipped="$skipped bench-1m"
fi

# MARK: - Help, version, bad options

run help $wrap "$acp" --help
expect "acp --help: exit 0, usage on stdout" \
  sh -c "[ $rc = 0 ] && grep -q '^usage: acp <command>' '$work/out'"
for c in agent client demo bench-client; do
  run "help-$c" $wrap "$acp" $c --help
  expect "acp $c --help: exit 0, usage on stdout" \
    sh -c "[ $rc = 0 ] && grep -q '^usage: acp $c' '$work/out'"
done
run help-agent-lang $wrap "$acp" agent --help
expect "acp agent --help lists the prompt language" \
  sh -c "grep -q '/ask\[:KIND\] TITLE' '$work/out' && grep -q '/big BYTES' '$work/out'"

run version $wrap "$acp" --version
expect "acp --version: exit 0, 'acp X.Y.Z (libacp X.Y.Z)'" \
  sh -c "[ $rc = 0 ] && grep -Eq '^acp [0-9]+\.[0-9]+\.[0-9]+ \(libacp [0-9]+\.[0-9]+\.[0-9]+\)$' '$work/out'"
run version-V $wrap "$acp" -V
expect "acp -V: exit 0" test "$rc" = 0

run noargs $wrap "$acp"
expect "acp with no command: exit 2, usage on stderr" \
  sh -c "[ $rc = 2 ] && grep -q '^usage: acp' '$work/err'"
run badcmd $wrap "$acp" frobnicate
expect "acp frobnicate: exit 2, unknown command" \
  sh -c "[ $rc = 2 ] && grep -q \"unknown command 'frobnicate'\" '$work/err'"
for c in agent client demo bench-client; do
  run "bad-$c" $wrap "$acp" $c --bogus
  expect "acp $c --bogus: exit 2, names the option" \
    sh -c "[ $rc = 2 ] && grep -q -- \"unknown option '--bogus'\" '$work/err'"
done
run missing-value $wrap "$acp" client --cwd
expect "acp client --cwd (no value): exit 2" test "$rc" = 2
run missing-p $wrap "$acp" client -p
expect "acp client -p (no value): exit 2" test "$rc" = 2
# Numbers are whole decimal numbers in range: no sign, space, suffix or
# overflow (strtoul alone would take ' 5', wrap '-1' and read '5x' as 5).
for bad in "agent --read-spin-us abc" "agent --read-spin-us -1" \
  "agent --read-spin-us 1000001" "bench-client --payload 5x -- true" \
  "bench-client --turns 0 -- true" \
  "bench-client --turns 18446744073709551616 -- true" \
  "bench-client --read-spin-us +5 -- true" \
  "mcp tools --timeout 1e3 --stdio true" \
  "mcp login http://127.0.0.1:9/ --timeout 0" \
  "conductor --stdin-grace 18446744073709551616 agent true" \
  "conductor --term-grace -1 agent true" \
  "serve --max-connections 18446744073709551616 -- true"; do
  # The option is the first --word whose value is not a URL or command.
  opt=$(echo "$bad" | grep -o -- '--[a-z-]* [^ ]*' | grep -v -- '--stdio' |
    head -1)
  val=${opt#* }
  opt=${opt%% *}
  run bad-number $wrap "$acp" $bad </dev/null
  expect "acp $bad: exit 2, names $opt and the value" \
    sh -c "[ $rc = 2 ] && grep -qF -- \"$opt\" '$work/err' && grep -qF -- \"$val\" '$work/err'"
done
run good-number $wrap "$acp" bench-client --payload 3 --turns 2 -- "$acp" agent --echo --read-spin-us 0
expect "acp bench-client --payload 3 --turns 2: exit 0, 2 turns" \
  sh -c "[ $rc = 0 ] && grep -q '\"turns\":2' '$work/out'"

# MARK: - acp demo

run demo $wrap "$acp" demo
# The demo runs through `acp conductor` with the context proxy (AGENTS.md
# comes first) and the arrow proxy ('>' before each message of the agent,
# not before each streamed chunk).
expect "acp demo: the agent's closing words on stdout" \
  grep -q "^>That is the tour" "$work/out"
expect "acp demo: AGENTS.md injected by the context proxy" \
  grep -q "^>(AGENTS.md, put in front of the prompt by the context proxy" "$work/out"
expect "acp demo: the agent called the tools proxy's MCP tool over ACP" \
  grep -q "^This line is the answer of the echo tool of an MCP server" "$work/out"
sed -n 2,3p "$work/out" >"$work/out2"
mv "$work/out2" "$work/out"
check "acp demo: exit 0, summary written" 0 \
  "Hello! I am the libacp reference agent. Each line you see arrived as an
agent_message_chunk, streamed over ACP (JSON-RPC on a pipe).
" "== summary.txt, written by the client for the agent: The demo ran: streaming, a plan, tool calls, a permission request and file access." \
  "== demo finished"
# Under a wrapper only the outer acp runs under it (demo spawns itself).
run demo-keep "$acp" demo --keep
kept=$(sed -n 's/^== kept //p' "$work/err")
expect "acp demo --keep: summary.txt kept with its content" \
  sh -c "[ $rc = 0 ] && [ -n '$kept' ] && grep -qx 'The demo ran: streaming, a plan, tool calls, a permission request and file access.' '$kept/summary.txt'"
case $kept in /tmp/acp-demo-*) rm -rf "$kept" ;; esac

# Blocking reads (docs/decisions.md, "Blocking reads"): once they
# answered, `acp agent` and `acp mcp serve` wait for the next message in
# read(2) on their stdin pipe, or in epoll with --no-read-block. Seen in
# /proc/PID/wchan (pipe_read or anon_pipe_read, do_epoll_wait); skipped
# where the kernel hides it ("0") and under a wrapper (the wait is the
# wrapper's).
wchan_wait() { # wchan_wait PID PATTERN: PID's wchan once it matches (10 s at most; else the last seen)
  _w=
  _i=0
  while [ $_i -lt 100 ]; do
    _w=$(cat "/proc/$1/wchan" 2>/dev/null)
    # "0" is a task that runs (or a kernel that hides wchan): wait on.
    # shellcheck disable=SC2254 # $2 is a pattern
    case $_w in $2) break ;; esac
    sleep 0.1
    _i=$((_i + 1))
  done
  echo "$_w"
}
stdin_wait() { # stdin_wait PATTERN LINE ARGS...: acp ARGS' wait after LINE
  _pat=$1 _line=$2
  shift 2
  rm -f "$work/bin" "$work/bout"
  mkfifo "$work/bin"
  "$acp" "$@" <"$work/bin" >"$work/bout" 2>/dev/null &
  _apid=$!
  exec 4>"$work/bin"
  printf '%s\n' "$_line" >&4
  _i=0
  while [ $_i -lt $POLL ] && ! grep -q '"id":1' "$work/bout"; do sleep 0.1; _i=$((_i + 1)); done
  _w=$(wchan_wait $_apid "$_pat")
  exec 4>&-
  wait $_apid
  echo "$_w"
}
acp_init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
mcp_init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
if [ -n "$wrap" ]; then
  skipped="$skipped read-block"
else
  w=$(stdin_wait '*pipe_read' "$acp_init" agent)
  case $w in
  0 | "") echo "skipped: the kernel does not show /proc/PID/wchan (read-block)" ;;
  *)
    for c in "agent" "mcp serve"; do
      init=$acp_init
      [ "$c" = agent ] || init=$mcp_init
      # shellcheck disable=SC2086 # "mcp serve" is two words
      w=$(stdin_wait '*pipe_read' "$init" $c)
      expect "acp $c waits in read(2) on its stdin pipe (wchan $w)" \
        sh -c "case '$w' in *pipe_read) exit 0;; esac; exit 1"
      # shellcheck disable=SC2086
      w=$(stdin_wait '*epoll_wait' "$init" $c --no-read-block)
      expect "acp $c --no-read-block waits in epoll (wchan $w)" \
        sh -c "case '$w' in *epoll_wait) exit 0;; esac; exit 1"
    done
    # The client side: acp bench-client waits for its agent's answer in
    # read(2) on the agent's stdout pipe, with the agent's process handle
    # active (its exit would end the read through SIGCHLD). The agent
    # answers initialize, then never session/new.
    cat >"$work/stall-agent" <<'EOS'
#!/bin/sh
read -r line
id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n' "$id"
while read -r line; do :; done
EOS
    chmod +x "$work/stall-agent"
    # Each waits for its own pattern: before initialize is answered the
    # client waits in epoll either way (its pipe is not registered yet).
    for f in "" --no-read-block; do
      pat='*pipe_read' what='waits for its agent in read(2)'
      [ -z "$f" ] || pat='*epoll_wait' what='--no-read-block waits in epoll'
      "$acp" bench-client --turns 1 $f -- "$work/stall-agent" >/dev/null 2>&1 &
      _bpid=$!
      w=$(wchan_wait $_bpid "$pat")
      kill $_bpid 2>/dev/null
      wait $_bpid 2>/dev/null
      expect "acp bench-client $what (wchan $w)" \
        sh -c "case '$w' in $pat) exit 0;; esac; exit 1"
    done
    ;;
  esac
fi

# Many sessions on one connection (past the 16 where the agent and the
# library also find sessions by a hash of their id): each prompt is echoed
# in its own session, a closed session is forgotten, the others go on.
{
  echo '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
  for i in $(seq 1 40); do
    echo '{"jsonrpc":"2.0","id":"n'$i'","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}'
  done
  for i in $(seq 1 40); do
    echo '{"jsonrpc":"2.0","id":"p'$i'","method":"session/prompt","params":{"sessionId":"sess_'$i'","prompt":[{"type":"text","text":"t'$i'"}]}}'
  done
  echo '{"jsonrpc":"2.0","id":"c7","method":"session/close","params":{"sessionId":"sess_7"}}'
  echo '{"jsonrpc":"2.0","id":"q7","method":"session/prompt","params":{"sessionId":"sess_7","prompt":[{"type":"text","text":"again"}]}}'
  echo '{"jsonrpc":"2.0","id":"q8","method":"session/prompt","params":{"sessionId":"sess_8","prompt":[{"type":"text","text":"again8"}]}}'
} >"$work/many.in"
ACP_AGENT_SEQUENTIAL_IDS=1 $wrap "$acp" agent --echo <"$work/many.in" \
  >"$work/out" 2>"$work/err"
rc=$?
vg_check many-sessions
expect "acp agent: 40 sessions, each prompt echoed in its own, a closed one forgotten" \
  sh -c "[ $rc -eq 0 ] &&
    [ \$(grep -c '\"stopReason\":\"end_turn\"' '$work/out') -eq 41 ] &&
    grep -q '\"sessionId\":\"sess_12\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"t12\"' '$work/out' &&
    grep -q '\"id\":\"q7\",\"error\":{\"code\":-32002' '$work/out' &&
    grep -q '\"id\":\"q8\",\"result\":{\"stopReason\":\"end_turn\"' '$work/out'"

[ -n "$skipped" ] && echo "skipped under the wrapper:$skipped"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
