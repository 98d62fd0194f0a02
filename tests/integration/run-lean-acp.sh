#!/bin/sh
# run-lean-acp.sh - the acp program maps no TLS, HTTP/2 or line-editor
# library; the commands that need them run in acp-remote, which acp execs
# (docs/decisions.md, "acp-remote").
#   - acp's NEEDED entries (readelf -d) name none of libssl, libcrypto,
#     libnghttp2, libedit, libcurl, libmicrohttpd; acp-remote's name libssl
#     and libnghttp2 (so the check looks at the right files);
#   - an idle `acp agent` and `acp conductor agent ...` with its agent, after
#     initialize, map none of them (/proc/PID/maps);
#   - acp serve, acp client --url, a conductor with a URL component and
#     acp bench-client --url work through acp, `acp serve` keeps its pid
#     (exec) and runs acp-remote;
#   - exit statuses and messages of the exec'd commands are those of
#     acp-remote run directly (usage errors, a refused connection, a bad
#     CA file);
#   - a copy of acp without acp-remote beside it (nor in PATH) says which
#     program it cannot run, exits 1, and still runs stdio commands.
# Env: ACP_BIN the built acp (default build/acp). Exit 77 when acp or
# acp-remote is not built.
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
remote=$(dirname "$acp")/acp-remote
[ -x "$remote" ] || skip "$remote is not built"
heavy='lib(ssl|crypto|nghttp2|edit|curl|microhttpd)[.-]'
# turn_ok NAME PATTERN: the command before it exited 0 ($rc) and its
# output ($out) has a line matching PATTERN.
turn_ok() {
  if [ $rc = 0 ] && echo "$out" | grep -q "$2"; then ok "$1"; else ko "$1" "exit $rc" "$out"; fi
}

# MARK: - NEEDED entries
if command -v readelf >/dev/null 2>&1; then
  needed=$(readelf -d "$acp" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  bad=$(echo "$needed" | grep -E "$heavy")
  if [ -n "$needed" ] && [ -z "$bad" ]; then
    ok "acp needs none of libssl, libcrypto, libnghttp2, libedit, libcurl, libmicrohttpd"
  else
    ko "acp needs none of libssl, libcrypto, libnghttp2, libedit, libcurl, libmicrohttpd" \
      "NEEDED: $(echo $needed)"
  fi
  rneeded=$(readelf -d "$remote" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if echo "$rneeded" | grep -q '^libssl' && echo "$rneeded" | grep -q '^libnghttp2'; then
    ok "acp-remote needs libssl and libnghttp2 (the check reads the right files)"
  else
    ko "acp-remote needs libssl and libnghttp2" "NEEDED: $(echo $rneeded)"
  fi
else
  echo "SKIP readelf is not installed (Debian package binutils): NEEDED checks"
fi

# MARK: - What running processes map
# maps_clean NAME PID: PID maps none of the heavy libraries.
maps_clean() {
  m=$(grep -E "$heavy" "/proc/$2/maps" 2>/dev/null | awk '{print $6}' | sort -u)
  if [ -r "/proc/$2/maps" ] && [ -z "$m" ]; then
    ok "$1 maps no TLS, HTTP/2, HTTP or line-editor library"
  else
    ko "$1 maps no TLS, HTTP/2, HTTP or line-editor library" "pid $2: $m"
  fi
}
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
if [ -d /proc/self ]; then
  for what in agent conductor; do
    mkfifo "$work/$what.in"
    if [ $what = agent ]; then
      "$acp" agent <"$work/$what.in" >"$work/$what.out" 2>"$work/$what.err" &
    else
      "$acp" conductor agent --quiet-stderr "$acp agent" <"$work/$what.in" \
        >"$work/$what.out" 2>"$work/$what.err" &
    fi
    pid=$!
    pids="$pids $pid"
    exec 3>"$work/$what.in"
    echo "$init" >&3
    if wait_for "$work/$what.out" '"id":1'; then
      maps_clean "an idle acp $what" "$pid"
      if [ $what = conductor ]; then
        kid=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null | awk '{print $1}')
        [ -n "$kid" ] || kid=$(ps -o pid= --ppid "$pid" 2>/dev/null | awk 'NR == 1 {print $1}')
        if [ -n "$kid" ]; then
          maps_clean "the conductor's acp agent" "$kid"
        else
          ko "the conductor's acp agent is its child" "no child of $pid"
        fi
      fi
    else
      ko "acp $what answers initialize" "$(cat "$work/$what.err")"
    fi
    exec 3>&-
    wait "$pid"
    rc=$?
    [ $rc = 0 ] && ok "acp $what: exit 0 at the end of its input" ||
      ko "acp $what: exit 0 at the end of its input" "exit $rc" "$(cat "$work/$what.err")"
  done
else
  echo "SKIP no /proc: mapping checks"
fi

# MARK: - The remote commands, through acp
"$acp" serve --help >"$work/out" 2>"$work/err"
rc=$?
if [ $rc = 0 ] && grep -q '^usage: acp serve' "$work/out"; then
  ok "acp serve --help: exit 0, its usage"
else
  ko "acp serve --help: exit 0, its usage" "exit $rc" "$(head -3 "$work/out" "$work/err")"
fi
"$acp" serve --listen 127.0.0.1:0 -- "$acp" agent 2>"$work/serve.log" &
spid=$!
pids="$pids $spid"
url=""
if wait_for "$work/serve.log" 'listening on ws://'; then
  url=$(sed -n 's/.*listening on \(ws:[^ ]*\).*/\1/p' "$work/serve.log" | head -1)
fi
if [ -z "$url" ]; then
  ko "acp serve starts" "$(cat "$work/serve.log")"
else
  exe=$(readlink "/proc/$spid/exe" 2>/dev/null)
  case $exe in
  */acp-remote) ok "acp serve runs acp-remote (same pid, exec)" ;;
  *) ko "acp serve runs acp-remote (same pid, exec)" "exe of $spid: $exe" ;;
  esac
  out=$(timeout 60 "$acp" client --quiet --url "$url" -p "hello remote" 2>&1)
  rc=$?
  turn_ok "acp client --url: a turn, exit 0" "hello remote"
  out=$(timeout 60 "$acp" client --quiet -p "through a chain" -- \
        "$acp" conductor agent "$acp proxy arrow" "$url" 2>&1)
  rc=$?
  turn_ok "acp conductor with a URL component: the arrow proxy's turn, exit 0" "^>.*through a chain"
  timeout 60 "$acp" bench-client --turns 20 --url "$url" >"$work/bench" 2>&1
  rc=$?
  if [ $rc = 0 ] && grep -q '"turns":20,' "$work/bench"; then
    ok "acp bench-client --url: 20 turns, exit 0"
  else
    ko "acp bench-client --url: 20 turns, exit 0" "exit $rc" "$(cat "$work/bench")"
  fi
