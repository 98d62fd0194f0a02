#!/bin/sh
# run-client-tty.sh - `acp client` in a real terminal: tmux (a private
# server, fixed 100x40 size) runs `acp client --agent ref` (the agent named
# in an agents file at its default place, $XDG_CONFIG_HOME/acp/agents.json)
# against `acp agent`; the script types keys and checks what the screen
# shows: a prompt and its answer, slash commands, the agent's commands and
# their Tab completion, history recall with Up, a continued (multi-line)
# prompt, Ctrl-C at the prompt (clears the line) and during a turn
# (session/cancel), /cancel typed during a turn, colours, and Ctrl-D (quits with status 0, history kept).
#
# Env: ACP_BIN           the built acp (default: build/acp)
#      ACP_VALGRIND_WRAP a command prefix (see run-cli.sh) the client runs
#                        under; any report it prints fails the check.
# Exit status: 0 all passed, 1 some failed, 77 skipped (no acp, no tmux,
# or acp built without libedit).
set -u
wrap=${ACP_VALGRIND_WRAP:-}
# acp runs its remote commands and the terminal client in acp-remote
# (exec): under valgrind, follow that exec, and only it (acp processes they
# spawn, node and the shells stay as before: not under this valgrind).
case $wrap in
*valgrind*--trace-children=yes*) ;;
*valgrind*) wrap="$wrap --trace-children=yes --trace-children-skip=*/acp,*/node,*/sh,*/dash,*/bash,*/env,*/python3*,*/timeout,*/cat,*/sleep" ;;
esac
# How many 0.1 s polls to wait for the screen (valgrind is slow).
if [ -n "$wrap" ]; then tries=3000; else tries=300; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
if [ ! -x "$acp" ]; then
  echo "SKIP: $acp is not built"
  exit 77
