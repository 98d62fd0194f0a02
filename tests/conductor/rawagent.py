#!/usr/bin/env python3
"""A tiny ACP agent for the conductor tests. It never re-serializes what it
echoes: the answer to `test/echo` is the request's params bytes, spliced.

  initialize        -> {"protocolVersion": <as asked>, "agentCapabilities": {}}
  session/new       -> {"sessionId": "s1"}
  test/echo         -> result = the raw params text, byte for byte
  test/slow         -> answered -32800 when $/cancel_request names it
  test/reverse      -> sends "test/hang" to the client, then cancels it with
                       $/cancel_request; answers {"sent": <id>} at once
  test/ask          -> sends "test/question" to the client and answers with
                       the client's result when it comes
  session/prompt    -> one agent_message_chunk with the prompt's text, then
                       end_turn; text "hang": the chunk "old" and the turn
                       stays open, deaf to $/cancel_request (as real agents
                       are); session/cancel ends it after 0.5 s with a late
                       chunk "late" and stopReason cancelled. A prompt that
                       comes while a turn is open is merged into it (never
                       answered), as one real agent did.
Options: --pidfile FILE (append its pid), --log FILE (append "agent init").
"""
import json
import os
import sys
import time

args = sys.argv[1:]
opt = {}
for i in range(0, len(args) - 1, 2):
    opt[args[i].lstrip("-")] = args[i + 1]
if "pidfile" in opt:
    with open(opt["pidfile"], "a") as f:
        f.write("%d\n" % os.getpid())

out = sys.stdout.buffer
slow = set()
asks = {}
nid = [0]
turns = {}  # sessionId -> id of the open "hang" prompt


def send_raw(b):
    out.write(b + b"\n")
    out.flush()


def send(m):
    send_raw(json.dumps(m, separators=(",", ":")).encode())


def raw_params(line):
    k = line.find(b'"params":')
    if k < 0:
        return b"null"
    return line[k + 9:line.rindex(b"}")]


for line in sys.stdin.buffer:
    line = line.strip()
    if not line:
        continue
    m = json.loads(line)
    meth = m.get("method")
    mid = m.get("id")
    if meth is None:
        if mid in asks:
            orig = asks.pop(mid)
            send({"jsonrpc": "2.0", "id": orig, "result": {"answer": m.get("result")}})
        continue
    if meth == "initialize":
        if "log" in opt:
            with open(opt["log"], "a") as f:
                f.write("agent init\n")
        pv = (m.get("params") or {}).get("protocolVersion", 1)
        send({"jsonrpc": "2.0", "id": mid,
              "result": {"protocolVersion": pv, "agentCapabilities": {},
                         "agentInfo": {"name": os.environ.get("RAWAGENT_NAME", "raw"),
                                       "version": "1"},
                         "authMethods": []}})
    elif meth == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "s1"}})
    elif meth == "session/prompt":
        p = m.get("params") or {}
        sid = p.get("sessionId")
        text = "".join(b.get("text", "") for b in p.get("prompt") or [])
        if sid in turns:
            continue  # merged into the open turn
        send({"jsonrpc": "2.0", "method": "session/update",
              "params": {"sessionId": sid, "update": {
                  "sessionUpdate": "agent_message_chunk",
                  "content": {"type": "text",
                              "text": "old" if text == "hang" else text}}}})
        if text == "hang":
            turns[sid] = mid
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "result": {"stopReason": "end_turn"}})
    elif meth == "session/cancel":
        sid = (m.get("params") or {}).get("sessionId")
        if sid in turns:
            time.sleep(0.5)
            send({"jsonrpc": "2.0", "method": "session/update",
                  "params": {"sessionId": sid, "update": {
                      "sessionUpdate": "agent_message_chunk",
                      "content": {"type": "text", "text": "late"}}}})
            send({"jsonrpc": "2.0", "id": turns.pop(sid),
                  "result": {"stopReason": "cancelled"}})
    elif meth == "test/echo":
        send_raw(b'{"jsonrpc":"2.0","id":' + json.dumps(mid).encode()
                 + b',"result":' + raw_params(line) + b"}")
    elif meth == "test/slow":
        slow.add(json.dumps(mid))
    elif meth == "$/cancel_request":
        rid = json.dumps(m["params"]["requestId"])
        if rid in slow:
            slow.discard(rid)
            send({"jsonrpc": "2.0", "id": json.loads(rid),
                  "error": {"code": -32800, "message": "Request cancelled"}})
    elif meth == "test/reverse":
        nid[0] += 1
        send({"jsonrpc": "2.0", "id": "hang-%d" % nid[0], "method": "test/hang",
              "params": {}})
        send({"jsonrpc": "2.0", "method": "$/cancel_request",
              "params": {"requestId": "hang-%d" % nid[0]}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"sent": nid[0]}})
    elif meth == "test/ask":
        nid[0] += 1
        asks[nid[0]] = mid
        send({"jsonrpc": "2.0", "id": nid[0], "method": "test/question",
              "params": m.get("params")})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32601, "message": "Method not found"}})
