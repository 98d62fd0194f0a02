#!/usr/bin/env python3
"""A scripted ACP client for the conductor tests.

usage: drive.py SCENARIO [--out FILE] -- COMMAND...

Spawns COMMAND (normally `acp conductor ...`), plays SCENARIO on its stdin,
checks what comes back, prints "ok SCENARIO" or "FAIL SCENARIO: why" and
exits 0 or 1. Raw lines received are appended to --out when given.
"""
import json
import os
import queue
import subprocess
import sys
import threading
import time

argv = sys.argv[1:]
scenario = argv.pop(0)
out_path = None
if argv and argv[0] == "--out":
    out_path = argv[1]
    argv = argv[2:]
if argv and argv[0] == "--":
    argv = argv[1:]

proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
q = queue.Queue()
raw_lines = []


def reader():
    for line in proc.stdout:
        raw_lines.append(line)
        if out_path:
            with open(out_path, "ab") as f:
                f.write(line)
        q.put(line)
    q.put(None)


threading.Thread(target=reader, daemon=True).start()


class Fail(Exception):
    pass


def send_raw(b):
    proc.stdin.write(b + b"\n")
    proc.stdin.flush()


def send(m):
    send_raw(json.dumps(m, separators=(",", ":")).encode())


def recv(timeout=10.0):
    try:
        line = q.get(timeout=timeout)
    except queue.Empty:
        raise Fail("timeout waiting for a message")
    if line is None:
        raise Fail("conductor closed its stdout")
    return line.strip(), json.loads(line)


def wait_for(pred, timeout=10.0, what="a message"):
    end = time.time() + timeout
    while True:
        left = end - time.time()
        if left <= 0:
            raise Fail("timeout waiting for " + what)
        raw, m = recv(left)
        if pred(m):
            return raw, m


def response(i):
    return lambda m: m.get("id") == i and "method" not in m


def request(rid, method, params):
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    return wait_for(response(rid), what="response to " + method)


def init():
    raw, m = request(0, "initialize", {"protocolVersion": 1,
                                       "clientCapabilities": {}})
    if "result" not in m:
        raise Fail("initialize failed: %r" % m)
    return m


def new_session():
    raw, m = request(1, "session/new", {"cwd": os.getcwd(), "mcpServers": []})
    if "result" not in m:
        raise Fail("session/new failed: %r" % m)
    return m["result"]["sessionId"]


def close_and_wait(expect=None, timeout=15):
    proc.stdin.close()
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise Fail("conductor did not exit after stdin EOF")
    if expect is not None and rc != expect:
        raise Fail("conductor exited %d, expected %d" % (rc, expect))
    return rc


# MARK: - scenarios

def sc_init():
    m = init()
    print("init-result: " + json.dumps(m["result"], sort_keys=True))
    close_and_wait(0)


def sc_bytes():
    """Byte-exact payloads and _meta through the chain (rawagent echoes)."""
    init()
    payload = (b'{"big":12345678901234567890,"dec":1.000000000000000000001,'
               b'"z":1,"a":"\\u00e9\\n\\"","_meta":{"trace":"x","n":1e400},'
               b'"unknown":{"k":[1,2.50,-0.0]}}')
    send_raw(b'{"jsonrpc":"2.0","id":"e1","method":"test/echo","params":'
             + payload + b"}")
    raw, m = wait_for(response("e1"), what="echo")
    want = b'"result":' + payload + b"}"
    if not raw.endswith(want):
        raise Fail("payload changed: got %r" % raw)
    # a notification with _meta at the top of params, then a request
    send_raw(b'{"jsonrpc":"2.0","id":7,"method":"test/echo","params":'
             b'{"_meta":{"x.y/z":[true,null]},"v":12345678901234567890}}')
    raw, m = wait_for(response(7), what="echo 2")
    if not raw.endswith(b'"result":{"_meta":{"x.y/z":[true,null]},'
                        b'"v":12345678901234567890}}'):
        raise Fail("_meta changed: %r" % raw)
    close_and_wait(0)