fi

# MARK: - Same statuses and messages as acp-remote itself
# same NAME ARGS...: `acp ARGS` and `acp-remote ARGS` exit alike and print
# the same stderr.
same() {
  name=$1
  shift
  timeout 60 "$acp" "$@" </dev/null >"$work/a.out" 2>"$work/a.err"
  ra=$?
  timeout 60 "$remote" "$@" </dev/null >"$work/r.out" 2>"$work/r.err"
  rr=$?
  if [ $ra = "$rr" ] && cmp -s "$work/a.err" "$work/r.err"; then
    ok "$name: exit $ra, as acp-remote"
  else
    ko "$name: as acp-remote" "acp: exit $ra: $(cat "$work/a.err")" \
      "acp-remote: exit $rr: $(cat "$work/r.err")"
  fi
}
same "client --url, refused" client --quiet --url ws://127.0.0.1:1/acp -p hi
same "client --url, not a URL" client --url frob://x -p hi
same "client --url and an agent" client --url ws://127.0.0.1:1/acp -p hi -- "$acp" agent
same "client --ca without TLS" client --url ws://127.0.0.1:1/acp --ca /dev/null -p hi
same "client --ca, not a CA" client --url wss://127.0.0.1:1/acp --ca /dev/null -p hi
same "bench-client --url, refused" bench-client --turns 2 --url ws://127.0.0.1:1/acp
same "serve, bad option" serve --bogus
same "conductor, a refused URL component" conductor agent ws://127.0.0.1:1/acp

# MARK: - Without acp-remote
mkdir -p "$work/lone"
cp "$acp" "$work/lone/acp"
lone="$work/lone/acp"
# run_lone NAME ARGS...: the lone acp, PATH without acp-remote.
run_lone() {
  name=$1
  shift
  PATH=/usr/bin:/bin timeout 60 "$lone" "$@" </dev/null >"$work/out" 2>"$work/err"
  rc=$?
  if [ $rc = 1 ] && grep -q "^acp $1: cannot run $work/lone/acp-remote: No such file or directory" "$work/err"; then
    ok "without acp-remote, $name: exit 1, says it cannot run it"
  else
    ko "without acp-remote, $name: exit 1, says it cannot run it" "exit $rc" "$(cat "$work/err")"
  fi
}
run_lone "acp serve" serve --listen 127.0.0.1:0 -- "$acp" agent
run_lone "acp client --url" client --url ws://127.0.0.1:1/acp -p hi
run_lone "acp conductor with a URL" conductor agent ws://127.0.0.1:1/acp
run_lone "acp bench-client --url" bench-client --url ws://127.0.0.1:1/acp
out=$(PATH=/usr/bin:/bin timeout 60 "$lone" client --quiet -p "alone" </dev/null 2>&1)
rc=$?
turn_ok "without acp-remote, acp client -- acp agent (stdio) works" alone
out=$(PATH=/usr/bin:/bin timeout 60 "$lone" client --quiet -p "chain" -- \
      "$lone" conductor agent "$lone proxy arrow" "$lone agent" 2>&1)
rc=$?
turn_ok "without acp-remote, a local chain works" "^>.*chain"

finish
