#!/usr/bin/env python3
"""A forward-everything ACP proxy for the conductor tests.

Options:
  --name NAME        written in the log (default "proxy")
  --log FILE         append "NAME EVENT" lines: "NAME init" when it is
                     initialized, "NAME up METHOD" / "NAME down METHOD" for
                     each message it forwards toward the agent / the client
  --wire g2|g1|g0    the only spelling it speaks (g2 proxy/*, g1 _proxy/*,
                     g0 initialize+_meta.proxy and _proxy/successor/request|
                     notification); it answers the other initialize methods
                     with -32601 Method not found
  --pidfile FILE     append its pid (one line)
  --die-once FILE    on the first session/update from the agent, if FILE does
                     not exist: create it, print "dying on purpose" to
                     stderr and exit 3 (a crash mid-prompt)
  --stubborn 1       ignore SIGTERM and stay after stdin EOF (needs SIGKILL)
  --tag TEXT         prefix TEXT to every agent_message_chunk text
  --claim-version N  answer initialize with protocolVersion N whatever its
                     successor answered (a proxy that speaks only N)
"""
import json
import os
import sys

args = sys.argv[1:]
opt = {"name": "proxy", "log": None, "wire": "g2", "pidfile": None,
       "die_once": None, "tag": None, "stubborn": None,
       "claim_version": None}
i = 0
while i < len(args):
    k = args[i].lstrip("-").replace("-", "_")
    opt[k] = args[i + 1]
    i += 2

if opt["stubborn"]:
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

if opt["pidfile"]:
    with open(opt["pidfile"], "a") as f:
        f.write("%d\n" % os.getpid())

WIRE = opt["wire"]
INIT = {"g2": "proxy/initialize", "g1": "_proxy/initialize", "g0": "initialize"}[WIRE]
SUCC = {"g2": "proxy/successor", "g1": "_proxy/successor"}.get(WIRE)
ALL_SUCC = ("proxy/successor", "_proxy/successor", "_proxy/successor/request",
            "_proxy/successor/notification")
ALL_INIT = ("proxy/initialize", "_proxy/initialize")

out = sys.stdout.buffer
inp = sys.stdin.buffer


def log(ev):
    if opt["log"]:
        with open(opt["log"], "a") as f:
            f.write("%s %s\n" % (opt["name"], ev))


def send(msg):
    out.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
    out.flush()


next_id = [1000]
# our outgoing id -> (kind, original id)
#   kind "down": we wrapped a predecessor request toward the successor
#   kind "up": we forwarded a successor request to the predecessor
pending = {}
initialized = [False]


def new_id():
    next_id[0] += 1
    return next_id[0]


def to_successor(method, params, orig_id=None, is_req=False):
    """Send (method, params) to our successor, wrapped in our spelling."""
    if WIRE == "g0":
        outer = "_proxy/successor/request" if is_req else "_proxy/successor/notification"
    else:
        outer = SUCC
    p = {"method": method}
    if params is not None:
        p["params"] = params
    m = {"jsonrpc": "2.0", "method": outer, "params": p}
    if is_req:
        nid = new_id()
        pending[nid] = ("down", orig_id)
        m["id"] = nid
    send(m)


def tag_update(params):
    if opt["tag"] is None or not isinstance(params, dict):
        return params
    u = params.get("update")
    if isinstance(u, dict) and u.get("sessionUpdate") == "agent_message_chunk":
        c = u.get("content")
        if isinstance(c, dict) and c.get("type") == "text":
            c["text"] = opt["tag"] + c["text"]
    return params


def maybe_die(method):
    d = opt["die_once"]
    if d and method == "session/update" and not os.path.exists(d):
        open(d, "w").close()
        sys.stderr.write("dying on purpose\n")
        sys.stderr.flush()
        os._exit(3)


def handle(m):
    method = m.get("method")
    mid = m.get("id")
    if method is None:
        # a response
        ent = pending.pop(mid, None)
        if ent is None:
            return
        kind, orig = ent
        r = {"jsonrpc": "2.0", "id": orig}
        if "error" in m:
            r["error"] = m["error"]
        else:
            r["result"] = m.get("result")
        if kind == "init" and opt["claim_version"] is not None and \
                isinstance(r.get("result"), dict):
            r["result"]["protocolVersion"] = int(opt["claim_version"])
        if kind == "init":
            initialized[0] = True
            log("init")
        send(r)
        return
    params = m.get("params")
    is_init = method == INIT and (WIRE != "g0" or (
        isinstance(params, dict) and isinstance(params.get("_meta"), dict)
        and params["_meta"].get("proxy") is True))
    if method in ALL_INIT or (method == "initialize" and not is_init):
        if not is_init:
            if mid is not None:
                send({"jsonrpc": "2.0", "id": mid,
                      "error": {"code": -32601, "message": "Method not found"}})
            return
    if is_init:
        p = dict(params) if isinstance(params, dict) else {}
        if WIRE == "g0" and isinstance(p.get("_meta"), dict):
            meta = dict(p["_meta"])
            meta.pop("proxy", None)
            if meta:
                p["_meta"] = meta
            else:
                del p["_meta"]
        to_successor("initialize", p, mid, True)
        pending[next_id[0]] = ("init", mid)
        return
    if method in ALL_SUCC:
        # from our successor: forward to the predecessor
        inner = params.get("method")
        ip = params.get("params")
        maybe_die(inner)
        if inner == "session/update":
            ip = tag_update(ip)
        log("down %s" % inner)
        f = {"jsonrpc": "2.0", "method": inner}
        if ip is not None:
            f["params"] = ip
        if mid is not None:
            nid = new_id()
            pending[nid] = ("up", mid)
            f["id"] = nid
        send(f)
        return
    if method == "$/cancel_request":
        rid = params.get("requestId") if isinstance(params, dict) else None
        for k, (kind, orig) in list(pending.items()):
            if kind in ("down", "up") and orig == rid:
                send({"jsonrpc": "2.0", "method": "$/cancel_request",
                      "params": {"requestId": k}})
        return
    log("up %s" % method)
    to_successor(method, params, mid, mid is not None)


while True:
    line = inp.readline()
    if not line:
        break
    line = line.strip()
    if not line:
        continue
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if isinstance(m, list):
        for e in m:
            handle(e)
    else:
        handle(m)

if opt["stubborn"]:
    import time
    time.sleep(300)
