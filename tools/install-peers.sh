#!/bin/sh
# install-peers.sh - install the pinned third-party interop peers (the official
# ACP TypeScript SDK and its peer dependencies) into build/peers/acp.
#
# Usage: tools/install-peers.sh [--force]
#
# Idempotent: the package.json + package-lock.json of tests/interop are copied
# into build/peers/acp and installed with `npm ci` (exact versions from the
# checked-in lockfile). When the installed tree already matches the lockfile
# (same lockfile checksum and every pinned package present at its version),
# nothing is done. Needs node and npm on PATH (Node 20 is enough); packages come
# from whatever registry npm is configured to use. Prints each step on stdout,
# prefixed "install-peers:"; exits nonzero on any failure.
#
# Environment: ACP_PEERS_DIR overrides the destination (default
# <repo>/build/peers/acp).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
src="$root/tests/interop"
dest="${ACP_PEERS_DIR:-$root/build/peers/acp}"
force=0
[ "${1:-}" = "--force" ] && force=1

say() { printf 'install-peers: %s\n' "$*"; }

# Tests that need the peers may start together (ctest -j): one installs,
# the others wait for it under the same lock and then find it up to date.
if [ -z "${ACP_PEERS_LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then
    mkdir -p "$dest"
    ACP_PEERS_LOCKED=1 exec flock "$dest/.lock" "$0" "$@"
fi

command -v node >/dev/null 2>&1 || { say "error: node not found on PATH"; exit 1; }
command -v npm >/dev/null 2>&1 || { say "error: npm not found on PATH"; exit 1; }
say "node $(node --version), npm $(npm --version 2>/dev/null)"

for f in package.json package-lock.json; do
    [ -f "$src/$f" ] || { say "error: missing $src/$f"; exit 1; }
done

sum() { cksum < "$1" | cut -d' ' -f1,2; }
want="$(sum "$src/package.json") $(sum "$src/package-lock.json")"
stamp="$dest/.installed-lock"

# Every package in the lockfile present at its locked version?
installed_ok() {
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
    node -e '
        const fs = require("fs"), path = require("path");
        const dir = process.argv[1];
        const lock = JSON.parse(fs.readFileSync(path.join(dir, "package-lock.json"), "utf8"));
        let bad = 0;
        for (const [p, info] of Object.entries(lock.packages || {})) {
            if (!p) continue;
            let v = null;
            try { v = JSON.parse(fs.readFileSync(path.join(dir, p, "package.json"), "utf8")).version; } catch (e) {}
            if (v !== info.version) { console.log("install-peers: " + p + " is " + v + ", want " + info.version); bad = 1; }
        }
        process.exit(bad);
    ' "$dest"
}

if [ "$force" -eq 0 ] && installed_ok; then
    say "up to date in $dest"
    exit 0
fi

say "installing pinned peers from tests/interop/package-lock.json into $dest"
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
rm -f "$stamp"
# npm ci: exact lockfile install, removes any stale node_modules first.
npm ci --prefix "$dest" --no-audit --no-fund --loglevel=error
printf '%s\n' "$want" > "$stamp"
installed_ok || { say "error: installed tree does not match the lockfile"; exit 1; }
node -e '
    const p = require(process.argv[1] + "/node_modules/@agentclientprotocol/sdk/package.json");
    console.log("install-peers: installed " + p.name + "@" + p.version);
' "$dest"
say "done"
