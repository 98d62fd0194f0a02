#!/usr/bin/env python3
# ws_slow_reader.py PORT SECONDS - a WebSocket client that opens an ACP
# connection to acp serve on 127.0.0.1:PORT, sends initialize,
# session/new and a prompt, then never reads again and holds the socket
# open for SECONDS. With flood_agent.py behind serve (64 KiB updates
# forever), run-remote-interop.sh checks that serve stops reading the
# agent instead of holding what it writes. Prints "sent" once the prompt
# is out, or "refused: ..." if the upgrade is not answered 101.
import base64
import json
import os
import socket
import sys
import time

port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
# A small receive buffer: the kernel takes little before TCP pushes back.
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
           % (port, key)).encode())
head = b""
while b"\r\n\r\n" not in head:
    chunk = s.recv(4096)
    if not chunk:
        break
    head += chunk
if not head.startswith(b"HTTP/1.1 101"):
    print("refused: %r" % head[:80], flush=True)
    sys.exit(1)


def send(obj):
    payload = json.dumps(obj).encode()
    mask = os.urandom(4)
    n = len(payload)
    hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                           bytes([0x80 | 126]) + n.to_bytes(2, "big"))
    s.sendall(hdr + mask +
              bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
      "params": {"protocolVersion": 1, "clientCapabilities": {}}})
send({"jsonrpc": "2.0", "id": 1, "method": "session/new",
      "params": {"cwd": "/tmp", "mcpServers": []}})
send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
      "params": {"sessionId": "sess_flood",
                 "prompt": [{"type": "text", "text": "flood"}]}})
print("sent", flush=True)
time.sleep(float(sys.argv[2]))
