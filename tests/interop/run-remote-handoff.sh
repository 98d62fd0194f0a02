#!/bin/sh
# run-remote-handoff.sh - `acp serve --handoff -- acp agent` (the agent
# adopts the WebSocket, serve leaves the data path) against the official
# ACP TypeScript SDK's experimental/ws-client and raw `ws` peers:
#   - sdk_client.mjs --url: full, echo and cancelled turns, each on a
#     handed connection (serve says so);
#   - frames on the adopted link: an oversized message closes with 1009,
#     a binary frame is ignored, a peer that never answers pings is
#     dropped (the agent's pings, at the --ping-ms serve passed on);
#   - a client that vanishes mid-turn: its agent sees the drop itself and
#     exits, serve closes the connection and keeps serving;
#   - an agent that exits with 1 before taking the connection: the client
#     gets close 1011;
#   - serve's settings: the handoff message carries --stall-timeout (serve
#     says what it sent); SIGTERM to serve: a handed client gets close
#     1001 (going away), as a relayed one does;
#   - --session-grace with --handoff (a real `acp agent`, which keeps its
#     sessions): a client dropped mid-turn (no close frame) reconnects
#     with its cookie to the same agent, whose turn was cancelled (a new
#     prompt on the old session answers, the old turn's answer never
#     comes) and session/load replays it; a wrong cookie gets a new agent;
#     a grace that runs out stops the agent; dropped while the agent asks
#     permission (protocols 1 and 2, handed and relayed): the question is
#     given up and the next prompt on the session is served; the relay's
#     own resume over WebSocket (--no-handoff), where the cancelled turn's
#     answer and updates never reach the new connection, even when the
#     agent writes them after the reconnect (late_agent.mjs, protocols 1
#     and 2), when it is longer than 64 KiB, or the new client reuses the
#     cancelled prompt's id; a new client's load or prompt of the dropped
#     session waits until the agent ended the cancelled turn.
# Needs ACP_BIN, node; installs the peers if missing (exit 77 without).
. "$(cd "$(dirname "$0")" && pwd)/remote-common.sh"
need_peers

start_serve "$work/serve.log" --handoff --max-message 1048576 --ping-ms 200 -- "$acp" agent
url="ws://127.0.0.1:$port/acp"
for sc in full echo cancel; do
  n=$(grep -c "handed to agent pid" "$work/serve.log")
  out=$(timeout 60 node "$here/sdk_client.mjs" --dialect acp --scenario $sc \
        --url "$url" 2>&1)
  if [ $? -eq 0 ] && [ "$(grep -c "handed to agent pid" "$work/serve.log")" -gt "$n" ]; then
    ok "SDK ws-client -> acp serve --handoff: $sc (handed)"
  else ko "SDK ws-client -> acp serve --handoff: $sc" "$out" "$(tail -5 "$work/serve.log")"; fi
done

out=$(timeout 30 node "$here/remote_peer.mjs" big "$url" 2000000 2>&1)
[ $? -eq 0 ] && ok "adopted link: oversized message, close 1009" || ko "oversized message" "$out"
out=$(timeout 30 node "$here/remote_peer.mjs" binary "$url" 2>&1)
[ $? -eq 0 ] && ok "adopted link: binary frame ignored" || ko "binary frame" "$out"
out=$(timeout 30 node "$here/remote_peer.mjs" dead "$url" 2>&1)
[ $? -eq 0 ] && ok "adopted link: a peer that never answers pings is dropped" || ko "dead peer" "$out"

out=$(timeout 30 node "$here/remote_peer.mjs" vanish "$url" 2>&1)
rc=$?
apid=$(grep 'agent pid' "$work/serve.log" | tail -1 | sed 's/.*agent pid \([0-9]*\).*/\1/')
cid=$(grep 'agent pid' "$work/serve.log" | tail -1 | sed 's/.*connection \([^:]*\):.*/\1/')
if [ $rc -eq 0 ] && wait_gone "$apid" 100 && wait_log "$work/serve.log" "connection $cid closed"; then
  ok "client vanished mid-turn: its agent (pid $apid) saw it and ended"
else ko "client vanished mid-turn" "$out" "$(tail -5 "$work/serve.log")"; fi
out=$(timeout 60 node "$here/sdk_client.mjs" --dialect acp --scenario echo --url "$url" 2>&1)
[ $? -eq 0 ] && ok "the server keeps serving after that" || ko "serving after a vanished client" "$out"

