#!/usr/bin/env node
// http_peer.mjs - raw Streamable HTTP peers (Node's fetch, not the ACP SDK)
// for the fault cases of run-remote-interop.sh against a server at URL
// (`acp serve`). Prints one JSON line; exit 0 when the expectation held.
//
//   vanish URL   initialize, open the SSE stream, session/new, prompt
//                "/wait"; at the first session/update drop the SSE stream
//                (its socket closes): the server must stop the agent
//   delete URL   the same, but at the first session/update DELETE the
//                connection: expect 202 (the server stops the agent)
//   unknown URL  POST, GET SSE and DELETE with an unknown Acp-Connection-Id:
//                expect 404 for each
//   big URL N    POST initialize with a body of N bytes: expect 413
const [mode, url, arg] = process.argv.slice(2);
const done = (ok, info) => {
  process.stdout.write(JSON.stringify({ ok, mode, ...info }) + '\n');
  process.exit(ok ? 0 : 1);
};
setTimeout(() => done(false, { error: 'timeout' }), 30000).unref();
const json = { 'Content-Type': 'application/json' };
const post = (headers, body) =>
  fetch(url, { method: 'POST', headers: { ...json, ...headers }, body: JSON.stringify(body) });

async function turn(onUpdate) {
  const r = await post({}, { jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: 1, clientCapabilities: {} } });
  const cid = r.headers.get('acp-connection-id');
  const init = await r.json();
  if (r.status !== 200 || !cid || init.id !== 1) done(false, { status: r.status, cid });
  const ac = new AbortController();
  const sse = await fetch(url, { headers: { Accept: 'text/event-stream', 'Acp-Connection-Id': cid },
    signal: ac.signal });
  if (sse.status !== 200) done(false, { sse: sse.status });
  const h = { 'Acp-Connection-Id': cid };
  let st = await post(h, { jsonrpc: '2.0', id: 2, method: 'session/new',
    params: { cwd: process.cwd(), mcpServers: [] } });
  if (st.status !== 202) done(false, { sessionNew: st.status });
  const reader = sse.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) done(false, { error: 'SSE stream ended' });
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
      if (!data) continue;
      const m = JSON.parse(data);
      if (m.id === 2) {
        const sessionId = m.result.sessionId;
        st = await post({ ...h, 'Acp-Session-Id': sessionId }, { jsonrpc: '2.0', id: 3,
          method: 'session/prompt', params: { sessionId, prompt: [{ type: 'text', text: 'busy\n/wait' }] } });
        if (st.status !== 202) done(false, { prompt: st.status });
      } else if (m.method === 'session/update') {
        return onUpdate({ cid, ac, reader });
      }
    }
  }
}

if (mode === 'vanish') {
  await turn(({ cid, ac }) => { ac.abort(); done(true, { cid }); });
} else if (mode === 'delete') {
  await turn(async ({ cid }) => {
    const r = await fetch(url, { method: 'DELETE', headers: { 'Acp-Connection-Id': cid } });
    done(r.status === 202, { cid, status: r.status });
  });
} else if (mode === 'unknown') {
  const h = { 'Acp-Connection-Id': '00000000-0000-4000-8000-000000000000' };
  const a = (await post(h, { jsonrpc: '2.0', method: 'session/cancel', params: {} })).status;
  const b = (await fetch(url, { headers: { ...h, Accept: 'text/event-stream' } })).status;
  const c = (await fetch(url, { method: 'DELETE', headers: h })).status;
  done(a === 404 && b === 404 && c === 404, { post: a, get: b, delete: c });
} else if (mode === 'big') {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { pad: 'x'.repeat(Number(arg)) } });
  let status;
  try { status = (await fetch(url, { method: 'POST', headers: json, body })).status; }
  catch (e) { done(false, { error: e.message }); }
  done(status === 413, { status });
} else {
  process.stderr.write('usage: node http_peer.mjs vanish|delete|unknown|big URL [ARG]\n');
  process.exit(2);
}