def sc_cancel():
    """$/cancel_request from the client reaches the agent hop by hop."""
    init()
    send({"jsonrpc": "2.0", "id": "slow-1", "method": "test/slow", "params": {}})
    time.sleep(0.3)
    send({"jsonrpc": "2.0", "method": "$/cancel_request",
          "params": {"requestId": "slow-1"}})
    raw, m = wait_for(response("slow-1"), what="cancelled answer")
    if m.get("error", {}).get("code") != -32800:
        raise Fail("expected -32800, got %r" % m)
    close_and_wait(0)


def sc_reverse_cancel():
    """The agent cancels a request it sent to the client."""
    init()
    send({"jsonrpc": "2.0", "id": 5, "method": "test/reverse", "params": {}})
    got_req = None
    got_cancel = None
    end = time.time() + 10
    while (got_req is None or got_cancel is None) and time.time() < end:
        raw, m = recv(end - time.time())
        if m.get("method") == "test/hang":
            got_req = m["id"]
        elif m.get("method") == "$/cancel_request":
            got_cancel = m["params"]["requestId"]
    if got_req is None or got_cancel is None:
        raise Fail("missing test/hang or its $/cancel_request")
    if got_req != got_cancel:
        raise Fail("cancel names %r, request was %r" % (got_cancel, got_req))
    send({"jsonrpc": "2.0", "id": got_req,
          "error": {"code": -32800, "message": "cancelled"}})
    close_and_wait(0)


def sc_ask():
    """A request from the agent to the client goes through and back."""
    init()
    send({"jsonrpc": "2.0", "id": 9, "method": "test/ask",
          "params": {"q": 12345678901234567890}})
    raw, m = wait_for(lambda m: m.get("method") == "test/question",
                      what="question")
    if b"12345678901234567890" not in raw:
        raise Fail("question params changed: %r" % raw)
    send({"jsonrpc": "2.0", "id": m["id"], "result": {"yes": True}})
    raw, m = wait_for(response(9), what="answer")
    if m.get("result") != {"answer": {"yes": True}}:
        raise Fail("bad answer %r" % m)
    close_and_wait(0)


def prompt(rid, sid, text):
    send({"jsonrpc": "2.0", "id": rid, "method": "session/prompt",
          "params": {"sessionId": sid,
                     "prompt": [{"type": "text", "text": text}]}})


def texts_until(rid, timeout=10):
    chunks = []
    end = time.time() + timeout
    while True:
        raw, m = recv(max(0.01, end - time.time()))
        if m.get("method") == "session/update":
            u = m["params"]["update"]
            if u.get("sessionUpdate") == "agent_message_chunk":
                chunks.append(u["content"]["text"])
        elif m.get("id") == rid and "method" not in m:
            return m, chunks


def crash_common():
    """Prompt; a proxy dies mid-prompt; the prompt is answered with an error
    naming it quickly."""
    init()
    sid = new_session()
    prompt(10, sid, "start\n/sleep 3000\nend")
    t0 = time.time()
    m, _ = texts_until(10, timeout=10)
    dt = time.time() - t0
    err = m.get("error")
    if not err:
        raise Fail("prompt was not answered with an error: %r" % m)
    msg = err.get("message", "")
    data = err.get("data") or {}
    if "testproxy" not in msg or "status 3" not in msg or \
            "dying on purpose" not in msg:
        raise Fail("error does not name the component: %r" % err)
    if data.get("exitStatus") != 3 or data.get("component") is None:
        raise Fail("error data incomplete: %r" % data)
    if dt > 2.5:
        raise Fail("answered after %.2fs (the agent's sleep is 3s)" % dt)
    return sid


def sc_crash_fail():
    crash_common()
    try:
        rc = proc.wait(10)
    except subprocess.TimeoutExpired:
        raise Fail("conductor did not end the chain")
    if rc != 1:
        raise Fail("conductor exited %d, expected 1" % rc)


