#!/bin/sh
# run-turns.sh - prompt-turn benchmark: the same workload through our client +
# agent and through a TypeScript SDK client + agent pair, then a table and the
# ratios ours/theirs; and the floor (bench/uv_cat_floor: a libuv program
# echoing the same lines through `cat`) in rounds alternating with ours, with
# the median of the per-round ratios ours/floor. See bench/README.md.
#
# Usage: bench/run-turns.sh [--quick] [--turns N] [--turns-1m N] [--warmup N]
#                           [--payloads "5 65536 1048576"] [--only ts|ours]
#                           [--rounds N] [--pin CPU] [--out FILE]
#   --turns N      turns for every payload below 1 MiB (default 20000)
#   --turns-1m N   turns for payloads of 1 MiB and more (default 2000; 20000
#                  turns of 1 MiB take several minutes with the TS pair)
#   --quick        smoke run: 500 turns, 50 at 1 MiB, 3 rounds
#   --rounds N     rounds of ours then the floor per payload (default 5)
#   --warmup N     unmeasured turns before the TS measurement (default 0)
#   --payloads L   space-separated payload sizes in bytes
#   --only W       run only the TS pair (ts) or only ours and the floor (ours)
#   --pin CPU      run ours and the floor with both processes on that CPU
#                  ("first": the first CPU this process may use)
#                  (taskset): the cheap wake-ups of two processes sharing a
#                  CPU, where our own work shows most (not the TS pair)
#   --out FILE     JSON lines of every run (default build/bench/turns.jsonl)
# Environment: ACP_BIN = path to our `acp` program. "ours" runs only if it is
# executable: $ACP_BIN bench-client --payload S --turns N -- $ACP_BIN agent --echo
# ACP_FLOOR_BIN = the floor program (default: bench/uv_cat_floor beside
# ACP_BIN's build); the floor runs with ours, when it is built. So does our
# client against bench/acp_null_agent (ACP_NULL_AGENT_BIN), impl
# "null-agent": the split of our time over the floor into client and agent;
# and ours without the read spin (--read-spin-us 0 on both sides), impl
# "nospin".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

turns=20000
turns_1m=2000
warmup=0
rounds=5
payloads="5 65536 1048576"
only=""
pin=""
out="$root/build/bench/turns.jsonl"

usage() {
    # The header from "Usage:" to its end.
    sed -n '/^# Usage:/,/^set -u$/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) turns=500 turns_1m=50 rounds=3 ;;
    --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift ;;
    --turns) [ $# -ge 2 ] || usage; turns=$2; shift ;;
    --turns-1m) [ $# -ge 2 ] || usage; turns_1m=$2; shift ;;
    --warmup) [ $# -ge 2 ] || usage; warmup=$2; shift ;;
    --payloads) [ $# -ge 2 ] || usage; payloads=$2; shift ;;
    --only) [ $# -ge 2 ] || usage; only=$2; shift ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift ;;
    --pin) [ $# -ge 2 ] || usage; pin=$2; shift ;;
    -h | --help) usage ;;
    *) echo "run-turns: unknown argument $1" >&2; usage ;;
    esac
    shift
done
case "$only" in "" | ts | ours) ;; *) usage ;; esac
case "$rounds" in "" | *[!0-9]* | 0) usage ;; esac
# --pin: every process of ours and of the floor on one CPU; the TS pair is
# not pinned (its node runs threads of its own), so it is left out.
on=""
if [ -n "$pin" ]; then
    command -v taskset >/dev/null || { echo "run-turns: --pin needs taskset" >&2; exit 1; }
    # "first": the first CPU this process may use (a container's cpuset
    # may leave CPU 0 out).
    if [ "$pin" = first ]; then
        pin=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')
    fi
    case "$pin" in "" | *[!0-9]*) usage ;; esac
    on="taskset -c $pin"
    only=ours
fi

# The TS pair's packages; ours and the floors need none.
if [ "$only" != ours ]; then
    "$root/tools/install-peers.sh" >&2 || exit 1
fi

run_ours=0
if [ "$only" != ts ]; then
    if [ -n "${ACP_BIN:-}" ] && [ -x "$ACP_BIN" ]; then
        run_ours=1
    else
        echo "run-turns: ACP_BIN not set or not executable; skipping ours" >&2
        [ "$only" = ours ] && exit 1
    fi
fi

