#!/bin/sh
# run-conductor-big.sh - long lines through `acp conductor` (issue 11: the
# conductor reads into its framers' buffers, joins plain runs across reads
# and lets the router's parse skip them): 1 MiB prompts, plain and spoiled
# by escapes, multi-byte characters and a quote at offsets around read
# sizes, come back from `acp agent --echo` byte for byte; a long line and a
# small one in the same write, or split into odd writes, are both answered
# in order; an over-long line followed by a good one in one write gets its
# -32600 and the good one its answer; broken JSON in a long line gets a
# parse error and the conductor goes on. The same 1 MiB prompts also pass
# through a proxy (`acp proxy trace`): wrapped, unwrapped and echoed back.
# The conductor lends each line to its router and writes the large spans
# from where they were read (acp_router_recv_framed_ref(), writev).
. "$(cd "$(dirname "$0")" && pwd)/../lib/common.sh"
find_acp
need_cmd python3 "needed by the test driver"

cat >"$work/big.py" <<'PY'
import json, subprocess, sys

acp, mode = sys.argv[1], sys.argv[2]
args = [acp, "conductor", "agent"]
if mode == "cap":
    args += ["--max-line", str(2 << 20)]
if mode == "proxy":
    # A proxy in the chain: the prompt travels wrapped in proxy/successor
    # and unwrapped, the echo back the same way (spans the router lends
    # from its input lines, written as pieces).
    args += [acp + " proxy trace --file /dev/null"]
args += [acp + " agent --echo"]
p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
inp, out = p.stdin, p.stdout

def send(*chunks):
    for c in chunks:
        inp.write(c)
        inp.flush()

def read_until(mid):
    """Messages up to and including the answer to id `mid`."""
    got = []
    while True:
        line = out.readline()
        if not line:
            sys.exit("conductor ended before answering %r" % (mid,))
        m = json.loads(line)
        got.append(m)
        if m.get("id") == mid and "method" not in m:
            return got

def msg(o):
    return json.dumps(o, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

send(msg({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": 1}}))
read_until(0)
send(msg({"jsonrpc": "2.0", "id": 1, "method": "session/new",
          "params": {"cwd": "/", "mcpServers": []}}))
sid = read_until(1)[-1]["result"]["sessionId"]

def prompt(i, text):
    return msg({"jsonrpc": "2.0", "id": i, "method": "session/prompt",
                "params": {"sessionId": sid,
                           "prompt": [{"type": "text", "text": text}]}})

def echoed(got):
    t = ""
    for m in got:
        if m.get("method") == "session/update":
            c = m["params"]["update"].get("content", {})
            t += c.get("text", "")
    return t

def check(name, cond):
    print(("ok " if cond else "FAIL ") + name)
    if not cond:
        sys.exit(1)

N = 1 << 20
base = "".join(chr(97 + (i * 7) % 26) for i in range(N))
texts = [("plain", base)]
for ins in ['"', "\\", "\n", "\u00e9", "\u20ac", "\U0001F600"]:
    for at in (0, 4095, 65536, 524288, N - 1):
        texts.append(("%r at %d" % (ins, at), base[:at] + ins + base[at:]))
if mode == "proxy":
    i = 10
    for name, t in texts[:8]:
        got = read_until(i) if send(prompt(i, t)) is None else None
        check("through a proxy: echo " + name, echoed(got) == t and
              got[-1].get("result", {}).get("stopReason") == "end_turn")
        i += 1
    both = prompt(100, base) + prompt(101, "small")
    send(both[:65537], both[65537:])
    a, b = read_until(100), read_until(101)
    check("through a proxy: long and small line", echoed(a) == base and
          echoed(b) == "small")
elif mode == "echo":
    i = 10
    for name, t in texts:
        got = read_until(i) if send(prompt(i, t)) is None else None
        check("echo " + name, echoed(got) == t and
              got[-1].get("result", {}).get("stopReason") == "end_turn")
        i += 1
    # A long line and a small one in one write, then the same cut into odd
    # writes (one ending inside the line, one inside the next).
    both = prompt(100, base) + prompt(101, "small")
    send(both)
    a, b = read_until(100), read_until(101)
    check("long and small line in one write", echoed(a) == base and
          echoed(b) == "small")
    both = prompt(102, base) + prompt(103, "tail")
    send(both[:65537], both[65537:N + 3], both[N + 3:])
    a, b = read_until(102), read_until(103)
    check("the same in odd writes", echoed(a) == base and echoed(b) == "tail")
    # Lines of 5 KB to 200 KB (lent to the router, shorter than what makes
    # the conductor write at once anyway) several in one write, cut at odd
    # places: each line's output is written before the framer moves the
    # next partial line over it, so every echo comes back intact.
    # (Each text starts elsewhere in `base`: lines that differ byte for
    # byte at the same offsets.)
    sizes = [5000, 20011, 70001, 4097, 130003, 200000, 9999]
    mids = b"".join(prompt(110 + j, base[j + 1:j + 1 + n])
                    for j, n in enumerate(sizes))
    send(mids[:30001], mids[30001:70003], mids[70003:300007], mids[300007:])
    for j, n in enumerate(sizes):
        check("mid-size line %d (%d B) in a shared write" % (j, n),
              echoed(read_until(110 + j)) == base[j + 1:j + 1 + n])
    # Broken JSON in a long line (a bare control byte in the text): a parse
    # error, and the next line is served.
    bad = prompt(104, base).replace(b'"text":"a', b'"text":"a\x01', 1)
    check("the broken line is broken", b"\x01" in bad)
    send(bad + prompt(105, "after"))
    a = read_until(None)
    check("broken long line: parse error",
          a[-1].get("error", {}).get("code") == -32700)
    check("and the next line is answered", echoed(read_until(105)) == "after")
else:
    # --max-line 2 MiB: a 3 MiB line is dropped and answered -32600 (the
    # session's answer), the line after it in the same write is served.
    over = prompt(200, base * 3)
    send(over + prompt(201, "next"))
    a = read_until(None)
    check("over-long line answered", a[-1].get("error", {}).get("code") == -32600)
    check("next line in the same write served", echoed(read_until(201)) == "next")
    send(prompt(202, base))
    check("a 1 MiB line after it", echoed(read_until(202)) == base)
inp.close()
check("conductor exits 0", p.wait(timeout=60) == 0)
PY

for mode in echo cap proxy; do
  if timeout 300 python3 "$work/big.py" "$acp" "$mode" >"$work/out.$mode" \
       2>"$work/err.$mode"; then
    ok "long lines through the conductor ($mode: $(grep -c '^ok' "$work/out.$mode") checks)"
  else
    ko "long lines through the conductor ($mode)" "$(tail -3 "$work/out.$mode")" \
       "$(tail -5 "$work/err.$mode")"
  fi
done
finish conductor-big
