#!/bin/sh
# idle-conns.sh - 1,000 idle WebSocket and 1,000 idle Streamable HTTP
# connections held by `acp serve`: its own RSS growth per connection
# (bench/idle-conns.mjs does the work). Each connection costs acp serve
# about five descriptors (socket, or POST socket + SSE socket, and the
# agent's three pipes) and the client one or two, so the descriptor limit
# is raised to what the run needs (or the hard limit) first.
#
# Usage: bench/idle-conns.sh [--conns N] [--out FILE] [--profile ws|http]
# Environment: ACP_BIN (the acp program).
set -u
here=$(cd "$(dirname "$0")" && pwd)
conns=1000
prev=""
for a in "$@"; do
  [ "$prev" = --conns ] && conns=$a
  prev=$a
done
need=$((conns * 6 + 256))
soft=$(ulimit -n)
hard=$(ulimit -Hn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$need" ]; then
  if [ "$hard" = unlimited ] || [ "$hard" -ge "$need" ]; then
    ulimit -n "$need"
  else
    ulimit -n "$hard"
  fi
fi
echo "idle-conns: ulimit -n $(ulimit -n) (was $soft; this run needs about $need)" >&2
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge "$need" ] ||
  { echo "idle-conns: descriptor limit too low for $conns connections" >&2; exit 1; }
exec node "$here/idle-conns.mjs" "$@"