fi
case $acp in /*) ;; *) acp=$(cd "$(dirname "$acp")" && pwd)/$(basename "$acp") ;; esac
if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: tmux is not installed (Debian package tmux)"
  exit 77
fi

work=$(mktemp -d)
sock1=acp-client-tty-$$
sock=$sock1
tm() { tmux -L "$sock" -f /dev/null "$@"; }
cleanup() {
  tmux -L "$sock1" kill-server 2>/dev/null
  tmux -L "$sock1-2" kill-server 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/cwd" "$work/config/acp" "$work/state"
cat >"$work/config/acp/agents.json" <<JSON
{"agents": {"ref": {"command": "$acp", "args": ["agent", "--unstable"],
                    "env": {"ACP_AGENT_SEQUENTIAL_IDS": "1"}}}}
JSON

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
ko() {
  fail=$((fail + 1))
  echo "FAIL $1"
  echo "     screen (last lines):"
  screen | tail -n 12 | sed 's/^/     | /'
}
screen() {
  tm capture-pane -p -J -S -200 -t t 2>/dev/null | sed 's/[[:space:]]*$//; /^$/d'
}

# expect NAME FIXED-STRING: wait until the screen shows the string (a line
# containing it), up to 30 s, then pass or fail.
expect() {
  _i=0
  while [ $_i -lt $tries ]; do
    if screen | grep -qF -- "$2"; then
      ok "$1"
      return 0
    fi
    sleep 0.1
    _i=$((_i + 1))
  done
  ko "$1 (no line with '$2')"
  return 1
}
# last_line NAME EXACT: the screen's last non-empty line is EXACT.
last_line() {
  _i=0
  while [ $_i -lt $tries ]; do
    if [ "$(screen | tail -n 1)" = "$2" ]; then
      ok "$1"
      return 0
    fi
    sleep 0.1
    _i=$((_i + 1))
  done
  ko "$1 (last line is not '$2')"
  return 1
}
keys() { tm send-keys -t t "$@"; }
# at_prompt: wait (silently) until the idle prompt is shown, so that the
# next keys go to the editor and not to the terminal's cooked mode.
at_prompt() {
  _i=0
  while [ $_i -lt $tries ]; do
    [ "$(screen | tail -n 1)" = ">" ] && return 0
    sleep 0.1
    _i=$((_i + 1))
  done
  ko "the prompt comes back"
}

tm new-session -d -s t -x 100 -y 40 \
  "env -u NO_COLOR XDG_CONFIG_HOME='$work/config' XDG_STATE_HOME='$work/state' \
   HOME='$work' TERM=screen $wrap '$acp' client --cwd '$work/cwd' --agent ref; \
   echo \$? >'$work/status'; sleep 600"
if ! expect "the client starts and shows its session" \
  "session sess_1 in $work/cwd; type a prompt (Ctrl-D quits)"; then
  if screen | grep -q "interactive editing is unavailable"; then
    echo "SKIP: acp was built without libedit"
    exit 77
  fi
fi
last_line "the prompt" ">"

keys "hello tty" Enter
expect "a prompt is answered" "hello tty"
last_line "back at the prompt after the turn" ">"

keys "/title Tty Title" Enter
expect "/title sets the title (session/set_title)" "[title] Tty Title"

at_prompt
keys "/nope" Enter
expect "an unknown command says so" \
  "unknown command /nope (/help lists them; //nope sends it to the agent as is)"

at_prompt
keys "/help" Enter
expect "/help lists the commands" "/resume ID         resume session ID (no replay)"

at_prompt
keys "//commands" Enter
expect "the agent's commands are listed" "[commands] /plan /read /wait"

# History: Up twice is the line before the last (/help), Ctrl-C drops it.
at_prompt
keys Up Up
last_line "Up Up recalls the line before last" "> /help"
keys C-c
expect "Ctrl-C at the prompt clears the line" "> /help^C"
last_line "a fresh prompt after Ctrl-C" ">"

# Tab completes the agent's advertised command; /wait makes the turn wait
# until it is cancelled, which Ctrl-C does.
at_prompt
keys "/wa" Tab
last_line "Tab completes an agent command" "> /wait"
keys Enter
expect "the agent's command runs as a prompt" "waiting for session/cancel"
keys C-c
expect "Ctrl-C during a turn cancels it" "[stop] cancelled"
last_line "the prompt after the cancelled turn" ">"

# While a turn runs the editor keeps reading: /cancel typed there cancels
# it (the running tool call shown cancelled at once), any other line is
# not sent and says why.
at_prompt
keys "//cancellable Tty job" Enter
expect "a tool call runs until cancelled" "[tool] Tty job (in_progress)"
last_line "the editor reads during a turn" "turn>"
keys "not now" Enter
expect "a line typed during a turn is not sent" "not sent: a turn is running"
keys "/cancel" Enter
expect "/cancel typed during a turn shows the tool call cancelled" \
  "[tool] Tty job: cancelled"
_i=0
while [ $_i -lt $tries ] &&
  [ "$(screen | grep -cxF "[stop] cancelled")" -lt 2 ]; do
  sleep 0.1
  _i=$((_i + 1))
done
if [ "$(screen | grep -cxF "[stop] cancelled")" -ge 2 ]; then
  ok "/cancel typed during a turn cancels it"
else
  ko "/cancel typed during a turn cancels it"
fi
last_line "the prompt after the turn cancelled by /cancel" ">"

# A trailing backslash continues the prompt on the next line.
at_prompt
keys 'first line\' Enter
last_line "a continued line prompts with ..." "..."
keys "second line" Enter
expect "the continued prompt is sent whole" "... second line"
expect "both lines are answered" "first line"

at_prompt
keys "//think deeply" Enter
expect "a thought is shown" "(thinking) deeply"
if tm capture-pane -p -e -J -S -200 -t t | grep "(thinking) deeply" |
  grep -q "$(printf '\033')\["; then
  ok "thoughts are styled on a terminal"
else
  ko "thoughts are styled on a terminal"
fi

# Streamed markdown, two bytes per chunk (every marker split somewhere):
# headings bold without their '#', bullets, **bold** and `code` styled
# without their markers, a fenced block kept verbatim and coloured.
at_prompt
keys '//chunks 2 # MdTitle\n- item **bold** and `code`\n```\nx **y**\n```\nend *e*' Enter
expect "markdown: the heading without its marker" "MdTitle"
expect "markdown: a bullet with bold and code, markers gone" \
  "$(printf '\342\200\242') item bold and code"
expect "markdown: the fenced block verbatim" "x **y**"
expect "markdown: emphasis without its stars" "end e"
if ! screen | grep -qx "MdTitle" || screen | grep -qx "# MdTitle"; then
  ko "markdown: no '# ' left on the heading"
else
  ok "markdown: no '# ' left on the heading"
fi
md_styled() {
  tm capture-pane -p -e -J -S -200 -t t | grep -F "$1" |
    grep -q "$(printf '\033')\["
}
if md_styled "MdTitle" && md_styled "item" && md_styled "x **y**"; then
  ok "markdown: heading, bullet line and code block are styled"
else
  ko "markdown: heading, bullet line and code block are styled"
fi

# A permission question is asked at a "choose:" prompt.
at_prompt
keys "//ask Edit the file" Enter
expect "a permission request is shown" "[permission] Edit the file"
last_line "and asked at its own prompt" "choose:"
keys "1" Enter
expect "the answer picks the first option" "-> allow"
last_line "the prompt after the answered turn" ">"

at_prompt
keys "/fork" Enter
expect "/fork switches to the copy" "session sess_2"
at_prompt
keys "/list" Enter
expect "/list marks the current session" "* sess_2"

at_prompt
keys C-d
_i=0
while [ ! -s "$work/status" ] && [ $_i -lt $tries ]; do
  sleep 0.1
  _i=$((_i + 1))
done
if [ "$(cat "$work/status" 2>/dev/null)" = 0 ]; then
  ok "Ctrl-D quits with status 0"
else
  ko "Ctrl-D quits with status 0 (status: $(cat "$work/status" 2>/dev/null))"
fi
if [ -n "$wrap" ] && screen | grep -q '^==[0-9]*=='; then
  fail=$((fail + 1))
  echo "FAIL valgrind is clean on the terminal"
  screen | grep '^==[0-9]*==' | head -40
fi
if grep -q 'hello\\040tty' "$work/state/acp/history" 2>/dev/null; then
  ok "history kept in \$XDG_STATE_HOME/acp/history"
else
  ko "history kept in \$XDG_STATE_HOME/acp/history"
fi

tm kill-server 2>/dev/null

# NO_COLOR turns colour off on a terminal too; a resized window keeps the
# editor working.
rm -f "$work/status"
# A server of its own: the first one may still be going away.
sock=$sock1-2
tm new-session -d -s t -x 100 -y 40 \
  "env NO_COLOR=1 XDG_CONFIG_HOME='$work/config' XDG_STATE_HOME='$work/state' \
   HOME='$work' TERM=screen $wrap '$acp' client --cwd '$work/cwd' --agent ref; \
   echo \$? >'$work/status'; sleep 600"
expect "a second client starts" "type a prompt (Ctrl-D quits)"
at_prompt
keys "//think plainly" Enter
expect "a thought with NO_COLOR set" "(thinking) plainly"
if tm capture-pane -p -e -J -S -200 -t t | grep "(thinking) plainly" |
  grep -q "$(printf '\033')\["; then
  ko "NO_COLOR: no styling on a terminal"
else
  ok "NO_COLOR: no styling on a terminal"
fi
at_prompt
keys '//chunks 2 # NoColorTitle\n- it **b**' Enter
expect "NO_COLOR: markdown shown as it is" "# NoColorTitle"
expect "NO_COLOR: markers kept" "- it **b**"
if tm capture-pane -p -e -J -S -200 -t t | grep -F "NoColorTitle" |
  grep -q "$(printf '\033')\["; then
  ko "NO_COLOR: markdown not styled"
else
  ok "NO_COLOR: markdown not styled"
fi
at_prompt
tm resize-window -t t -x 60 -y 20
keys "after resize" Enter
expect "a prompt after the window was resized" "after resize"
last_line "the prompt after it" ">"
keys Up
last_line "Up recalls the line just sent" "> after resize"
# Up past this client's three lines (after resize, the markdown, the
# thought) to the first client's last one.
keys Up Up Up
last_line "and before it the first client's last line (history file)" "> /list"
keys C-u C-d
_i=0
while [ ! -s "$work/status" ] && [ $_i -lt $tries ]; do
  sleep 0.1
  _i=$((_i + 1))
done
if [ "$(cat "$work/status" 2>/dev/null)" = 0 ]; then
  ok "Ctrl-D quits the second client"
else
  ko "Ctrl-D quits the second client (status: $(cat "$work/status" 2>/dev/null))"
fi
tm kill-server 2>/dev/null

# Without a terminal: --interactive gives the slash commands to piped
# input, --color always styles notes and shows diffs, --agent errors.
run() { # run NAME STDIN ARGS...: rc, $work/out, $work/err
  _in=$2
  shift 2
  printf '%s' "$_in" | timeout 600 env XDG_CONFIG_HOME="$work/config" \
    $wrap "$acp" client --cwd "$work/cwd" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  if [ -n "$wrap" ] && grep -q '^==[0-9]*==' "$work/err"; then
    fail=$((fail + 1))
    echo "FAIL $1: valgrind is clean"
    grep '^==[0-9]*==' "$work/err" | head -40
  fi
}
has() { # has NAME FILE FIXED-STRING
  if grep -qF -- "$3" "$2"; then ok "$1"; else
    fail=$((fail + 1))
    echo "FAIL $1 (no '$3' in $(basename "$2"))"
    sed 's/^/     | /' "$2" | head -20
  fi
}
run piped "/nope
/title Piped
hi
" --interactive --agent ref
has "--interactive: unknown command on piped input" "$work/err" \
  "unknown command /nope"
has "--interactive: /title on piped input" "$work/err" "[title] Piped"
has "--interactive: a prompt on piped input" "$work/out" "hi"
diff='{"sessionUpdate":"tool_call","toolCallId":"d1","title":"Edit","status":"completed","content":[{"type":"diff","path":"/x.txt","oldText":"old","newText":"new"}]}'
run color "//think hmm
//update $diff
" --interactive --color always --agent ref
esc=$(printf '\033')
has "--color always dims thoughts" "$work/err" "${esc}[2;3m(thinking) hmm"
has "--color always: a completed tool call is green" "$work/err" \
  "${esc}[32m[tool] Edit (completed)"
has "a diff: old lines red" "$work/err" "${esc}[31m  -old${esc}[0m"
has "a diff: new lines green" "$work/err" "${esc}[32m  +new${esc}[0m"
run nocolor "//think hmm
" --interactive --agent ref
if grep -q "$esc" "$work/err"; then
  fail=$((fail + 1))
  echo "FAIL --color auto without a terminal: no escapes"
else
  ok "--color auto without a terminal: no escapes"
fi
run noagent "" --agent nosuch
if [ $rc -eq 2 ]; then ok "--agent NAME not in the file: exit 2"; else
  fail=$((fail + 1))
  echo "FAIL --agent NAME not in the file: exit 2 (got $rc)"
fi
has "--agent NAME not in the file: says so" "$work/err" \
  "agents file $work/config/acp/agents.json: no agent named \"nosuch\""
run badfile "" --agent ref --agents-file "$work/no-such.json"
has "--agents-file that does not exist: says so" "$work/err" \
  "agents file $work/no-such.json: No such file or directory"
printf '{"agents": {"x": {"args": []}}}' >"$work/bad.json"
run nocommand "" --agent x --agents-file "$work/bad.json"
has "an agent without a command: says so" "$work/err" \
  "agent \"x\": \"command\" must be a non-empty string"
run agenturl "" --agent ref --url ws://127.0.0.1:9/acp
has "--agent with --url: says they exclude each other" "$work/err" \
  "--agent and --url exclude each other"
run badcolor "" --color sometimes
if [ $rc -eq 2 ]; then ok "--color sometimes: exit 2"; else
  fail=$((fail + 1))
  echo "FAIL --color sometimes: exit 2 (got $rc)"
fi

echo "client-tty: $pass passed, $fail failed"
[ $fail -eq 0 ]
