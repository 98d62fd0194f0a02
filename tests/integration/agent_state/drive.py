"""Drive `acp agent --state-dir DIR` across restarts (run-agent-state.sh).

Each check prints "ok - ..." or "FAIL - ..."; the exit status is the number
of failures (0 when all passed)."""
import json
import os
import re
import subprocess
import sys

ACP, DIR = sys.argv[1], sys.argv[2]
HISTORY = {"user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
           "tool_call", "tool_call_update", "plan"}
fails = 0


def check(cond, what):
    global fails
    print(("ok - " if cond else "FAIL - ") + what)
    if not cond:
        fails += 1


class Agent:
    def __init__(self, argv=None):
        env = dict(os.environ)
        env.pop("ACP_AGENT_SEQUENTIAL_IDS", None)  # real, random ids here
        self.p = subprocess.Popen(argv or [ACP, "agent", "--state-dir", DIR],
                                  env=env,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.next_id = 1

    def call(self, method, params):
        """Send a request; return (notifications before the answer, answer)."""
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()
        notes = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("FAIL - the agent closed stdout during "
                                 + method)
            m = json.loads(line)
            if m.get("id") == rid and "method" not in m:
                return notes, m
            notes.append(m)

    def kill(self):
        self.p.kill()
        self.p.wait()
        return self.p.stderr.read().decode()

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=30)
        err = self.p.stderr.read().decode()
        self.p.stdout.close()
        return rc, err


def updates(notes):
    return [n["params"]["update"] for n in notes
            if n.get("method") == "session/update"]


def init(a):
    _, r = a.call("initialize", {"protocolVersion": 1,
                                 "clientCapabilities": {}})
    check("result" in r, "initialize answered")


CWD = "/tmp/acp-state-test"
STDIO = [{"name": "echo", "command": "/bin/true", "args": [], "env": []}]

# MARK: first process: a turn with a plan and a tool call, then SIGKILL
a = Agent()
init(a)
_, r = a.call("session/new", {"cwd": CWD, "mcpServers": STDIO})
sid = r["result"]["sessionId"]
check(re.fullmatch(r"sess_[0-9a-f]{32}", sid) is not None,
      "session id is sess_ and 128 random bits: " + sid)
_, r = a.call("session/set_mode", {"sessionId": sid, "modeId": "ask"})
check("result" in r, "set_mode answered")
_, r = a.call("session/set_config_option",
              {"sessionId": sid, "configId": "model", "value": "smart"})
check("result" in r, "set_config_option answered")
notes, r = a.call("session/prompt", {"sessionId": sid, "prompt": [
    {"type": "text",
     "text": "hello\n/think pondering\n/plan Read; Write\n/tool Build\n"
             "/title Persisted\nbye"}]})
check(r.get("result", {}).get("stopReason") == "end_turn", "turn ended")
sent = [u for u in updates(notes) if u["sessionUpdate"] in HISTORY]
kinds = [u["sessionUpdate"] for u in sent]
check("plan" in kinds and "tool_call" in kinds and
      "tool_call_update" in kinds, "the turn sent a plan and a tool call")
tool_ids = {u["toolCallId"] for u in sent if "toolCallId" in u}
a.kill()
path = os.path.join(DIR, sid + ".json")
check(os.path.isfile(path), "state file written before the turn's answer")
check(not [f for f in os.listdir(DIR) if f.endswith(".tmp")],
      "no temporary file left")

# MARK: second process: list, load (replay), resume, a new turn
a = Agent()
init(a)
_, r = a.call("session/list", {})
listed = r["result"]["sessions"]
check([(s["sessionId"], s["cwd"], s.get("title")) for s in listed] ==
      [(sid, CWD, "Persisted")], "session/list after restart: " +
      json.dumps(listed))
notes, r = a.call("session/load", {"sessionId": sid, "cwd": CWD,
                                   "mcpServers": []})
res = r.get("result", {})
replayed = updates(notes)
check(all(n["params"]["sessionId"] == sid for n in notes),
      "replayed updates name the session")
