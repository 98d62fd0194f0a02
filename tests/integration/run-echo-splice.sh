#!/bin/sh
# `acp agent --echo` forwards a prompt's text as it came: the update's text
# is the prompt's raw JSON string byte for byte (escapes included), taken
# from the input in place and written with one writev
# (acp_rpc_session_set_borrow_output()). Texts of 70 KB with and without
# escapes, one of 1 MiB (more than a grown pipe holds, so the writev is cut
# short and the rest is queued), and one with a lone surrogate escape
# (decoded to U+FFFD, not forwarded); written to the agent in uneven
# chunks and read back in small reads, so its output pipe fills up.
set -eu
ACP_BIN=${ACP_BIN:-build/acp}
command -v python3 >/dev/null || { echo "no python3; skipping"; exit 77; }
exec python3 - "$ACP_BIN" <<'PY'
import json, subprocess, sys, threading

acp = sys.argv[1]
p = subprocess.Popen([acp, "agent", "--echo"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, bufsize=0)

def send(obj_bytes):
    p.stdin.write(obj_bytes + b"\n")

buf = b""
def read_line():
    global buf
    while b"\n" not in buf:
        chunk = p.stdout.read(1000)
        if not chunk:
            raise SystemExit("agent closed its output early")
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    return line

send(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}')
send(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}')
sid = None
while sid is None:
    m = json.loads(read_line())
    if m.get("id") == 1:
        sid = m["result"]["sessionId"]

def letters(n):
    return "".join(chr(97 + i % 26) for i in range(n))

raw_texts = [
    letters(70000),
    letters(35000) + '\\n\\u00e9\\"\\\\\\t\\/' + letters(35000),
    letters(1048576),
    letters(5000),
    letters(4000) + '\\ud800' + letters(4000),
]
lines = []
for i, t in enumerate(raw_texts):
    lines.append(('{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":'
                  '{"sessionId":%s,"prompt":[{"type":"text","text":"%s"}]}}\n'
                  % (i + 2, json.dumps(sid), t)).encode())
stream = b"".join(lines)

def writer():
    sizes = [1, 7, 4093, 65536, 100003, 13]
    at, k = 0, 0
    while at < len(stream):
        n = sizes[k % len(sizes)]
        p.stdin.write(stream[at:at + n])
        at += n
        k += 1
    p.stdin.close()

th = threading.Thread(target=writer)
th.start()
done = 0
bad = 0
while done < len(raw_texts):
    line = read_line()
    m = json.loads(line)
    if m.get("method") == "session/update":
        u = m["params"]["update"]
        if u.get("sessionUpdate") != "agent_message_chunk":
            continue
        # the raw text of the chunk, as written
        key = b'"text":'
        at = line.rindex(key) + len(key)
        end = line.rindex(b"}}}")
        got_raw = line[at:end - 1]  # without the content object's brace
        want_raw = b'"' + raw_texts[done].encode() + b'"'
        if done == 4:
            if u["content"]["text"] != letters(4000) + "\ufffd" + letters(4000):
                print("prompt %d: surrogate text not decoded as U+FFFD" % done)
                bad += 1
        elif got_raw != want_raw:
            print("prompt %d: text differs (%d vs %d bytes)" % (done, len(got_raw), len(want_raw)))
            bad += 1
    elif "id" in m and m["id"] >= 2:
        if m.get("result", {}).get("stopReason") != "end_turn":
            print("prompt %d: bad answer %s" % (m["id"] - 2, line[:200]))
            bad += 1
        done += 1
th.join()
rest = p.stdout.read()
p.wait()
if p.returncode != 0:
    print("agent exited %d" % p.returncode)
    bad += 1
if bad:
    sys.exit(1)
print("echo-splice: %d prompts echoed byte for byte" % len(raw_texts))
PY
