#!/usr/bin/env python3
"""Write a synthetic conductor trace of exactly N messages to stdout, shaped
like `acp conductor --trace` writes them: client -> p1 -> p2 -> agent, ids
rewritten on every hop, responses carrying "answers", session updates
wrapped in proxy/successor toward proxies, an error every tenth turn, a
session/cancel every seventh, a router-made $/cancel_request now and then,
50 sessions. Used by run-trace.sh and run-trace-browser.sh."""
import json
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
names = ["client", "p1", "p2", "agent"]
next_id = [0, 1, 1, 1]  # conductor ids toward each link
out = sys.stdout
count = 0
t = 0.0


def emit(frm, to, msg, answers=None):
    global count, t
    t += 0.013
    e = {"time": round(t, 3), "from": names[frm] if frm >= 0 else "conductor",
         "fromLink": frm, "to": names[to], "toLink": to,
         "dir": "right" if to > frm else "left"}
    line = json.dumps(e, separators=(",", ":"))[:-1]
    line += ',"message":' + json.dumps(msg, separators=(",", ":"))
    if answers:
        line += ',"answers":{"link":%d,"id":%d}' % answers
    out.write(line + "}\n")
    count += 1


turn = 0
while count + 16 <= n:
    sid = "sess_%d" % (turn % 50)
    turn += 1
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "turn %d" % turn}]}
    sent = []  # (link, conductor id) of each hop
    orig = turn  # the client's own id
    for hop in range(3):
        cid = next_id[hop + 1]
        next_id[hop + 1] += 1
        emit(hop, hop + 1, {"jsonrpc": "2.0", "id": cid, "method": "session/prompt",
                            "params": prompt})
        sent.append((hop + 1, cid))
    for k in range(2):
        upd = {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk",
                                            "content": {"type": "text", "text": "chunk %d" % k}}}
        for hop in (3, 2, 1):
            if hop - 1 > 0:
                msg = {"jsonrpc": "2.0", "method": "proxy/successor",
                       "params": {"method": "session/update", "params": upd}}
            else:
                msg = {"jsonrpc": "2.0", "method": "session/update", "params": upd}
            emit(hop, hop - 1, msg)
    if turn % 7 == 0:
        emit(0, 1, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    elif turn % 11 == 0:
        emit(-1, 3, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}})
    for hop in (3, 2, 1):
        link, cid = sent[hop - 1]
        rid = orig if hop == 1 else 1000 + turn  # the requester's own id
        if turn % 10 == 0:
            msg = {"jsonrpc": "2.0", "id": rid,
                   "error": {"code": -32603, "message": "Internal error"}}
        else:
            msg = {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}
        emit(hop, hop - 1, msg, (link, cid))
while count < n:
    emit(3, 2, {"jsonrpc": "2.0", "method": "proxy/successor",
                "params": {"method": "session/update",
                           "params": {"sessionId": "sess_0",
                                      "update": {"sessionUpdate": "plan", "entries": []}}}})
