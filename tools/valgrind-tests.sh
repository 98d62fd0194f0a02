#!/bin/sh
# Runs every ctest of a (non-sanitizer) build under valgrind memcheck and
# fails on any memory error or definite/indirect/possible leak. Child
# processes the tests spawn are not traced; the tests that spawn `acp`
# check those separately. Tests can see ACP_VALGRIND=1 to lower iteration
# counts (never assertions).
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$build"
ctest --show-only=json-v1 > .vg-tests.json
python3 - "$top" <<'PY'
import json, os, subprocess, sys
tests = json.load(open('.vg-tests.json'))['tests']
bad = 0
skipped = 0
for t in tests:
    cmd = t['command']
    env = dict(os.environ, ACP_VALGRIND='1')
    for p in t.get('properties', []):
        if p['name'] == 'ENVIRONMENT':
            for kv in p['value']:
                k, _, v = kv.partition('=')
                env[k] = v
    # Interpreted scripts (interop, wasm) are not C code to memcheck.
    if not os.access(cmd[0], os.X_OK) or cmd[0].endswith(('.sh', '.mjs', 'node', 'python3', 'sh')):
        skipped += 1
        continue
    wd = next((p['value'] for p in t.get('properties', []) if p['name'] == 'WORKING_DIRECTORY'), None)
    vg = ['valgrind', '-q', '--error-exitcode=99', '--leak-check=full',
          '--errors-for-leak-kinds=definite,indirect,possible',
          '--show-leak-kinds=definite,indirect,possible']
    r = subprocess.run(vg + cmd, env=env, cwd=wd, capture_output=True, text=True)
    if r.returncode != 0:
        bad += 1
        print(f"valgrind: {t['name']} FAILED (exit {r.returncode})")
        # The test's own failure lines first: valgrind's report (stderr)
        # comes after them and would push them out of the tail.
        for line in (r.stdout + '\n' + r.stderr).splitlines():
            if not line.startswith('==') and any(
                    k in line for k in ('FAILED', 'ERROR', 'Failure', 'not ok', 'FAIL')):
                print(line)
        print((r.stdout + r.stderr)[-4000:])
    else:
        print(f"valgrind: {t['name']} clean")
n = len(tests) - skipped
print(f"valgrind: {skipped} script tests skipped here (the acp processes they run are checked by the integration scripts under ACP_VALGRIND_WRAP)")
print(f"valgrind: {n - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
PY