want = [{"sessionUpdate": "user_message_chunk",
         "content": {"type": "text", "text":
                     "hello\n/think pondering\n/plan Read; Write\n"
                     "/tool Build\n/title Persisted\nbye"}}] + sent
check(replayed == want, "session/load replays the user message, chunks, "
      "thought, plan updates and tool call with its updates, in order (%d)"
      % len(replayed))
if replayed != want:
    for i, (x, y) in enumerate(zip(replayed, want)):
        if x != y:
            print("   first difference at %d:\n   got  %s\n   want %s"
                  % (i, json.dumps(x), json.dumps(y)))
            break
check(res.get("modes", {}).get("currentModeId") == "ask",
      "mode survives the restart")
model = [o for o in res.get("configOptions", []) if o["id"] == "model"]
check(model and model[0]["currentValue"] == "smart",
      "config value survives the restart")
_, r = a.call("session/resume", {"sessionId": sid, "cwd": CWD,
                                 "mcpServers": []})
check("result" in r, "session/resume after restart answered")
notes, r = a.call("session/prompt", {"sessionId": sid, "prompt": [
    {"type": "text", "text": "/mcp-tools\n/tool Again"}]})
ups = updates(notes)
new_ids = {u["toolCallId"] for u in ups if "toolCallId" in u}
check(new_ids and not (new_ids & tool_ids),
      "tool call ids after restart differ from the stored ones")
text = "".join(u["content"]["text"] for u in ups
               if u["sessionUpdate"] == "agent_message_chunk")
# /bin/true is no MCP server: what matters is that the agent still knows
# the one declared at session/new and tries it.
check(text.startswith("echo") and "no MCP servers" not in text,
      "stdio MCP server of session/new restored: " + json.dumps(text[:120]))
_, r = a.call("session/new", {"cwd": CWD, "mcpServers": []})
sid2 = r["result"]["sessionId"]
check(sid2 != sid, "a new process makes a different id")
rc, err = a.close()
check(rc == 0 and err == "", "second agent exits 0 with no stderr: " + err)

# MARK: third process: a partial file
with open(path, "rb") as f:
    whole = f.read()
