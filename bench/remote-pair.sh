#!/bin/sh
# remote-pair.sh - one remote benchmark run as ONE command, for bench/ab.sh:
# starts SERVER (any command that prints "listening on ws://127.0.0.1:PORT/acp"
# on stderr: acp serve ... -- AGENT, bench/remote_echo_serve), runs
# ACP bench-client --url against it with the remaining arguments, stops
# the server (SIGTERM) and waits for it, then prints the client's JSON line.
# Because the server (and its agent, which it waits for) is this script's
# child, ab.sh's CPU per round trip covers client + server + agent.
#
# Usage: bench/remote-pair.sh ACP 'SERVER COMMAND' ws|http [BENCH-CLIENT ARGS...]
# Example (acp serve with and without the read spin, 5 B):
#   bench/ab.sh --rounds 7 \
#     off "bench/remote-pair.sh build/acp 'build/acp serve --listen 127.0.0.1:0 -- build/acp agent --echo' ws --turns 20000" \
#     on  "bench/remote-pair.sh build/acp 'build/acp serve --listen 127.0.0.1:0 --read-spin-us 50 -- build/acp agent --echo' ws --turns 20000"
set -u
[ $# -ge 3 ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
acp=$1 server=$2 prof=$3
shift 3
log=$(mktemp) || exit 1
# shellcheck disable=SC2086
sh -c "exec $server" 2>"$log" &
spid=$!
port=""
for _ in $(seq 1 400); do
  port=$(sed -n 's/.*listening on ws:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$log")
  [ -n "$port" ] && break
  kill -0 "$spid" 2>/dev/null || break
  sleep 0.05
done
rc=1
if [ -n "$port" ]; then
  if [ "$prof" = http ]; then
    "$acp" bench-client --url "http://127.0.0.1:$port/acp" --http "$@"
  else
    "$acp" bench-client --url "ws://127.0.0.1:$port/acp" "$@"
  fi
  rc=$?
else
  cat "$log" >&2
fi
kill -TERM "$spid" 2>/dev/null
wait "$spid"
rm -f "$log"
exit $rc
