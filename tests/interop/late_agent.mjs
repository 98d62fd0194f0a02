#!/usr/bin/env node
// late_agent.mjs - a tiny stdio ACP agent for run-remote-handoff.sh that
// answers session/cancel late: the cancelled turn's last update ("late
// output of a cancelled turn") and its end (v1: the prompt's answer with
// stopReason cancelled; v2: state_update idle, the prompt was accepted at
// once) are written only
//   next    (default) when the next request comes in, i.e. once a client
//           is back on the connection (event-driven: no timer), or
//   signal  on SIGUSR1 (the test sends it once serve says it holds the
//           client's request; the request is then not seen until after).
//           Meanwhile it serves requests as they come (a concurrent agent):
//           session/load replays, and a prompt on the session of a turn
//           cancelled but not ended yet starts a new turn.
// BYTES (optional second argument): the late update's text is padded to
// at least BYTES bytes (a late update longer than serve's 64 KiB hold).
// A prompt on a session whose turn runs is refused (-32000 "a turn is
// running"), one on a session it does not know too ("Session not found").
// Prompt text: "/wait" anywhere waits for session/cancel; otherwise the
// text is echoed and the turn ends end_turn. session/load (v1) replays the
// prompts' texts. Sessions are sess_1, sess_2... per process.
import readline from 'node:readline';

const mode = process.argv[2] || 'next';
const lateText = 'late output of a cancelled turn';
const pad = Math.max(0, Number(process.argv[3] || 0) - lateText.length);
const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const update = (sessionId, u) =>
  out({ jsonrpc: '2.0', method: 'session/update', params: { sessionId, update: u } });
const chunk = (sessionId, text) =>
  update(sessionId, { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } });
const sessions = new Map(); // id -> { history: [text], turn: {id} | null }
let v2 = false;
let nsess = 0;
let late = []; // cancelled turns whose end is not written yet

function endTurn(sessionId, s, id, stopReason) {
  s.turn = null;
  if (v2)
    update(sessionId, { sessionUpdate: 'state_update', state: 'idle', stopReason });
  else out({ jsonrpc: '2.0', id, result: { stopReason } });
}

function writeLate() {
  for (const { sessionId, s, id } of late) {
    chunk(sessionId, lateText + ' '.repeat(pad));
    endTurn(sessionId, s, id, 'cancelled');
  }
  late = [];
}
if (mode === 'signal') process.on('SIGUSR1', writeLate);

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.method && m.id !== undefined && mode === 'next') writeLate();
  const p = m.params || {};
  const s = sessions.get(p.sessionId);
  switch (m.method) {
    case 'initialize':
      v2 = p.protocolVersion >= 2;
      out({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: v2 ? 2 : 1,
        agentCapabilities: { loadSession: true }, authMethods: [] } });
      break;
    case 'session/new': {
      const sessionId = `sess_${++nsess}`;
      sessions.set(sessionId, { history: [], turn: null });
      out({ jsonrpc: '2.0', id: m.id, result: { sessionId } });
      break;
    }
    case 'session/load':
      if (!s) { out({ jsonrpc: '2.0', id: m.id, error: { code: -32002, message: 'Session not found' } }); break; }
      for (const text of s.history)
        update(p.sessionId, { sessionUpdate: 'user_message_chunk', content: { type: 'text', text } });
      out({ jsonrpc: '2.0', id: m.id, result: {} });
      break;
    case 'session/prompt': {
      if (!s) { out({ jsonrpc: '2.0', id: m.id, error: { code: -32002, message: 'Session not found' } }); break; }
      if (s.turn && !late.some((l) => l.s === s)) { out({ jsonrpc: '2.0', id: m.id, error: { code: -32000, message: 'a turn is running' } }); break; }
      const text = (p.prompt || []).map((c) => c.text || '').join('');
      s.history.push(text);
      s.turn = { id: m.id };
      if (v2) out({ jsonrpc: '2.0', id: m.id, result: {} });
      if (text.includes('/wait')) { chunk(p.sessionId, 'working'); break; }
      chunk(p.sessionId, text);
      endTurn(p.sessionId, s, m.id, 'end_turn');
      break;
    }
    case 'session/cancel':
      if (s && s.turn && !late.some((l) => l.s === s))
        late.push({ sessionId: p.sessionId, s, id: s.turn.id });
      break;
    default:
      if (m.method && m.id !== undefined)
        out({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
  }
});
