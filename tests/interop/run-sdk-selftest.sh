#!/bin/sh
# run-sdk-selftest.sh - prove the interop peers: the SDK client
# (sdk_client.mjs) drives the SDK agent (sdk_agent.mjs) through every
# scenario, and the client's checks do fail against agents that misbehave.
#
# Usage: tests/interop/run-sdk-selftest.sh
# Installs the pinned SDK first (tools/install-peers.sh). Exit 0 only if every
# positive case passed and every negative case was reported as a failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
"$root/tools/install-peers.sh" || exit 1

client="$here/sdk_client.mjs"
agent="$here/sdk_agent.mjs"
fails=0
pass=0

# expect 0|1 NAME ARGS... : run sdk_client with ARGS, want exit status 0 or nonzero.
expect() {
    want=$1 name=$2
    shift 2
    out=$(timeout 120 node "$client" "$@")
    rc=$?
    if { [ "$want" = 0 ] && [ $rc -eq 0 ]; } || { [ "$want" = 1 ] && [ $rc -ne 0 ] && [ $rc -ne 2 ] && [ $rc -ne 124 ]; }; then
        pass=$((pass + 1))
        echo "PASS $name"
    else
        fails=$((fails + 1))
        echo "FAIL $name (exit $rc, wanted $([ "$want" = 0 ] && echo 0 || echo 'a failed check'))"
        echo "     $out"
    fi
}

expect 0 "full: SDK client -> SDK agent" --scenario full -- node "$agent"
expect 0 "echo: SDK client -> SDK agent" --scenario echo -- node "$agent"
expect 0 "cancel: SDK client -> SDK agent" --scenario cancel -- node "$agent"
expect 0 "bench: SDK client -> SDK agent --echo" --scenario bench --turns 200 --payload 65536 -- node "$agent" --echo
# The checks must be able to fail.
expect 1 "negative: echo scenario vs agent echoing the whole prompt" --scenario echo -- node "$agent" --echo
expect 1 "negative: cancel scenario vs agent that never waits" --scenario cancel --timeout 10 -- node "$agent" --echo
expect 1 "negative: bench vs scripted agent" --scenario bench --turns 3 -- node "$agent"
expect 1 "negative: agent exits at once" --scenario full -- false
expect 1 "negative: agent command missing" --scenario full -- "$here/no-such-agent"
expect 1 "negative: silent agent times out" --scenario echo --timeout 3 -- sleep 30

echo "sdk selftest: $pass passed, $fails failed"
[ $fails -eq 0 ]
