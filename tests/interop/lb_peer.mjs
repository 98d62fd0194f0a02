#!/usr/bin/env node
// lb_peer.mjs - N concurrent Streamable HTTP clients (Node's fetch, each
// with its own cookie jar) against URL, for run-haproxy.sh. Each client:
//   1. POST initialize, open its SSE stream, session/new, one prompt turn
//      ("remember K");
//   2. drops the connection (aborts its SSE stream, no DELETE);
//   3. reconnects with its cookies (a new initialize, a new stream) and
//      session/load's its session: the replayed history must hold
//      "remember K" (so it is the same agent process), then DELETEs.
// Behind a proxy the server sees the drop only when it next writes to the
// stream (its SSE keepalive comment, every --ping-ms): a reconnect that
// lands before that gets a new agent (session/load fails), which is
// DELETEd and the reconnect tried again 100 ms later, at most 100 times. Prints one JSON line per client and a summary; exit 0
// when every client resumed its session.
//   node lb_peer.mjs URL N
const [url, nArg] = process.argv.slice(2);
const N = Number(nArg || 100);
setTimeout(() => { console.log(JSON.stringify({ error: 'timeout' })); process.exit(1); }, 240000).unref();

function jarOf() {
  const jar = new Map();
  return {
    jar,
    headers(extra = {}) {
      const h = { ...extra };
      if (jar.size) h.Cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      return h;
    },
    keep(res) {
      for (const c of res.headers.getSetCookie()) {
        const nv = c.split(';')[0];
        const k = nv.indexOf('=');
        if (k > 0) jar.set(nv.slice(0, k).trim(), nv.slice(k + 1).trim());
      }
    },
  };
}

async function connect(j) {
  const r = await fetch(url, { method: 'POST',
    headers: j.headers({ 'Content-Type': 'application/json' }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: 1, clientCapabilities: {} } }) });
  j.keep(r);
  const init = await r.json();
  const cid = r.headers.get('acp-connection-id');
  if (r.status !== 200 || !cid || init.id !== 1) throw new Error(`initialize: ${r.status}`);
  const ac = new AbortController();
  const sse = await fetch(url, { headers: j.headers({ Accept: 'text/event-stream',
    'Acp-Connection-Id': cid }), signal: ac.signal });
  j.keep(sse);
  if (sse.status !== 200) throw new Error(`SSE: ${sse.status}`);
  const reader = sse.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const seen = [];
  // The next message matching pred (messages before it are kept in seen).
  async function next(pred) {
    for (;;) {
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (!data) continue;
        const m = JSON.parse(data);
        if (pred(m)) return m;
        seen.push(m);
      }
      const { value, done } = await reader.read();
      if (done) throw new Error('SSE stream ended');
      buf += dec.decode(value, { stream: true });
    }
  }
  const post = async (msg, sid) => {
    const h = { 'Content-Type': 'application/json', 'Acp-Connection-Id': cid };
    if (sid) h['Acp-Session-Id'] = sid;
    const p = await fetch(url, { method: 'POST', headers: j.headers(h), body: JSON.stringify(msg) });
    j.keep(p);
    await p.arrayBuffer();
    if (p.status !== 202) throw new Error(`POST ${msg.method}: ${p.status}`);
  };
  const del = async () => {
    const d = await fetch(url, { method: 'DELETE', headers: j.headers({ 'Acp-Connection-Id': cid }) });
    await d.arrayBuffer();
    ac.abort();
  };
  return { cid, ac, next, post, del, seen };
}

// Which step a failed client was at goes into its error line.
async function client(k) {
  const where = { step: 'start' };
  try {
    return await clientSteps(k, where);
  } catch (e) {
    if (e && typeof e === 'object') e.step = where.step;
    throw e;
  }
}

async function clientSteps(k, where) {
  const j = jarOf();
  where.step = 'connect';
  const c1 = await connect(j);
  where.step = 'session/new';
  await c1.post({ jsonrpc: '2.0', id: 2, method: 'session/new',
    params: { cwd: process.cwd(), mcpServers: [] } });
  const sid = (await c1.next((m) => m.id === 2)).result.sessionId;
  where.step = 'session/prompt';
  await c1.post({ jsonrpc: '2.0', id: 3, method: 'session/prompt',
    params: { sessionId: sid, prompt: [{ type: 'text', text: `remember ${k}` }] } }, sid);
  const end = await c1.next((m) => m.id === 3);
  if (end.result?.stopReason !== 'end_turn') throw new Error('turn did not end');
  const backend = j.jar.get('SERVERID');
  c1.ac.abort(); // the connection drops: no DELETE
  for (let attempt = 1; attempt <= 100; attempt++) {
    where.step = `reconnect ${attempt}`;
    const c2 = await connect(j);
    if (j.jar.get('SERVERID') !== backend) throw new Error('moved to another backend');
    where.step = `session/load ${attempt}`;
    await c2.post({ jsonrpc: '2.0', id: 2, method: 'session/load',
      params: { sessionId: sid, cwd: process.cwd(), mcpServers: [] } }, sid);
    const r = await c2.next((m) => m.id === 2);
    const replayed = c2.seen.some((m) => m.method === 'session/update' &&
      JSON.stringify(m.params).includes(`remember ${k}`));
    where.step = `DELETE ${attempt}`;
    await c2.del();
    if (r.result && replayed) {
      return { k, backend, cid1: c1.cid, cid2: c2.cid, attempts: attempt };
    }
    // Landed before the server saw the drop: a fresh agent, try again.
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error('the session could not be resumed');
}

const results = await Promise.allSettled(Array.from({ length: N }, (_, k) => client(k)));
const backends = {};
let ok = 0;
let maxAttempts = 0;
for (const r of results) {
  if (r.status === 'fulfilled') {
    ok++;
    backends[r.value.backend] = (backends[r.value.backend] || 0) + 1;
    maxAttempts = Math.max(maxAttempts, r.value.attempts);
    console.log(JSON.stringify(r.value));
  } else {
    // fetch's own message is only "fetch failed": the reason is in its
    // cause (a socket error code, a timeout, the other side closing).
    const e = r.reason;
    const c = e?.cause;
    console.log(JSON.stringify({ error: String(e?.message || e),
      cause: c ? `${c.code || c.name || ''} ${c.message || c}`.trim() : undefined,
      at: e?.step }));
  }
}
console.log(JSON.stringify({ summary: true, ok, total: N, backends, maxAttempts }));
process.exit(ok === N ? 0 : 1);
