#!/bin/sh
# remote-pair.sh - one remote benchmark run as ONE command, for bench/ab.sh:
# starts SERVER (any command that prints its port on stdout or stderr, as
# "listening on ws://127.0.0.1:PORT/acp" (acp serve, bench/remote_echo_serve)
# or "port":PORT (tests/interop/sdk_agent.mjs --serve)), runs CLIENT with
# "--url ws://127.0.0.1:PORT/acp" appended (http:// and --http for the
# Streamable HTTP profile), stops the server (SIGTERM) and waits for it.
# The client's JSON line is the output. Because the server (and its agent,
# which it waits for) is this script's child, ab.sh's CPU per round trip
# covers client + server + agent.
#
# Usage: bench/remote-pair.sh 'SERVER COMMAND' ws|http CLIENT [ARGS...]
# Example (acp serve with and without the read spin, 5 B):
#   S='build/acp serve --listen 127.0.0.1:0'
#   bench/ab.sh --rounds 7 \
#     off "bench/remote-pair.sh '$S -- build/acp agent --echo' ws build/acp bench-client --turns 20000" \
#     on  "bench/remote-pair.sh '$S --read-spin-us 50 -- build/acp agent --echo' ws build/acp bench-client --turns 20000"
set -u
[ $# -ge 3 ] || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
server=$1 prof=$2
shift 2
log=$(mktemp) || exit 1
sh -c "exec $server" >"$log" 2>&1 &
spid=$!
port=""
for _ in $(seq 1 400); do
  port=$(sed -n -e 's/.*listening on ws:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' \
    -e 's/.*"port":\([0-9]*\).*/\1/p' "$log" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$spid" 2>/dev/null || break
  sleep 0.05
done
rc=1
if [ -n "$port" ]; then
  if [ "$prof" = http ]; then
    "$@" --url "http://127.0.0.1:$port/acp" --http
  else
    "$@" --url "ws://127.0.0.1:$port/acp"
  fi
  rc=$?
else
  cat "$log" >&2
fi
kill -TERM "$spid" 2>/dev/null
wait "$spid"
rm -f "$log"
exit $rc
