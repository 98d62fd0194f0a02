#!/bin/sh
# run-remote-handoff.sh - `acp serve --handoff`: the agent takes the
# WebSocket and acp serve leaves the data path (issue 14).
#   - acp bench-client --url ws:// and acp client --url against
#     `acp serve --handoff -- acp agent [--echo]`: turns answered, serve
#     says it handed the connection, and serve read (/proc/PID/io rchar)
#     far less than the payload the turns carried; the same run without
#     --handoff reads all of it (the measure can fail)
#   - an agent that does not take the connection (cat): the client's
#     connection ends (bench-client fails, no hang), serve logs why with
#     1011 and serves the next connection
#   - the agent dying mid-turn (SIGKILL during a /wait turn): the client
#     ends with an error, serve logs the exit and keeps serving
#   - Streamable HTTP and wss:// under --handoff are relayed (a turn, no
#     handoff; wss:// only with the openssl program to make a certificate)
#   - a wrong token is refused (401) before any agent starts
#   - the connection cap counts handed connections; SIGTERM to serve with
#     a handed connection open stops its agent and serve exits 0
#   - no flag: handed when the agent is this build's acp agent (the same
#     file), relayed for anything else (a shell, a copy of acp, acp
#     conductor); --no-handoff relays acp agent too
#   - bad input: ACP_HANDOFF_FD naming no handoff makes acp agent fail
#     with a message; --help names --handoff
# Real processes, sockets on 127.0.0.1. No node needed.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
need_cmd curl
upgrade="-H Connection:Upgrade -H Upgrade:websocket -H Sec-WebSocket-Version:13 -H Sec-WebSocket-Key:dGhlIHNhbXBsZSBub25jZQ=="

