#!/bin/sh
# ab.sh - compare benchmark commands in alternating rounds (bench/README.md,
# "Comparing two builds"). Each command prints one JSON line with "rtps" and
# "p50_us" (acp bench-client, bench/uv_cat_floor, bench/bench_mcp_stdio do).
# Round after round every command runs once, in the order given, so that all
# see the same moments of a shared machine; the table gives per command the
# median rt/s and p50, the CPU time (user + system of the command and all
# its children, from the shell's `times`) per round trip, and the medians of
# the per-round rt/s ratios to the first and to the second command.
#
# Usage: bench/ab.sh [--rounds N] [--per N] NAME 'COMMAND' NAME 'COMMAND' ...
#   --rounds N  rounds (default 5)
#   --per N     round trips per run, to turn CPU seconds into us per trip
#               (default: the "turns" or "calls" field of the JSON line)
# Example (old and new acp against the floor, 64 KiB turns):
#   bench/ab.sh floor 'build/bench/uv_cat_floor --pipes --pipe-size 1048576 --payload 65536 --turns 20000 -- cat' \
#     old '/tmp/old/acp bench-client --payload 65536 --turns 20000 -- /tmp/old/acp agent --echo' \
#     new 'build/acp bench-client --payload 65536 --turns 20000 -- build/acp agent --echo'
# Exit status: 1 if a command failed, 2 on bad usage.
set -u
rounds=5
per=""
usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
    --per) [ $# -ge 2 ] || usage; per=$2; shift 2 ;;
    -h | --help) usage ;;
    *) break ;;
    esac
done
case "$rounds" in "" | *[!0-9]* | 0) usage ;; esac
[ $# -ge 2 ] && [ $(($# % 2)) -eq 0 ] || usage

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# Children's user + system seconds so far, from the second line of `times`
# (run in this shell: in a subshell it would see the subshell's children).
cpu_of() {
    sed -n 2p "$1" | awk '{
        s = 0
        for (i = 1; i <= 2; i++) {
            split($i, a, "m"); sub("s", "", a[2]); s += a[1] * 60 + a[2]
        }
        printf "%.6f\n", s }'
}

status=0
echo "ab: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
r=1
while [ "$r" -le "$rounds" ]; do
    i=0
    while [ $i -lt $# ]; do
        eval "name=\${$((i + 1))}"
        eval "cmd=\${$((i + 2))}"
        times >"$tmp/t0"
        if line=$(sh -c "$cmd"); then
            times >"$tmp/t1"
            c0=$(cpu_of "$tmp/t0")
            c1=$(cpu_of "$tmp/t1")
            echo "$line" | tail -n 1 | awk -v r="$r" -v n="$name" -v c0="$c0" \
                -v c1="$c1" -v per="$per" '!/"rtps":/ { exit 1 } {
                rt = $0; sub(/.*"rtps":/, "", rt); sub(/[,}].*/, "", rt)
                p50 = $0; sub(/.*"p50_us":/, "", p50); sub(/[,}].*/, "", p50)
                k = per
                if (k == "") {
                    k = $0
                    if (k ~ /"turns":/) sub(/.*"turns":/, "", k)
                    else sub(/.*"calls":/, "", k)
                    sub(/[,}].*/, "", k)
                }
                printf "%d %s %s %s %.2f\n", r, n, rt, p50, (c1 - c0) * 1e6 / k
            }' >>"$tmp/rows" || {
                echo "ab: $name printed no rtps in round $r" >&2
                status=1
            }
        else
            echo "ab: $name FAILED in round $r" >&2
            status=1
        fi
        i=$((i + 2))
    done
    r=$((r + 1))
done

# Names in the order given.
i=0
: >"$tmp/names"
while [ $i -lt $# ]; do
    eval "echo \"\${$((i + 1))}\"" >>"$tmp/names"
    i=$((i + 2))
done

awk -v first="$1" -v second="${3:-}" '
function median(list, n,    i, j, t, a) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
            t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
        }
    return n ? a[int((n + 1) / 2)] : "n/a"
}
FNR == NR { order[++nn] = $1; next }
{
    rt[$2] = rt[$2] " " $3; p50[$2] = p50[$2] " " $4; cpu[$2] = cpu[$2] " " $5
    byround[$1, $2] = $3
    if ($1 > maxr) maxr = $1
}
END {
    printf "%-10s %10s %8s %12s %10s %10s  %s\n", "name", "rt/s", "p50 us",
        "cpu us/trip", "/" first, "/" second, "per-round rt/s ratios to " first
    for (k = 1; k <= nn; k++) {
        n = order[k]; rl = ""; r2 = ""
        for (r = 1; r <= maxr; r++) {
            if ((r, n) in byround && (r, first) in byround && byround[r, first] > 0)
                rl = rl " " sprintf("%.2f", byround[r, n] / byround[r, first])
            if (second != "" && (r, n) in byround && (r, second) in byround && byround[r, second] > 0)
                r2 = r2 " " sprintf("%.2f", byround[r, n] / byround[r, second])
        }
        printf "%-10s %10s %8s %12s %10s %10s %s\n", n, median(rt[n]),
            median(p50[n]), median(cpu[n]), median(rl), median(r2), rl
    }
}' "$tmp/names" "$tmp/rows"
exit $status
