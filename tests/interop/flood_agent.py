#!/usr/bin/env python3
# flood_agent.py - a minimal ACP agent for run-remote-h2.sh's backpressure
# case: it answers initialize and session/new, then answers a prompt with
# session/update chunks of 64 KiB forever, written with blocking writes, so
# it blocks in write(2) on stdout as soon as nobody reads its pipe.
import json
import sys

out = sys.stdout.buffer


def send(msg):
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()


for line in sys.stdin.buffer:
    if not line.strip():
        continue
    m = json.loads(line)
    method = m.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"],
              "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "sess_flood"}})
    elif method == "session/prompt":
        chunk = {"sessionUpdate": "agent_message_chunk",
                 "content": {"type": "text", "text": "x" * 65536}}
        while True:
            send({"jsonrpc": "2.0", "method": "session/update",
                  "params": {"sessionId": "sess_flood", "update": chunk}})
