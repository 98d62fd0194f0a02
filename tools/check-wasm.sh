#!/bin/sh
# Builds the core (src/util src/common src/json src/rpc src/acp src/mcp
# src/router: libc only) for
# wasm32-wasi with clang and Debian's wasi-libc, links tests/wasm/smoke.c
# against it and runs the result under Node's WASI, proving the core both
# compiles and works without an operating system underneath.
set -eu
out=${1:-build-wasm}
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/obj"
cflags="--target=wasm32-wasi --sysroot=/usr -std=c11 -O2 -Wall -Wextra -Werror
  -I$top/include -I$top/src -I$top/src/common -I$top/src/util -I$out/include
  -DACP_BUILDING_LIBRARY -DACP_STATICLIB"
mkdir -p "$out/include/acp"
ver=$(sed -n 's/^project(libacp VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
sed -e "s/@ACP_VERSION@/$ver/" -e "s/@ACP_VERSION_NUM@/0/" \
  "$top/include/acp/version.h.in" > "$out/include/acp/version.h"
objs=""
for src in "$top"/src/util/*.c "$top"/src/common/*.c "$top"/src/json/*.c "$top"/src/rpc/*.c \
           "$top"/src/acp/*.c "$top"/src/mcp/*.c "$top"/src/router/*.c; do
  [ -f "$src" ] || continue
  o="$out/obj/$(echo "$src" | sed "s|$top/src/||; s|/|_|g").o"
  # shellcheck disable=SC2086
  clang $cflags -c "$src" -o "$o"
  objs="$objs $o"
done
rm -f "$out/libacp.a"
# shellcheck disable=SC2086
llvm-ar rcs "$out/libacp.a" $objs
# shellcheck disable=SC2086
clang $cflags "$top/tests/wasm/smoke.c" "$out/libacp.a" -o "$out/smoke.wasm"
echo "wasm32-wasi: built $(echo $objs | wc -w) core objects into $out/libacp.a"
node "$top/tools/wasm-run.mjs" "$out/smoke.wasm"
