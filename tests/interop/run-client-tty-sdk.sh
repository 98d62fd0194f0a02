#!/bin/sh
# run-client-tty-sdk.sh - `acp client` in a real terminal (a private tmux
# server, 100x40) against the official TypeScript SDK's agent
# (sdk_agent.mjs), named in an agents file: an echo turn, the scripted full
# turn with its permission question answered at the "choose:" prompt, a
# slash command the SDK agent does not implement, Ctrl-C during a waiting
# turn, and Ctrl-D.
#
# Env: ACP_BIN the built acp (default: build/acp)
# Exit 77 (skipped, with the reason) without tmux, node or the SDK, or
# when acp was built without libedit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
case $acp in /*) ;; *) acp=$(cd "$(dirname "$acp")" && pwd)/$(basename "$acp") ;; esac
if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: tmux is not installed (Debian package tmux)"; exit 77
fi
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed"; exit 77
fi
if ! "$root/tools/install-peers.sh" >/dev/null 2>&1; then
  echo "SKIP: the ACP TypeScript SDK could not be installed (tools/install-peers.sh)"
  exit 77
fi
work=$(mktemp -d)
sock=acp-client-tty-sdk-$$
tm() { tmux -L "$sock" -f /dev/null "$@"; }
trap 'tm kill-server 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/cwd" "$work/state"
echo "notes" >"$work/cwd/notes.txt"
cat >"$work/agents.json" <<JSON
{"agents": {"sdk": {"command": "node", "args": ["$here/sdk_agent.mjs"]}}}
JSON
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
screen() {
  tm capture-pane -p -J -S -200 -t t 2>/dev/null | sed 's/[[:space:]]*$//; /^$/d'
}
ko() {
  fail=$((fail + 1))
  echo "FAIL $1"
  screen | tail -n 12 | sed 's/^/     | /'
}
expect() { # NAME FIXED-STRING: a screen line contains it (waits up to 30 s)
  _i=0
  while [ $_i -lt 300 ]; do
    if screen | grep -qF -- "$2"; then ok "$1"; return 0; fi
    sleep 0.1
    _i=$((_i + 1))
  done
  ko "$1 (no line with '$2')"
}
last_line() { # NAME EXACT: the last non-empty line is EXACT (waits)
  _i=0
  while [ $_i -lt 300 ]; do
    if [ "$(screen | tail -n 1)" = "$2" ]; then ok "$1"; return 0; fi
    sleep 0.1
    _i=$((_i + 1))
  done
  ko "$1 (last line is not '$2')"
}
keys() { tm send-keys -t t "$@"; }

tm new-session -d -s t -x 100 -y 40 \
  "env XDG_STATE_HOME='$work/state' HOME='$work' TERM=screen \
   '$acp' client --cwd '$work/cwd' --agent sdk --agents-file '$work/agents.json'; \
   echo \$? >'$work/status'; sleep 600"
expect "the client starts on the SDK agent" "type a prompt (Ctrl-D quits)"
if screen | grep -q "interactive editing is unavailable"; then
  echo "SKIP: acp was built without libedit"; exit 77
fi
keys "echo:hello sdk" Enter
expect "an echo turn" "hello sdk"
last_line "the prompt after it" ">"

keys "read $work/cwd/notes.txt" Enter
expect "the SDK agent's permission question" "[permission]"
last_line "asked at the choose: prompt" "choose:"
keys "1" Enter
expect "allowed: the file is read through the client" "file content: notes"
last_line "the prompt after the full turn" ">"

keys "/list" Enter
expect "a method the SDK agent lacks is reported" \
  "/list: this agent does not support it (method not found)"

last_line "the prompt after /list" ">"
keys "wait" Enter
expect "a waiting turn" "waiting for cancel"
keys C-c
expect "Ctrl-C cancels it" "[stop] cancelled"
last_line "the prompt after the cancelled turn" ">"

keys C-d
_i=0
while [ ! -s "$work/status" ] && [ $_i -lt 300 ]; do
  sleep 0.1
  _i=$((_i + 1))
done
if [ "$(cat "$work/status" 2>/dev/null)" = 0 ]; then
  ok "Ctrl-D quits with status 0"
else
  ko "Ctrl-D quits with status 0 (status: $(cat "$work/status" 2>/dev/null))"
fi
echo "client-tty-sdk: $pass passed, $fail failed"
[ $fail -eq 0 ]
