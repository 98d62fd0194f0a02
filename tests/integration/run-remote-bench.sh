#!/bin/sh
# run-remote-bench.sh - the remote benchmark's servers work, in a few turns:
#   bench/remote_echo_serve (the echo agent inside the server process, the
#     "agent in process" rows of bench/run-remote.sh): acp bench-client
#     --url over WebSocket and Streamable HTTP, 5 B and 64 KiB, every turn
#     echoed (bench-client checks each), then SIGTERM ends it with status 0
#   acp serve --read-spin-us N: turns answered over both profiles with the
#     spin on; an idle server does not spin (its CPU time does not grow
#     while nobody talks to it); the spin ends with the answer (a 1 s
#     budget holds no turn back); bad values refused with a message;
#     --help names the option.
#   acp serve --stall-timeout MS: turns answered, bad values refused,
#     --help names it; the Streamable HTTP client's POSTs make no
#     epoll_ctl per message (strace -c).
# Real processes, sockets on 127.0.0.1. No node needed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
echo_serve=${ACP_REMOTE_ECHO_SERVE:-$(dirname "$acp")/bench/remote_echo_serve}
work=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

# Waits for "listening on ws://127.0.0.1:PORT/acp" in LOG; sets port.
wait_port() {
  port=""
  for _ in $(seq 1 400); do
    port=$(sed -n 's/.*listening on ws:\/\/127\.0\.0\.1:\([0-9]*\)\/acp.*/\1/p' "$1")
    [ -n "$port" ] && return 0
    sleep 0.05
  done
  return 1
}

# bench NAME URL PAYLOAD TURNS [--http]: the JSON line must say TURNS.
bench() {
  name=$1 url=$2 size=$3 n=$4
  shift 4
  if timeout 120 "$acp" bench-client --url "$url" "$@" --payload "$size" \
    --turns "$n" >"$work/b.json" 2>"$work/b.err" &&
    grep -q "\"turns\":$n[,}]" "$work/b.json"; then
    ok "$name"
  else
    ko "$name" "$(cat "$work/b.json" "$work/b.err")"
  fi
}

# CPU ticks (user + system) of a live process.
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# MARK: - the agent in process
if [ -x "$echo_serve" ]; then
  "$echo_serve" 2>"$work/echo.log" &
  epid=$!
  pids="$pids $epid"
  if wait_port "$work/echo.log"; then
    bench "remote_echo_serve: 20 turns of 5 B over WebSocket" \
      "ws://127.0.0.1:$port/acp" 5 20
    bench "remote_echo_serve: 20 turns of 5 B over Streamable HTTP" \
      "http://127.0.0.1:$port/acp" 5 20 --http
    bench "remote_echo_serve: 5 turns of 64 KiB over WebSocket" \
      "ws://127.0.0.1:$port/acp" 65536 5
    bench "remote_echo_serve: 5 turns of 64 KiB over Streamable HTTP" \
      "http://127.0.0.1:$port/acp" 65536 5 --http
    # 3 MiB of session events: past the replay's 1 MiB, so kept events are
    # dropped and their blocks reused (the spare; under ASan too).
    bench "remote_echo_serve: 3 turns of 1 MiB over Streamable HTTP" \
      "http://127.0.0.1:$port/acp" 1048576 3 --http
    kill -TERM "$epid"
    wait "$epid"
    rc=$?
    if [ "$rc" -eq 0 ] && ! grep -q "ERROR: \|runtime error" "$work/echo.log"; then
      ok "remote_echo_serve: SIGTERM ends it with status 0"
    else
      ko "remote_echo_serve: SIGTERM ends it with status 0" "exit $rc" "$(cat "$work/echo.log")"
    fi
  else
    ko "remote_echo_serve listens" "$(cat "$work/echo.log")"
  fi
  if "$echo_serve" --bogus 2>"$work/e2" || ! grep -q usage "$work/e2"; then
    ko "remote_echo_serve --bogus: usage, status 2" "$(cat "$work/e2")"
  else
    ok "remote_echo_serve --bogus: usage, status 2"
  fi
else
  ko "bench/remote_echo_serve is built (ACP_BUILD_BENCH)" "not at $echo_serve"
fi

# MARK: - acp serve --read-spin-us
"$acp" serve --listen 127.0.0.1:0 --read-spin-us 50 -- "$acp" agent --echo \
  2>"$work/serve.log" &
spid=$!
pids="$pids $spid"
if wait_port "$work/serve.log"; then
  bench "acp serve --read-spin-us 50: 20 turns over WebSocket" \
    "ws://127.0.0.1:$port/acp" 5 20
  bench "acp serve --read-spin-us 50: 20 turns over Streamable HTTP" \
    "http://127.0.0.1:$port/acp" 5 20 --http
  bench "acp serve --read-spin-us 50: 3 turns of 1 MiB over WebSocket" \
    "ws://127.0.0.1:$port/acp" 1048576 3
  # Idle: no client, no spin. A spinning loop would burn the whole second
  # (100 ticks); a sleeping one none.
  t0=$(ticks "$spid")
  sleep 1
  t1=$(ticks "$spid")
  if [ $((t1 - t0)) -le 10 ]; then
    ok "acp serve --read-spin-us 50: no CPU while idle ($((t1 - t0)) ticks in 1 s)"
  else
    ko "acp serve --read-spin-us 50: no CPU while idle" "$((t1 - t0)) ticks in 1 s"
  fi
  kill -TERM "$spid"
  wait "$spid" || ko "acp serve ends on SIGTERM with status 0" "$(cat "$work/serve.log")"