# An agent that fails before taking the connection.
start_serve "$work/serve2.log" --handoff -- sh -c 'exit 1'
out=$(cd "$here" && timeout 30 node --input-type=module -e "
  import { loadSdkModule } from './sdk_loader.mjs';
  const m = await loadSdkModule('ws');
  const ws = new (m.WebSocket || m.default)(process.argv[1]);
  ws.on('close', (code) => { console.log(code); process.exit(0); });
  ws.on('error', (e) => { console.log(e.message); process.exit(1); });
" "ws://127.0.0.1:$port/acp" 2>&1)
if [ "$out" = 1011 ] && grep -q "did not take the connection" "$work/serve2.log"; then
  ok "an agent that exits first: close 1011, serve says why"
else ko "agent exits before the handoff" "$out" "$(cat "$work/serve2.log")"; fi

# ---- serve's settings go with the connection --------------------------------
start_serve "$work/serve3.log" --handoff --stall-timeout 4321 -- "$acp" agent
s3=$serve_pid
rm -f "$work/ready3"
timeout 30 node "$here/remote_peer.mjs" goingaway "ws://127.0.0.1:$port/acp" "$work/ready3" \
  >"$work/ga.out" 2>&1 &
gpid=$!
pids="$pids $gpid"
wait_for "$work/ready3" ready 200
kill -TERM "$s3"
wait "$gpid"
rc=$?
if [ $rc -eq 0 ] && grep -q "handed to agent pid" "$work/serve3.log"; then
  ok "SIGTERM to acp serve --handoff: the handed client gets close 1001 (going away)"
else ko "SIGTERM with a handed connection" "$(cat "$work/ga.out")" "$(tail -5 "$work/serve3.log")"; fi
if grep -q "stall 4321 ms" "$work/serve3.log"; then
  ok "the handoff message carries --stall-timeout"
else ko "--stall-timeout sent with the handoff" "$(cat "$work/serve3.log")"; fi
serve_pids=$(echo "$serve_pids" | sed "s/ $s3//")

# ---- resume: --handoff with --session-grace ----------------------------------
start_serve "$work/serve4.log" --handoff --session-grace 5000 -- "$acp" agent
url="ws://127.0.0.1:$port/acp"
out=$(timeout 60 node "$here/remote_peer.mjs" resumeturn "$url" 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "dropped (its agent said so): its agent waits" "$work/serve4.log" &&
   grep -q "resumes connection .*(handoff)" "$work/serve4.log"; then
  ok "--handoff --session-grace: dropped mid-turn, reconnected with the cookie: same agent, turn cancelled, old session prompted and loaded"
else ko "resume with --handoff" "$out" "$(cat "$work/serve4.log")"; fi
n=$(grep -c "agent pid [0-9]*$" "$work/serve4.log")
out=$(timeout 60 node "$here/remote_peer.mjs" wrongcookie "$url" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c "agent pid [0-9]*$" "$work/serve4.log")" -eq $((n + 2)) ]; then
  ok "--handoff --session-grace: a wrong cookie gets a new agent"
else ko "wrong cookie with --handoff" "$out" "$(tail -8 "$work/serve4.log")"; fi
SDK_OUT=$(timeout 60 node "$here/sdk_client.mjs" --dialect acp --scenario full --url "$url" 2>&1) &&
  ok "--handoff --session-grace: a full SDK turn" || ko "SDK turn with --handoff --session-grace" "$SDK_OUT"
# A permission question left unanswered by the drop: the agent gives its
# calls to the client up (acp_agent_drop_calls()), so a v2 turn cancelled
# while asking ends and the session takes the next prompt (before, it
# waited for the answer for ever and refused every new prompt).
# The relay (--no-handoff) does the same for the agent: it cancels the
# turn (a v2 one too: answered at once, running until state_update idle)
# and answers the agent's pending requests itself.
for flag in --handoff --no-handoff; do
  start_serve "$work/serve6$flag.log" $flag --session-grace 5000 -- "$acp" agent --protocol-v2
  for v in 1 2; do
    # The peer retries only when its reconnect got a new agent (with
    # --handoff the agent, not serve, sees the drop, and a reconnect can
    # come first); a prompt the old agent refuses fails at once.
    out=$(timeout 60 node "$here/remote_peer.mjs" resumeask "ws://127.0.0.1:$port/acp" $v 2>&1)
    rc=$?
    att=$(echo "$out" | sed -n 's/.*"attempt":\([0-9]*\).*/\1/p')
    if [ $rc -eq 0 ]; then
      ok "$flag --session-grace, protocol $v: dropped while the agent asked permission; the next prompt on the session ends end_turn (reconnect $att)"
    else ko "$flag: resume while asking, protocol $v" "$out" "$(tail -8 "$work/serve6$flag.log")"; fi
  done
done
# Parked agents are bounded: with --max-connections 2, a third drop stops
# the agent that waited longest (they do not count as connections, so a
# client dropping in a loop would leave an agent per drop for the grace).
for flag in --handoff --no-handoff; do
  start_serve "$work/serve10$flag.log" $flag --session-grace 60000 --max-connections 2 -- "$acp" agent
  out=
  for k in 1 2 3; do
    out="$out$(timeout 30 node "$here/remote_peer.mjs" drop "ws://127.0.0.1:$port/acp" 2>&1)"
    # each drop parks before the next connects (the order decides which
    # one waited longest)
    wait_until 100 sh -c "[ \$(grep -c 'waits 60000 ms' '$work/serve10$flag.log') -ge $k ]"
  done
  first=$(grep 'agent pid' "$work/serve10$flag.log" | head -1 | sed 's/.*connection \([^:]*\):.*agent pid \([0-9]*\).*/\1 \2/')
  fid=${first% *} fpid=${first#* }
  if wait_log "$work/serve10$flag.log" "connection $fid: its agent stops waiting (2 agents wait" &&
     wait_gone "$fpid" 100 &&
     [ "$(grep -c 'stops waiting' "$work/serve10$flag.log")" -eq 1 ]; then
    ok "$flag --session-grace --max-connections 2: a third dropped connection stops the agent that waited longest (pid $fpid)"
  else ko "$flag: parked agents bounded" "$out" "$(tail -8 "$work/serve10$flag.log")"; fi
done
# and the relay's own resume over WebSocket (acp agent is handed by default):
# the cancelled turn's answer never reaches the new connection, whenever the
# agent writes it (before, the relay forwarded it once the client was back).
out=$(timeout 60 node "$here/remote_peer.mjs" resumeturn "ws://127.0.0.1:$port/acp" 2>&1)
if [ $? -eq 0 ] && grep -q "resumes connection" "$work/serve6--no-handoff.log" &&
   ! grep -q "handed to agent" "$work/serve6--no-handoff.log"; then
  ok "--no-handoff --session-grace: dropped mid-turn, the relay resumes it with the same agent, no stale answer"
else ko "relay resume over WebSocket" "$out" "$(tail -8 "$work/serve6--no-handoff.log")"; fi
# An agent that answers session/cancel only once the client is back
# (late_agent.mjs next: at the next request it reads, the new connection's
# initialize): its late update and the cancelled prompt's answer (v1), or
# its update and state_update idle (v2), are dropped by the relay.
start_serve "$work/serve7.log" --session-grace 5000 -- node "$here/late_agent.mjs" next
for v in 1 2; do
  out=$(timeout 60 node "$here/remote_peer.mjs" resumeturn "ws://127.0.0.1:$port/acp" $v 2>&1)
  if [ $? -eq 0 ] && grep -q "dropped the agent's answer to the cancelled request 3\|cancelled turn of session .* ended (dropped)" "$work/serve7.log"; then
    ok "relay, protocol $v: the cancelled turn's late answer and update, written after the reconnect, are dropped"
  else ko "relay: late answer after the reconnect, protocol $v" "$out" "$(tail -8 "$work/serve7.log")"; fi
done
# The new client reuses the cancelled prompt's id (3) for its own prompt,
# before the agent answered the old one (late_agent.mjs signal: only on
# SIGUSR1, sent once serve says it holds the request, or the peer ended):
# serve holds the request until the old answer came and dropped it, so the
# client's id 3 is answered once, by its own turn.
# held_run LOG OUT PATTERN PEER-ARGS...: serve (log LOG) with the late
# agent in signal mode, remote_peer.mjs PEER-ARGS (output OUT); once serve
# logs PATTERN (it holds the client's request) or the peer ended, SIGUSR1
# lets the agent end its cancelled turn; rc is the peer's status.
held_log=
held_pat=
held_or_over() { grep -qs "$held_pat" "$held_log" || ! kill -0 "$rpid" 2>/dev/null; }
held_run() {
  held_log=$1 held_pat=$3
  _out=$2 _mode=$4
  shift 4
  start_serve "$held_log" --session-grace 5000 -- node "$here/late_agent.mjs" signal
  timeout 60 node "$here/remote_peer.mjs" "$_mode" "ws://127.0.0.1:$port/acp" "$@" >"$_out" 2>&1 &
  rpid=$!
  pids="$pids $rpid"
  wait_until 300 held_or_over
  apid=$(grep 'resumes connection' "$held_log" | tail -1 | sed 's/.*agent pid \([0-9]*\).*/\1/')
  [ -n "$apid" ] && kill -USR1 "$apid" 2>/dev/null
  wait "$rpid"
  rc=$?
}
held_run "$work/serve8.log" "$work/reuse.out" "holds the client's request" resumereuse 1
if [ $rc -eq 0 ] && grep -q "holds the client's request" "$work/serve8.log" &&
   grep -q "dropped the agent's answer to the cancelled request 3" "$work/serve8.log"; then
  ok "relay: the new client reuses the cancelled prompt's id: held until the old answer came, answered once by its own turn"
else ko "relay: a reused id" "$(cat "$work/reuse.out")" "$(tail -8 "$work/serve8.log")"; fi
# The same, and the agent never answers the cancelled prompt (no SIGUSR1):
# after HOLD_MS (5 s) serve gives up holding the reused id and ends the
# connection with 1011, saying why.
start_serve "$work/serve9.log" --session-grace 5000 -- node "$here/late_agent.mjs" signal
timeout 60 node "$here/remote_peer.mjs" resumereuse "ws://127.0.0.1:$port/acp" 1 >"$work/reuse2.out" 2>&1 &
rpid=$!
pids="$pids $rpid"
if wait_for "$work/serve9.log" "holds the client's request" 300 &&
   wait_for "$work/serve9.log" "did not answer the cancelled request whose id the client reuses within 5000 ms; closed with 1011" 400; then
  ok "relay: a reused id whose old prompt is never answered: the connection ends with 1011 after 5 s"
else ko "relay: reused id, hold timeout" "$(cat "$work/reuse2.out")" "$(tail -8 "$work/serve9.log")"; fi
stop_pid "$rpid"
# The new client's first request names the dropped session before the
# agent ended its cancelled turn (late_agent.mjs signal, which serves
# requests meanwhile, as a concurrent agent does): serve holds it until the
# turn ended (SIGUSR1, sent once serve says it holds), so the load's replay
# (v1; v2 has no session/load) or the new turn's own update and end (v1,
# v2) reach the client; before, they were dropped as the cancelled turn's.
n=0
for c in "1 load" "1 prompt" "2 prompt"; do
  n=$((n + 1))
  v=${c% *}
  what=${c#* }
  held_run "$work/serve10-$n.log" "$work/held$n.out" \
    "holds the client's request: it names session" resumeheld "$v" "$what"
  if [ $rc -eq 0 ] && grep -q "holds the client's request: it names session" "$held_log" &&
     grep -q "the cancelled turn it waited for ended" "$held_log"; then
    ok "relay, protocol $v: a $what of the dropped session before its cancelled turn ended is held until it ended, and its output arrives"
  else ko "relay: $what of a stale session, protocol $v" "$(cat "$work/held$n.out")" "$(tail -8 "$held_log")"; fi
done
# The same, and the agent never ends the cancelled turn (no SIGUSR1): after
# HOLD_MS (5 s) serve ends the connection with 1011, naming the session.
start_serve "$work/serve12.log" --session-grace 5000 -- node "$here/late_agent.mjs" signal
timeout 60 node "$here/remote_peer.mjs" resumeheld "ws://127.0.0.1:$port/acp" 1 load >"$work/held-to.out" 2>&1 &
rpid=$!
pids="$pids $rpid"
if wait_for "$work/serve12.log" "holds the client's request: it names session" 300 &&
   wait_for "$work/serve12.log" "did not end the cancelled turn of session \"sess_1\", which the client's request names, within 5000 ms; closed with 1011" 400; then
  ok "relay: a load of a stale session whose turn never ends: the connection ends with 1011 after 5 s"
else ko "relay: stale session, hold timeout" "$(cat "$work/held-to.out")" "$(tail -8 "$work/serve12.log")"; fi
stop_pid "$rpid"
# A late update longer than serve's 64 KiB hold (late_agent.mjs next
# 100000): decided from its head (a session/update of the cancelled turn's
# session) and dropped whole; before, it went through unlooked-at.
start_serve "$work/serve11.log" --session-grace 5000 -- node "$here/late_agent.mjs" next 100000
long_drops() { grep -c "dropped an update of the cancelled turn of session .* longer than 65536 bytes" "$work/serve11.log"; }
for v in 1 2; do
  n=$(long_drops)
  out=$(timeout 60 node "$here/remote_peer.mjs" resumeturn "ws://127.0.0.1:$port/acp" $v 2>&1)
  if [ $? -eq 0 ] && [ "$(long_drops)" -gt "$n" ]; then
    ok "relay, protocol $v: a cancelled turn's late update longer than 64 KiB is dropped by its head"
  else ko "relay: long late update, protocol $v" "$out" "$(tail -8 "$work/serve11.log")"; fi
done
# a grace that runs out stops the agent
start_serve "$work/serve5.log" --handoff --session-grace 300 -- "$acp" agent
out=$(timeout 30 node "$here/remote_peer.mjs" vanish "ws://127.0.0.1:$port/acp" 2>&1)
apid=$(grep 'agent pid' "$work/serve5.log" | tail -1 | sed 's/.*agent pid \([0-9]*\).*/\1/')
if wait_log "$work/serve5.log" "nobody came back" && wait_gone "$apid" 100; then
  ok "--handoff --session-grace: nobody came back, the agent (pid $apid) was stopped"
else ko "grace expiry with --handoff" "$out" "$(cat "$work/serve5.log")"; fi

check_serve_logs
finish
