#!/bin/sh
# Checks the public headers and the core's independence:
#  1. every public header compiles alone as C11 (-Wpedantic -Werror) and as
#     C++11;
#  2. libacp links without libuv and imports nothing but libc/libm symbols
#     from an allow-list: no I/O, no clock, no threads.
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

for h in "$top"/include/acp/*.h "$top/$build/include/acp/version.h"; do
  name=$(basename "$h")
  printf '#include <acp/%s>\nint main(void) { return 0; }\n' "$name" > "$tmp/t.c"
  if ! cc -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$top/include" \
       -I"$top/$build/include" -c "$tmp/t.c" -o "$tmp/t.o"; then
    echo "FAIL: $name does not compile alone as C11"; fail=1
  fi
  cp "$tmp/t.c" "$tmp/t.cpp"
  if ! c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -I"$top/include" \
       -I"$top/$build/include" -c "$tmp/t.cpp" -o "$tmp/t.o"; then
    echo "FAIL: $name does not compile alone as C++11"; fail=1
  fi
done

lib="$top/$build/libacp.so"
if ldd "$lib" | grep -q libuv; then
  echo "FAIL: libacp.so depends on libuv"; fail=1
fi
# Symbols the core may import. Anything else (read, write, fopen, printf,
# clock_gettime, time, pthread_*) would mean I/O, a clock or threads.
allowed='^(malloc|calloc|realloc|free|memcpy|memmove|memset|memcmp|memchr|strlen|strcmp|strncmp|strchr|strrchr|strtod|strtol|strtoll|strtoul|strtoull|snprintf|vsnprintf|qsort|bsearch|abort|__assert_fail|__stack_chk_fail|__errno_location|__isoc23_strto.*|__isoc99_.*|__ctype_b_loc|__ctype_tolower_loc|__ctype_toupper_loc|__cxa_finalize|__gmon_start__|_ITM_.*|frexp|ldexp|pow|floor|ceil|fabs|isnan|isinf|__fpclassify|_?_?memcpy_chk|__memset_chk|__snprintf_chk|__vsnprintf_chk|__memmove_chk|__strlen_chk|memcpy@.*|localeconv|strnlen|__tls_get_addr|__printf_chk|__asan_.*|__ubsan_.*|__sanitizer_.*|__lsan_.*)$'
bad=$(nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//' \
      | grep -Ev "$allowed" || true)
if [ -n "$bad" ]; then
  echo "FAIL: libacp imports symbols outside the allow-list:"; echo "$bad"
  fail=1
fi
# Package boundaries: no include climbs out of its folder, no test compiles
# another file's source in, and the runtime libraries see only their own
# headers and src/util (the core's private headers are the core's).
climb=$(cd "$top" && grep -rnE '#[[:space:]]*include[[:space:]]*"(\.\./|[^"]*\.c")' \
        src include tests examples bench fuzz tools 2>/dev/null || true)
if [ -n "$climb" ]; then
  echo "FAIL: an include climbs out of its folder or includes a .c file:"
  echo "$climb"; fail=1
fi
private=$(cd "$top" && grep -nE '#[[:space:]]*include[[:space:]]*"(internal\.h|[a-z_]+_int\.h|(common|mcp|rpc|json|router)/[^"]*)"' \
          src/uv/*.[ch] src/http/*.[ch] src/cli/*.[ch] src/fixtures/*.[ch] \
          examples/proxies/*.[ch] 2>/dev/null || true)
if [ -n "$private" ]; then
  echo "FAIL: a runtime library or program includes a core-private header:"
  echo "$private"; fail=1
fi
if [ "$fail" = 0 ]; then
  echo "headers: every public header compiles alone (C11, C++11); libacp imports only libc"
  echo "packages: no climbing include, no included .c, no core-private header outside the core"
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"
fi
exit $fail