else
  ko "acp serve --read-spin-us 50 listens" "$(cat "$work/serve.log")"
fi

# The spin waits for one answer, not for quiet: with a budget of 1 s, 100
# turns finish well within 50 s. A spin that waited for the agent's pipe
# to stay quiet for the budget would hold every message ~1 s (the next one
# comes on the socket, which is not read while it spins): 100 s or more.
"$acp" serve --listen 127.0.0.1:0 --read-spin-us 1000000 -- "$acp" agent --echo \
  2>"$work/serve2.log" &
spid=$!
pids="$pids $spid"
if wait_port "$work/serve2.log"; then
  if timeout 50 "$acp" bench-client --url "ws://127.0.0.1:$port/acp" --turns 100 \
    >"$work/b.json" 2>"$work/b.err" && grep -q '"turns":100[,}]' "$work/b.json"; then
    ok "acp serve --read-spin-us 1000000: the spin ends with the answer (100 turns in < 50 s)"
  else
    ko "acp serve --read-spin-us 1000000: the spin ends with the answer" \
      "100 turns not done in 50 s" "$(cat "$work/b.json" "$work/b.err")"
  fi
  kill -TERM "$spid"
  wait "$spid"
else
  ko "acp serve --read-spin-us 1000000 listens" "$(cat "$work/serve2.log")"
fi

for bad in -1 abc 1000001 ""; do
  "$acp" serve --listen 127.0.0.1:0 --read-spin-us "$bad" -- "$acp" agent --echo \
    >/dev/null 2>"$work/bad.err"
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q -- "--read-spin-us" "$work/bad.err"; then
    ok "acp serve --read-spin-us '$bad' refused (status 2)"
  else
    ko "acp serve --read-spin-us '$bad' refused (status 2)" "exit $rc" "$(cat "$work/bad.err")"
  fi
done
if "$acp" serve --help | grep -q -- "--read-spin-us N"; then
  ok "acp serve --help names --read-spin-us"
else
  ko "acp serve --help names --read-spin-us"
fi

# MARK: - acp serve --stall-timeout (the timeout itself: test_remote)
"$acp" serve --listen 127.0.0.1:0 --stall-timeout 500 -- "$acp" agent --echo \
  2>"$work/serve3.log" &
spid=$!
pids="$pids $spid"
if wait_port "$work/serve3.log"; then
  bench "acp serve --stall-timeout 500: 20 turns over Streamable HTTP" \
    "http://127.0.0.1:$port/acp" 5 20 --http
  # The client's POSTs go to the kernel at once (uv_try_write) when
  # nothing is queued: no write request, no epoll_ctl pair per message.
  # Counted, not timed: 200 turns made about 220 epoll_ctl calls with
  # uv_write, about 20 (setup) with the direct write.
  if command -v strace >/dev/null 2>&1; then
    # (LeakSanitizer cannot run under ptrace: off for this run only.)
    if ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
      strace -f -c -e trace=epoll_ctl -o "$work/st.txt" "$acp" bench-client \
      --url "http://127.0.0.1:$port/acp" --http --turns 200 --payload 5 \
      >"$work/b.json" 2>"$work/b.err" && grep -q '"turns":200[,}]' "$work/b.json"; then
      n=$(awk '$NF == "epoll_ctl" { print $4 }' "$work/st.txt")
      if [ -n "$n" ] && [ "$n" -lt 100 ]; then
        ok "Streamable HTTP client: POSTs written directly ($n epoll_ctl calls in 200 turns)"
      else
        ko "Streamable HTTP client: POSTs written directly" "epoll_ctl calls: ${n:-?}" "$(cat "$work/st.txt")"
      fi
    else
      ko "bench-client under strace: 200 turns" "$(cat "$work/b.json" "$work/b.err")"
    fi
  else
    ko "strace is installed (make deps)"
  fi
  kill -TERM "$spid"
  wait "$spid"
else
  ko "acp serve --stall-timeout 500 listens" "$(cat "$work/serve3.log")"
fi
for bad in 0 -1 abc ""; do
  "$acp" serve --listen 127.0.0.1:0 --stall-timeout "$bad" -- "$acp" agent --echo \
    >/dev/null 2>"$work/bad.err"
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q -- "--stall-timeout" "$work/bad.err"; then
    ok "acp serve --stall-timeout '$bad' refused (status 2)"
  else
    ko "acp serve --stall-timeout '$bad' refused (status 2)" "exit $rc" "$(cat "$work/bad.err")"
  fi
done
if "$acp" serve --help | grep -q -- "--stall-timeout MS"; then
  ok "acp serve --help names --stall-timeout"
else
  ko "acp serve --help names --stall-timeout"
fi

echo "remote-bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
