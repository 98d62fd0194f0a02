#!/bin/sh
# Check that every C source and header is as clang-format leaves it
# (`make format` applies it). The tree is formatted with clang-format 14,
# Debian's; another major version formats some constructs differently, so
# with one the check is skipped (exit 77) rather than failed. Not the
# *.h.in templates: clang-format splits their @VAR@ placeholders.
# Usage: tools/check-format.sh [SOURCE_DIR]
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
exe=$(command -v clang-format) || {
  echo "check-format: skipped: clang-format is not installed"; exit 77; }
major=$("$exe" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$major" != 14 ]; then
  echo "check-format: skipped: clang-format $major, the tree is formatted with 14"
  exit 77
fi
if [ -d .git ] || [ -f .git ]; then
  files=$(git ls-files '*.c' '*.h')
else
  files=$(find src include tests bench examples fuzz tools \
    \( -name '*.c' -o -name '*.h' \) 2>/dev/null)
fi
n=$(echo "$files" | wc -w)
# One process for all files; --dry-run --Werror names each place it would
# change and fails.
# shellcheck disable=SC2086
if ! "$exe" --style=file --dry-run --Werror $files 2>"${TMPDIR:-/tmp}/check-format.$$"; then
  grep -o '^[^:]*:[0-9]*:[0-9]*: error' "${TMPDIR:-/tmp}/check-format.$$" |
    cut -d: -f1 | sort -u | sed 's/^/check-format: not formatted: /'
  rm -f "${TMPDIR:-/tmp}/check-format.$$"
  echo "check-format: $n files checked; run 'make format'"
  exit 1
fi
rm -f "${TMPDIR:-/tmp}/check-format.$$"
echo "check-format: $n files, all formatted"
