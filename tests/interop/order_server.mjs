#!/usr/bin/env node
// order_server.mjs - a minimal Streamable HTTP server (node:http, not the
// SDK) for run-remote-order.sh: it checks that a client sends a session's
// messages only once that session's SSE stream is open, and it routes the
// way a real server does, so a client that does not wait loses its turn.
//   initialize          -> 200 with Acp-Connection-Id
//   GET (connection)    -> the connection stream
//   session/new         -> 202; the answer (sessionId "sess-1") on the
//                          connection stream
//   GET (Acp-Session-Id)-> that session's stream (the server registers it)
//   session/prompt      -> 202; if its session's stream is open, a
//                          session/update ("in order") and the answer on
//                          it; if not (the race: the client POSTed before
//                          its stream was registered), the answer at once
//                          on the connection stream and the update on the
//                          session stream once it opens, i.e. after the
//                          answer, as it can happen behind a proxy.
// Prints "listening PORT", then one line per session POST: "early METHOD"
// or "ordered METHOD". With --refuse-sessions every session stream is
// answered 404 (as the RFD has it for an unknown session): the client
// must say so and fail, not print an empty turn.
//   node order_server.mjs [--refuse-sessions]
import http from 'node:http';

const conns = new Map();
const refuse = process.argv.includes('--refuse-sessions');
const sse = (res) => {
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  res.flushHeaders();
};
const send = (res, msg) => res.write(`data: ${JSON.stringify(msg)}\n\n`);
// The connection stream may open after the first POSTs: kept until then.
const toConn = (c, msg) => (c.stream ? send(c.stream, msg) : c.pend.push(msg));

const server = http.createServer((req, res) => {
  const cid = req.headers['acp-connection-id'];
  const sid = req.headers['acp-session-id'];
  const c = cid ? conns.get(cid) : undefined;
  if (req.method === 'GET') {
    if (!c) { res.writeHead(404).end('unknown Acp-Connection-Id\n'); return; }
    if (sid && refuse) { res.writeHead(404).end('unknown Acp-Session-Id\n'); return; }
    sse(res);
    if (!sid) {
      c.stream = res;
      for (const m of c.pend.splice(0)) send(res, m);
      return;
    }
    c.sessions.set(sid, res);
    for (const m of c.later.get(sid) || []) send(res, m);
    c.later.delete(sid);
    return;
  }
  if (req.method === 'DELETE') {
    res.writeHead(202).end();
    if (c) {
      conns.delete(cid);
      c.stream?.end();
      for (const s of c.sessions.values()) s.end();
    }
    return;
  }
  let body = '';
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    const msg = JSON.parse(body);
    if (!cid) {
      const id = `conn-${conns.size + 1}`;
      conns.set(id, { stream: null, pend: [], sessions: new Map(), later: new Map() });
      res.writeHead(200, { 'Content-Type': 'application/json', 'Acp-Connection-Id': id });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id,
        result: { protocolVersion: 1, agentCapabilities: {}, authMethods: [] } }));
      return;
    }
    if (!c) { res.writeHead(404).end('unknown Acp-Connection-Id\n'); return; }
    res.writeHead(202).end();
    if (msg.method === 'session/new') {
      toConn(c, { jsonrpc: '2.0', id: msg.id, result: { sessionId: 'sess-1' } });
      return;
    }
    if (!msg.method || msg.id === undefined) return;
    const s = msg.params?.sessionId;
    const open = s && sid === s && c.sessions.has(s);
    if (s) console.log(`${open ? 'ordered' : 'early'} ${msg.method}`);
    const update = { jsonrpc: '2.0', method: 'session/update', params: { sessionId: s,
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'in order' } } } };
    const answer = { jsonrpc: '2.0', id: msg.id,
      result: msg.method === 'session/prompt' ? { stopReason: 'end_turn' } : {} };
    if (open) {
      if (msg.method === 'session/prompt') send(c.sessions.get(s), update);
      send(c.sessions.get(s), answer);
      return;
    }
    toConn(c, answer);
    if (msg.method === 'session/prompt' && s) {
      if (!c.later.has(s)) c.later.set(s, []);
      c.later.get(s).push(update);
    }
  });
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