# serve LOG ARGS...: acp serve --listen 127.0.0.1:0 --verbose ARGS; sets
# port, spid.
serve() {
  log=$1
  shift
  start_bg "$log" 'listening on ws://127\.0\.0\.1:[0-9]*/acp' \
    "$acp" serve --listen 127.0.0.1:0 --verbose "$@"
  spid=$bg_pid
  port=$(sed -n 's/.*listening on ws:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$log" | head -1)
}

# Bytes the process's main thread read: the thread's own count (the
# process's /proc/PID/io also adds the reaped children's, its agents').
rchar() { sed -n 's/^rchar: //p' "/proc/$1/task/$1/io"; }

# bench NAME PAYLOAD TURNS: acp bench-client against $port; status 0 when
# every turn was answered.
bench() {
  timeout 120 "$acp" bench-client --url "ws://127.0.0.1:$port/acp" \
    --payload "$2" --turns "$3" >"$work/b.json" 2>"$work/b.err" &&
    grep -q "\"turns\":$3[,}]" "$work/b.json"
}

# ---- handoff: turns answered, serve out of the data path -------------------
serve "$work/serve.log" --handoff -- "$acp" agent --echo
r0=$(rchar "$spid")
if bench x 4096 200; then ok "bench-client: 200 turns of 4 KiB over a handed WebSocket"
else ko "bench-client over a handed WebSocket" "$(cat "$work/b.json" "$work/b.err")"; fi
r1=$(rchar "$spid")
# 200 x 4 KiB went each way through the agent's socket: serve read only
# the upgrade request, the agent's answer on the control socket (and its
# empty stdout).
if [ $((r1 - r0)) -lt 65536 ]; then ok "serve read $((r1 - r0)) bytes for 800 KiB of payload"
else ko "serve read $((r1 - r0)) bytes: still in the data path"; fi
if grep -q "handed to agent pid" "$work/serve.log"; then ok "serve --verbose: handed to agent pid"
else ko "no handoff line" "$(cat "$work/serve.log")"; fi
out=$(timeout 30 "$acp" client --quiet --url "ws://127.0.0.1:$port/acp" -p "hello over the handed socket" 2>&1)
if [ "$out" = "hello over the handed socket" ]; then ok "acp client --url: a turn over a handed WebSocket"
else ko "acp client --url over a handed WebSocket" "$out"; fi
# Streamable HTTP is not handed: relayed as without --handoff.
n=$(grep -c "handed to agent pid" "$work/serve.log")
out=$(timeout 30 "$acp" client --quiet --url "http://127.0.0.1:$port/acp" --http -p "hello over http" 2>&1)
if [ "$out" = "hello over http" ] && [ "$(grep -c "handed to agent pid" "$work/serve.log")" = "$n" ]; then
  ok "Streamable HTTP under --handoff: relayed, a turn answered"
else ko "Streamable HTTP under --handoff" "$out"; fi
stop_pid "$spid"

# The same measure with --no-handoff: serve reads every byte (so the check
# above can fail).
serve "$work/relay.log" --no-handoff -- "$acp" agent --echo
r0=$(rchar "$spid")
bench x 4096 200
r1=$(rchar "$spid")
if [ $((r1 - r0)) -gt 819200 ]; then ok "without --handoff serve reads it all ($((r1 - r0)) bytes)"
else ko "relay rchar $((r1 - r0)) bytes"; fi
stop_pid "$spid"

# ---- an agent that does not take it; the agent dying mid-turn --------------
cat >"$work/agent.sh" <<EOS
#!/bin/sh
if [ -e "$work/plain" ]; then exec cat; fi
exec "$acp" agent
EOS
chmod +x "$work/agent.sh"
serve "$work/mixed.log" --handoff -- "$work/agent.sh"
touch "$work/plain"
if bench x 5 3; then ko "cat as the agent: bench-client succeeded"
else ok "cat as the agent: the client's connection ends (no hang)"; fi
if wait_for "$work/mixed.log" "did not take the connection.*closed with 1011" 100; then
  ok "serve logs the refused handoff (1011)"
else ko "no refusal line" "$(cat "$work/mixed.log")"; fi
rm -f "$work/plain"
if bench x 5 20; then ok "serve keeps serving: 20 turns after the refusal"
else ko "turns after the refusal" "$(cat "$work/b.json" "$work/b.err")"; fi
# Mid-turn death: a /wait turn, then SIGKILL to its agent.
n0=$(grep -c "agent pid" "$work/mixed.log")
timeout 60 "$acp" client --quiet --url "ws://127.0.0.1:$port/acp" -p "/wait" >"$work/c.out" 2>"$work/c.err" &
cpid=$!
wait_until 300 sh -c "[ \$(grep -c 'agent pid' '$work/mixed.log') -gt $n0 ]"
apid=$(grep "agent pid" "$work/mixed.log" | tail -1 | sed 's/.*agent pid \([0-9]*\).*/\1/')
wait_for "$work/mixed.log" "handed to agent pid $apid" 100
# The agent has read the prompt once it read three messages (initialize,
# session/new, session/prompt): wait for its third read.
wait_until 300 sh -c "[ \$(sed -n 's/^syscr: //p' /proc/$apid/io) -ge 3 ]"
kill -KILL "$apid"
wait "$cpid"
crc=$?
if [ "$crc" -ne 0 ] && [ "$crc" -ne 124 ]; then ok "agent killed mid-turn: the client ends with an error ($crc)"
else ko "agent killed mid-turn: client status $crc" "$(cat "$work/c.out" "$work/c.err")"; fi
if wait_for "$work/mixed.log" "the agent exited (status 0, signal 9)" 100; then
  ok "serve logs the agent's death"
else ko "no exit line" "$(cat "$work/mixed.log")"; fi
if bench x 5 5; then ok "serve keeps serving after an agent died"
else ko "turns after the death" "$(cat "$work/b.json" "$work/b.err")"; fi
stop_pid "$spid"

# ---- token, cap, SIGTERM -----------------------------------------------------
serve "$work/cap.log" --handoff --token sekrit --max-connections 1 -- "$acp" agent --echo
# shellcheck disable=SC2086
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 $upgrade "http://127.0.0.1:$port/acp")
if [ "$st" = 401 ] && ! grep -q "agent pid" "$work/cap.log"; then ok "wrong token: 401, no agent started"
else ko "token refusal: status $st" "$(cat "$work/cap.log")"; fi
# A connection held open (curl waits after the 101): handed, it counts.
# shellcheck disable=SC2086
curl -s -N --max-time 60 $upgrade -H "Authorization: Bearer sekrit" \
  "http://127.0.0.1:$port/acp" >/dev/null 2>&1 &
