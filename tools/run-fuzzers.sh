#!/bin/sh
# Runs every libFuzzer target of a fuzz build (make fuzz) for a bounded
# time each, starting from a scratch copy of its seed corpus in
# fuzz/corpus/<target>/ (the checked-in seeds are not modified). Any crash,
# leak or timeout fails the run and leaves the reproducer in build-fuzz/.
# New interesting inputs are left in build-fuzz/corpus/<target>/ to be
# reviewed and, if worth keeping, copied into fuzz/corpus/ by hand.
set -u
build=${1:-build-fuzz}
seconds=${2:-60}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top/$build" || exit 1
fail=0
ran=0
for bin in fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  case $bin in *_replay) continue ;; esac
  name=$(basename "$bin")
  work="corpus/$name"
  mkdir -p "$work"
  [ -d "$top/fuzz/corpus/$name" ] && cp -n "$top/fuzz/corpus/$name"/* "$work"/ 2>/dev/null
  echo "fuzz: $name for ${seconds}s"
  if "./$bin" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
       -artifact_prefix="./$name-" "$work" > "$name.log" 2>&1; then
    ran=$((ran + 1))
    grep -E "^Done|stat::number_of_executed_units" "$name.log" | tail -1
  else
    fail=$((fail + 1))
    echo "fuzz: $name FAILED; see $top/$build/$name.log"
    grep -E "ERROR|SUMMARY" "$name.log" | head -5
  fi
done
echo "fuzz: $ran passed, $fail failed"
[ "$fail" -eq 0 ]
