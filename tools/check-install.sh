#!/bin/sh
# Installs the build into a scratch prefix, then builds small programs
# outside the tree against it: one with pkg-config (libacp alone, proving
# the core links without libuv), one with CMake's find_package(libacp)
# using the runtime, and the user examples (examples/Makefile, pkg-config),
# which then run against each other (examples/check.sh). All must build and
# run.
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$top/$build" --prefix "$tmp/prefix" >/dev/null
cat > "$tmp/core.c" <<'C'
#include <acp/acp.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  acp_json_doc *doc = NULL;
  size_t n;
  const char *raw;
  if (acp_json_doc_new(&doc, NULL) != 0 ||
      acp_json_doc_parse(doc, "{\"a\":[1.50]}", 12, NULL) != 0)
    return 1;
  raw = acp_json_raw(acp_json_arr_get(acp_json_obj_getz(acp_json_doc_root(doc), "a"), 0), &n);
  printf("libacp %s: %.*s\n", acp_version(), (int)n, raw);
  acp_json_doc_free(doc);
  return !(n == 4 && memcmp(raw, "1.50", 4) == 0);
}
C
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib64/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror "$tmp/core.c" -o "$tmp/core" $(pkg-config --cflags --libs libacp)
if ldd "$tmp/core" | grep -q libuv; then echo "FAIL: core program pulled libuv"; exit 1; fi
LD_LIBRARY_PATH="$(pkg-config --variable=libdir libacp)" "$tmp/core"

mkdir -p "$tmp/proj"
cat > "$tmp/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(libacp REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE libacp::acp-uv)
CM
cat > "$tmp/proj/main.c" <<'C'
#include <acp/acp.h>
#include <acp/uv.h>
#include <stdio.h>
int main(void) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  acp_uv_ignore_sigpipe();
  printf("libacp-uv with libuv %s: ok\n", uv_version_string());
  return uv_loop_close(&loop);
}
C
cmake -S "$tmp/proj" -B "$tmp/proj/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/proj/b" >/dev/null
LD_LIBRARY_PATH="$(pkg-config --variable=libdir libacp)" "$tmp/proj/b/consumer"
test -f "$tmp/prefix/share/man/man1/acp.1"
test -x "$tmp/prefix/bin/acp"
test -x "$tmp/prefix/bin/acp-mcp"
test -x "$tmp/prefix/bin/acp-remote"
# Only the MCP commands may load the HTTP stack (libcurl alone maps ~40
# libraries), only acp-remote TLS, HTTP/2 and the line editor; agent,
# client and conductor stay lean.
if ldd "$tmp/prefix/bin/acp" | grep -Eq 'libcurl|libmicrohttpd'; then
  echo "FAIL: acp links the HTTP stack"; exit 1
fi
if ldd "$tmp/prefix/bin/acp" | grep -Eq 'libssl|libcrypto|libnghttp2|libedit'; then
  echo "FAIL: acp links TLS, HTTP/2 or the line editor"; exit 1
fi
pkg-config --exists libacp-http || { echo "FAIL: no libacp-http.pc"; exit 1; }
"$tmp/prefix/bin/acp" mcp --help >/dev/null
"$tmp/prefix/bin/acp" serve --help >/dev/null
# The examples a library user starts from, built from the installed
# headers and libraries only, then run: each checks its partner's answer.
mkdir -p "$tmp/examples"
make -s -C "$top/examples" check OUT="$tmp/examples" \
  ACP="$tmp/prefix/bin/acp" CFLAGS="-std=c11 -Wall -Wextra -Werror -O2"
echo "install: pkg-config and find_package consumers and the examples build and run"
echo "1 passed, 0 failed"