broken = os.path.join(DIR, "sess_partial.json")
with open(broken, "wb") as f:
    f.write(whole[:len(whole) // 2])
a = Agent()
init(a)
_, r = a.call("session/load", {"sessionId": "sess_partial", "cwd": CWD,
                               "mcpServers": []})
e = r.get("error", {})
check(e.get("code") == -32603 and "sess_partial.json" in e.get("message", ""),
      "partial state file: -32603 naming the file: " + json.dumps(e))
_, r = a.call("session/prompt", {"sessionId": "sess_partial",
                                 "prompt": [{"type": "text", "text": "x"}]})
check(r.get("error", {}).get("code") == -32603,
      "partial state file: prompt answered -32603 too")
notes, r = a.call("session/load", {"sessionId": sid, "cwd": CWD,
                                   "mcpServers": []})
check("result" in r and len(updates(notes)) > len(want),
      "the other session still loads, with the later turn")
_, r = a.call("session/load", {"sessionId": "sess_nope", "cwd": CWD,
                               "mcpServers": []})
check(r.get("error", {}).get("code") == -32002, "unknown id still -32002")
_, r = a.call("session/list", {})
ids = sorted(s["sessionId"] for s in r["result"]["sessions"])
check(ids == sorted([sid, sid2]), "list leaves the partial one out")
_, r = a.call("session/delete", {"sessionId": "sess_partial"})
check("result" in r and not os.path.exists(broken),
      "delete removes the partial file")
_, r = a.call("session/delete", {"sessionId": sid2})
check("result" in r and not os.path.exists(os.path.join(DIR, sid2 + ".json")),
      "delete removes a session's file")
_, r = a.call("session/close", {"sessionId": sid})
check("result" in r and os.path.exists(path),
      "close keeps the session's file")
_, r = a.call("session/resume", {"sessionId": sid, "cwd": CWD,
                                 "mcpServers": []})
check("result" in r, "a closed session resumes")
# A session deleted in the same read as the prompt whose updates marked it
# for saving: it leaves the list of sessions to save with it.
_, r = a.call("session/new", {"cwd": CWD, "mcpServers": []})
sid3 = r["result"]["sessionId"]
both = [{"jsonrpc": "2.0", "id": 900, "method": "session/prompt",
         "params": {"sessionId": sid3,
                    "prompt": [{"type": "text", "text": "hello"}]}},
        {"jsonrpc": "2.0", "id": 901, "method": "session/delete",
         "params": {"sessionId": sid3}}]
a.p.stdin.write("".join(json.dumps(m) + "\n" for m in both).encode())
a.p.stdin.flush()
answers = {}
while len(answers) < 2:
    line = a.p.stdout.readline()
    if not line:
        break
    m = json.loads(line)
    if m.get("id") in (900, 901) and "method" not in m:
        answers[m["id"]] = m
check("result" in answers.get(901, {}) and
      not os.path.exists(os.path.join(DIR, sid3 + ".json")),
      "a session deleted while its updates wait to be saved stays deleted")
_, r = a.call("session/list", {})
check("result" in r and sid3 not in
      [s["sessionId"] for s in r["result"]["sessions"]],
      "and the agent goes on without it")
rc, err = a.close()
check(rc == 0 and "sess_partial" in err and "not valid JSON" in err,
      "the partial file is reported on stderr and the agent goes on: "
      + err.strip())

# MARK: fourth and fifth processes: the unstable session methods through
# `acp conductor`, persisted across a restart
UNSTABLE = [ACP, "conductor", "agent",
            "%s agent --unstable --state-dir %s" % (ACP, DIR)]
a = Agent(UNSTABLE)
_, r = a.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
caps = r["result"]["agentCapabilities"]["sessionCapabilities"]
check(all(k in caps for k in ("fork", "title", "archive", "status")),
      "--unstable capabilities reach the client through the conductor")
_, r = a.call("session/status", {"sessionId": sid})
check(r.get("result") == {"status": "saved"},
      "status of a stored session after a restart: saved")
_, r = a.call("session/set_title", {"sessionId": sid, "title": "Renamed"})
check("result" in r, "set_title through the conductor")
_, r = a.call("session/fork", {"sessionId": sid, "cwd": CWD,
                               "mcpServers": []})
fork = r.get("result", {}).get("sessionId", "")
check(fork not in ("", sid), "fork makes a new session: " + fork)
_, r = a.call("session/archive", {"sessionId": sid})
check("result" in r, "archive through the conductor")
_, r = a.call("auth/status", {})
check(r.get("result") == {"state": "not_required"}, "auth/status answered")
a.close()
a = Agent(UNSTABLE)
init(a)
_, r = a.call("session/list", {})
check([x["sessionId"] for x in r["result"]["sessions"]] == [fork],
      "after a restart the archived session stays out of the list")
_, r = a.call("session/list", {"archived": "only"})
got = [(x["sessionId"], x.get("title"), x.get("archived"))
       for x in r["result"]["sessions"]]
check(got == [(sid, "Renamed", True)],
      "archived flag and new title persisted: " + json.dumps(got))
notes, r = a.call("session/load", {"sessionId": fork, "cwd": CWD,
                                   "mcpServers": []})
check(updates(notes)[:len(want)] == want,
      "the fork replays the original's history")
rc, err = a.close()
check(rc == 0, "conductor exits 0")

# MARK: replay across versions: what one version recorded, the other replays
# in its own shape (v2: protocol/v2/session-setup.mdx, a unique messageId per
# replayed message; v1 gets only v1 kinds).
V2 = [ACP, "agent", "--state-dir", DIR, "--protocol-v2"]


def init_v2(a):
    _, r = a.call("initialize", {"protocolVersion": 2, "capabilities": {},
                                 "info": {"name": "t", "version": "1"}})
    check(r.get("result", {}).get("protocolVersion") == 2,
          "v2 initialize answered 2")


SCRIPT = ("hello\n/think pondering\n/plan Read; Write\n/tool Build\n"
          "/diff src/a.c\nbye")
a = Agent()
init(a)
_, r = a.call("session/new", {"cwd": CWD, "mcpServers": []})
v1sid = r["result"]["sessionId"]
notes, r = a.call("session/prompt", {"sessionId": v1sid, "prompt": [
    {"type": "text", "text": SCRIPT}]})
check(r.get("result", {}).get("stopReason") == "end_turn", "v1 turn ended")
a.close()
a = Agent(V2)
init_v2(a)
notes, r = a.call("session/resume", {"sessionId": v1sid, "cwd": CWD,
                                     "replayFrom": {"type": "start"}})
check("result" in r, "v2 resume of a session a v1 connection recorded")
got = updates(notes)
kinds = [u["sessionUpdate"] for u in got]
check("tool_call" not in kinds and "plan" not in kinds and
      "tool_call_update" in kinds,
      "no v1-only kinds in a v2 replay: " + json.dumps(kinds))
chunks = [u for u in got if u["sessionUpdate"].endswith("_chunk")]
check(chunks and all(u.get("messageId") for u in chunks),
      "every replayed chunk has a messageId")
ids = {}
for u in chunks:
    ids.setdefault(u["sessionUpdate"], set()).add(u["messageId"])
allids = [i for v in ids.values() for i in v]
check(len(allids) == len(set(allids)) and len(ids) == 3,
      "user, agent and thought messages have ids of their own: " +
      json.dumps({k: sorted(v) for k, v in ids.items()}))
plans = [u for u in got if u["sessionUpdate"] == "plan_update"]
check(plans and all(p["plan"]["type"] == "items" and p["plan"]["planId"]
                    for p in plans), "the v1 plan replays as plan_update items")
diffs = [c for u in got if u["sessionUpdate"] == "tool_call_update"
         for c in u.get("content") or [] if c.get("type") == "diff"]
check(len(diffs) == 1 and diffs[0].get("changes") ==
      [{"operation": "modify", "path": CWD + "/src/a.c", "fileType": "text"}]
      and "oldText" not in diffs[0],
      "the v1 diff replays as v2 changes: " + json.dumps(diffs))
check(got[-1] == {"sessionUpdate": "state_update", "state": "idle"},
      "the replay ends with the state snapshot")
# and a v2 session replayed to v1
_, r = a.call("session/new", {"cwd": CWD})
v2sid = r["result"]["sessionId"]
notes, r = a.call("session/prompt", {"sessionId": v2sid, "prompt": [
    {"type": "text", "text": SCRIPT}]})
check("result" in r, "v2 prompt accepted")
while not any(u.get("sessionUpdate") == "state_update" and
              u.get("state") == "idle" for u in updates(notes)):
    line = a.p.stdout.readline()
    if not line:
        break
    notes.append(json.loads(line))
a.close()
a = Agent()
init(a)
notes, r = a.call("session/load", {"sessionId": v2sid, "cwd": CWD,
                                   "mcpServers": []})
check("result" in r, "v1 load of a session a v2 connection recorded")
got = updates(notes)
kinds = [u["sessionUpdate"] for u in got]
check(set(kinds) <= HISTORY, "only v1 kinds in a v1 replay: " +
      json.dumps(kinds))
check(kinds[0] == "user_message_chunk" and
      got[0]["content"]["text"] == SCRIPT,
      "the v2 user message replays as a v1 user_message_chunk")
tools = [u for u in got if u["sessionUpdate"].startswith("tool_call")]
first = {}
for u in tools:
    first.setdefault(u["toolCallId"], u)
check(tools and all(u["sessionUpdate"] == "tool_call" and u.get("title")
                    for u in first.values()),
      "each tool call starts with a v1 tool_call with a title")
texts = [c["content"]["text"] for u in tools for c in u.get("content") or []
         if c.get("type") == "content"]
check(not [c for u in tools for c in u.get("content") or []
           if c.get("type") == "diff"] and
      "modify " + CWD + "/src/a.c" in texts,
      "the v2 diff replays as text to v1: " + json.dumps(texts))
check("plan" in kinds and "plan_update" not in kinds,
      "the v2 plan replays as a v1 plan")
rc, err = a.close()
check(rc == 0 and err == "", "agent exits 0, nothing on stderr: " + err)
sys.exit(min(fails, 100))