def sc_crash_continue():
    """bypass/restart: the next prompt in the same session works."""
    sid = crash_common()
    prompt(11, sid, "again")
    m, chunks = texts_until(11, timeout=10)
    if m.get("result", {}).get("stopReason") != "end_turn":
        raise Fail("second prompt failed: %r" % m)
    if "".join(chunks).find("again") < 0:
        raise Fail("second prompt text missing: %r" % chunks)
    print("chunks:", json.dumps(chunks))
    close_and_wait(0)


def sc_crash_cut():
    """bypass/restart with rawagent: a proxy dies mid-turn; the agent ignores
    $/cancel_request, so the conductor must send session/cancel. The old
    turn's late output must not show up in the next prompt, which must be
    answered on its own."""
    init()
    sid = new_session()
    prompt(10, sid, "hang")
    m, _ = texts_until(10, timeout=10)
    if not m.get("error"):
        raise Fail("prompt was not answered with an error: %r" % m)
    prompt(11, sid, "again")
    m, chunks = texts_until(11, timeout=10)
    if m.get("result", {}).get("stopReason") != "end_turn":
        raise Fail("second prompt failed: %r" % m)
    if chunks != ["again"]:
        raise Fail("second prompt's chunks: %r" % chunks)
    print("chunks:", json.dumps(chunks))
    close_and_wait(0)


def children(pid):
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if ppid == pid:
            kids.append((int(d), cmd))
    return kids


def sc_agent_death():
    """The agent (the conductor's last child) is killed mid-prompt."""
    init()
    sid = new_session()
    prompt(10, sid, "/sleep 5000")
    time.sleep(0.3)
    kids = children(proc.pid)
    agents = [k for k in kids if k[1].rstrip().endswith(" agent")]
    if len(agents) != 1:
        raise Fail("cannot find the agent among %r" % kids)
    os.kill(agents[0][0], 9)
    t0 = time.time()
    m, _ = texts_until(10, timeout=10)
    print("answered %.1f ms after the kill" % ((time.time() - t0) * 1000))
    err = m.get("error") or {}
    if "agent" not in err.get("message", "") or \
            "signal 9" not in err.get("message", ""):
        raise Fail("prompt not answered with an error naming the agent: %r" % m)
    try:
        rc = proc.wait(10)
    except subprocess.TimeoutExpired:
        raise Fail("conductor did not end after the agent died")
    if rc != 1:
        raise Fail("exit %d, expected 1" % rc)


def sc_hold():
    """Initialize, then keep the chain running until killed (for ps checks)."""
    init()
    new_session()
    sys.stdout.write("ready %d\n" % proc.pid)
    sys.stdout.flush()
    time.sleep(60)


def sc_proxy_mode():
    """Talk to `acp conductor proxy` as its parent conductor would."""
    send({"jsonrpc": "2.0", "id": 0, "method": "proxy/initialize",
          "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    # the chain forwards initialize to its successor: we get it wrapped
    raw, m = wait_for(lambda m: m.get("method") == "proxy/successor",
                      what="successor initialize")
    inner = m["params"]
    if inner.get("method") != "initialize":
        raise Fail("expected initialize wrapped, got %r" % m)
    send({"jsonrpc": "2.0", "id": m["id"],
          "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    raw, m = wait_for(response(0), what="proxy/initialize answer")
    if "result" not in m:
        raise Fail("bad answer %r" % m)
    close_and_wait(0)


SCENARIOS = {
    "init": sc_init, "bytes": sc_bytes, "cancel": sc_cancel,
    "reverse-cancel": sc_reverse_cancel, "ask": sc_ask,
    "crash-fail": sc_crash_fail, "crash-continue": sc_crash_continue,
    "crash-cut": sc_crash_cut,
    "agent-death": sc_agent_death, "hold": sc_hold,
    "proxy-mode": sc_proxy_mode,
}

try:
    SCENARIOS[scenario]()
    print("ok " + scenario)
    sys.exit(0)
except Fail as e:
    print("FAIL %s: %s" % (scenario, e))
    if proc.poll() is None:
        proc.kill()
    sys.exit(1)