floor_bin=""
null_bin=""
if [ $run_ours -eq 1 ]; then
    floor_bin=${ACP_FLOOR_BIN:-$(dirname "$ACP_BIN")/bench/uv_cat_floor}
    if [ ! -x "$floor_bin" ]; then
        echo "run-turns: no floor program $floor_bin (cmake --build ... --target uv_cat_floor); skipping the floor" >&2
        floor_bin=""
    fi
    null_bin=${ACP_NULL_AGENT_BIN:-$(dirname "$ACP_BIN")/bench/acp_null_agent}
    if [ ! -x "$null_bin" ]; then
        echo "run-turns: no $null_bin (cmake --build ... --target acp_null_agent); skipping the client/agent split" >&2
        null_bin=""
    fi
fi

mkdir -p "$(dirname "$out")"
: >"$out"
status=0

# round NAME CMD...: one run of round $r at payload $p ($n turns); its JSON
# line, with "round" added, goes to $out; a failure sets status.
round() {
    what=$1
    shift
    printf 'run-turns: %-5s payload %s, %s turns (round %s/%s)\n' "$what" "$p" "$n" "$r" "$rounds" >&2
    if line=$("$@"); then
        echo "$line" | sed "s/^{/{\"round\":$r,/" >>"$out"
    else
        echo "run-turns: $what FAILED at payload $p" >&2
        status=1
    fi
}

echo "run-turns: $(nproc) cpus, $(node --version), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for p in $payloads; do
    n=$turns
    [ "$p" -ge 1048576 ] && n=$turns_1m
    if [ "$only" != ours ]; then
        echo "run-turns: ts   payload $p, $n turns" >&2
        if ! node "$here/turns/ts_client.mjs" --impl ts --payload "$p" --turns "$n" --warmup "$warmup" \
            -- node "$root/tests/interop/sdk_agent.mjs" --echo >>"$out"; then
            echo "run-turns: ts pair FAILED at payload $p" >&2
            status=1
        fi
    fi
    # Ours and the floor alternate, round after round, so that both see the
    # same moments of a shared machine; report.mjs takes the median of the
    # rounds' ratios.
    r=1
    while [ $run_ours -eq 1 ] && [ "$r" -le "$rounds" ]; do
        # shellcheck disable=SC2086 # $on is empty or "taskset -c CPU"
        round ours $on "$ACP_BIN" bench-client --payload "$p" --turns "$n" -- $on "$ACP_BIN" agent --echo
        # The same without the read spin (on by default in both programs,
        # 20 us, backed off while it misses): what the spin buys and what
        # it costs in CPU.
        # shellcheck disable=SC2086
        round nospin $on "$ACP_BIN" bench-client --impl nospin --read-spin-us 0 --payload "$p" --turns "$n" -- $on "$ACP_BIN" agent --echo --read-spin-us 0
        # Our client against an agent that costs next to nothing
        # (bench/acp_null_agent.c): what is left over the floor is about
        # our client's share, and ours minus it our agent's. Without the
        # read spin, as the null agent (the split is taken from nospin).
        # shellcheck disable=SC2086
        [ -z "$null_bin" ] ||
            round null-agent $on "$ACP_BIN" bench-client --impl null-agent --read-spin-us 0 --payload "$p" --turns "$n" -- $on "$null_bin"
        # The floor's pipes are acp's: real pipes (not the socketpairs
        # libuv makes), grown to 1 MiB once a message passes 64 KiB, and
        # doubled to fit a larger message (text + envelope, under 4 KiB
        # here) where the kernel allows it (CAP_SYS_RESOURCE or a larger
        # pipe-max-size); refused, 1 MiB. "pipe_bytes" in the floor's JSON
        # line says what it got.
        fpipe=""
        if [ "$p" -ge 65536 ]; then
            fsz=1048576
            while [ "$fsz" -lt $((p + 4096)) ] && [ "$fsz" -lt 4194304 ]; do
                fsz=$((fsz * 2))
            done
            fpipe="--pipe-size $fsz"
        fi
        # shellcheck disable=SC2086
        [ -z "$floor_bin" ] ||
            round floor $on "$floor_bin" --impl floor --pipes $fpipe --payload "$p" --turns "$n" -- $on cat
        # The same with the client waiting in read(2) instead of epoll, as
        # acp bench-client does by default: shown beside (ours/floor-block).
        # shellcheck disable=SC2086
        [ -z "$floor_bin" ] ||
            round floor-block $on "$floor_bin" --impl floor-block --pipes --block $fpipe --payload "$p" --turns "$n" -- $on cat
        r=$((r + 1))
    done
done

node "$here/turns/report.mjs" "$out" || status=1
exit $status