hold=$!
pids="$pids $hold"
if wait_for "$work/cap.log" "handed to agent pid" 100; then ok "a held connection is handed"
else ko "held connection not handed" "$(cat "$work/cap.log")"; fi
apid=$(grep "agent pid" "$work/cap.log" | head -1 | sed 's/.*agent pid \([0-9]*\).*/\1/')
# shellcheck disable=SC2086
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 $upgrade -H "Authorization: Bearer sekrit" "http://127.0.0.1:$port/acp")
if [ "$st" = 503 ]; then ok "the cap counts a handed connection: 503"
else ko "cap: status $st"; fi
kill -TERM "$spid"
wait "$spid"
rc=$?
if [ "$rc" -eq 0 ] && wait_gone "$apid" 100; then ok "SIGTERM: serve exits 0 and its handed agent is stopped"
else ko "SIGTERM: serve status $rc, agent $apid still there: $(kill -0 "$apid" 2>&1)" "$(cat "$work/cap.log")"; fi

# ---- TLS is not handed: relayed ---------------------------------------------
if command -v openssl >/dev/null 2>&1 &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$work/tls.key" -out "$work/tls.pem" -days 2 -subj "/CN=127.0.0.1" \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null; then
  start_bg "$work/tls.log" 'listening on wss://127\.0\.0\.1:[0-9]*/acp' \
    "$acp" serve --listen 127.0.0.1:0 --verbose --handoff --tls "$work/tls.pem" "$work/tls.key" -- "$acp" agent
  spid=$bg_pid
  port=$(sed -n 's/.*listening on wss:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$work/tls.log" | head -1)
  out=$(timeout 30 "$acp" client --quiet --url "wss://127.0.0.1:$port/acp" --ca "$work/tls.pem" -p "hello over tls" 2>&1)
  if [ "$out" = "hello over tls" ] && ! grep -q "handed to agent pid" "$work/tls.log"; then
    ok "wss:// under --handoff: relayed, a turn answered"
  else ko "wss:// under --handoff" "$out" "$(cat "$work/tls.log")"; fi
  stop_pid "$spid"
else
  echo "SKIP wss:// under --handoff: no openssl program"
fi

# ---- the default: handed to this build's acp agent, relayed to others ---------
# bench-client's turns answered; HANDED says whether serve logged a handoff.
default_case() {
  name=$1 handed=$2
  shift 2
  serve "$work/default-$name.log" -- "$@"
  if bench x 64 20; then
    n=$(grep -c "handed to agent pid" "$work/default-$name.log")
    if { [ "$handed" = yes ] && [ "$n" -ge 1 ]; } ||
      { [ "$handed" = no ] && [ "$n" = 0 ]; }; then
      ok "no flag, agent $name: 20 turns, handed: $handed"
    else ko "no flag, agent $name: handed: want $handed, saw $n lines" "$(cat "$work/default-$name.log")"; fi
  else ko "no flag, agent $name: turns" "$(cat "$work/b.json" "$work/b.err")"; fi
  stop_pid "$spid"
}
default_case "this acp" yes "$acp" agent --echo
# Another program (a shell that runs acp agent) is not known to take the
# socket, nor is another copy of acp (it may be another version).
default_case "sh" no sh -c 'exec "$0" agent --echo' "$acp"
cp "$acp" "$work/acp-copy"
default_case "a copy of acp" no "$work/acp-copy" agent --echo
default_case "this acp, other subcommand" no "$acp" conductor agent "$acp agent --echo"

# ---- bad input, help ---------------------------------------------------------
out=$(echo '{}' | ACP_HANDOFF_FD=0 timeout 10 "$acp" agent 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$out" | grep -q "handoff"; then ok "acp agent: no handoff on ACP_HANDOFF_FD fails with a message"
else ko "bad ACP_HANDOFF_FD: status $rc" "$out"; fi
out=$(ACP_HANDOFF_FD=x timeout 10 "$acp" agent </dev/null 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$out" | grep -q "ACP_HANDOFF_FD"; then ok "acp agent: ACP_HANDOFF_FD=x refused"
else ko "ACP_HANDOFF_FD=x: status $rc" "$out"; fi
"$acp" serve --help | grep -q -- "--no-handoff" && ok "serve --help names --handoff and --no-handoff" || ko "--help"
for l in "$work"/*.log; do
  if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$l"; then
    ko "sanitizer report in $(basename "$l")" "$(grep -A10 -E 'ERROR: |runtime error:' "$l" | head -30)"
  fi
done
finish remote-handoff
