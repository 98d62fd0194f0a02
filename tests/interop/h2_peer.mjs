#!/usr/bin/env node
// h2_peer.mjs - Streamable HTTP over cleartext HTTP/2 (h2c, prior
// knowledge) with Node's built-in node:http2 client, against `acp serve`
// at URL (http://127.0.0.1:PORT/acp; https:// for HTTP/2 over TLS). Prints one JSON line; exit 0 when
// the expectation held. Used by run-remote-h2.sh.
//
//   full URL FILE    initialize, GET the SSE stream, session/new, a prompt
//                    that asks permission and reads FILE: the permission
//                    request and fs/read_text_file are answered by POST;
//                    end_turn with the file's first line in a chunk
//   echo URL         a prompt echoed back in exactly one chunk
//   cancel URL       prompt "/wait", session/cancel at the first update:
//                    stopReason cancelled
//   multi URL        two ACP connections on one HTTP/2 session, turns
//                    interleaved; the second one's POSTs go over another
//                    HTTP/2 session (one ACP connection, two sockets)
//   big URL N        a 64 KiB..N echo: the whole payload comes back
//   rst URL          a turn on "/wait"; at the first update the SSE stream
//                    is reset (RST_STREAM CANCEL): prints the connection id
//   slow URL N      prompt "/big N" and stop reading the SSE stream after
//                    the first update (no WINDOW_UPDATE is granted): prints
//                    the connection id and stays until killed
//   stall URL N     as slow, against a server with a short --stall-timeout:
//                    expect the server to reset the paused stream
//                    (RST_STREAM CANCEL), then a new initialize on the same
//                    HTTP/2 session to be answered 200; prints the
//                    connection id first
//   status URL WANT [TOKEN] [ORIGIN]
//                    initialize with that bearer token and Origin: expect
//                    status WANT (401, 403, 200)
//   unknown URL      POST, GET SSE and DELETE with an unknown
//                    Acp-Connection-Id: 404 each
//   toobig URL N     POST initialize of N bytes: 413, and the session
//                    still serves a request after it
//   nojson URL       POST text/plain: 415
//   garbage URL      the preface, then bytes that are no frame: the server
//                    answers GOAWAY (or closes) and nothing hangs
//   idle URL         an HTTP/2 connection that opens no stream: the
//                    server sends GOAWAY and closes it
//   sessions URL     (acp agent) two sessions, a session-scoped SSE stream
//                    open for the first only, a prompt to each, all on one
//                    HTTP/2 connection: the first's updates and prompt
//                    answer arrive on its session stream, the second's on
//                    the connection stream, nothing crosses
//   hold URL DIR     (an agent that answers initialize, then reads nothing
//                    until DIR/go exists, then copies its stdin to DIR/got)
//                    48 concurrent 256 KiB POSTs as streams of one HTTP/2
//                    connection: some are answered 503 (the cap of held
//                    POSTs), the held ones 202 once DIR/go lets the agent
//                    read, and the agent gets every 202'd body whole
//   gone URL         (an agent that answers initialize, then reads nothing)
//                    56 concurrent 256 KiB POSTs on one HTTP/2
//                    connection; once one is refused 503 (the held ones
//                    are at the cap), DELETE: the held ones are answered 410
//   expire URL [h1]  (the same agent; acp serve --hold-timeout short) 56
//                    concurrent 256 KiB POSTs, no DELETE: the held ones
//                    are answered 503 "did not read in time" once their
//                    hold timeout is up (the peer waits for the answers,
//                    it measures nothing); with h1 the same over HTTP/1.1
//                    (node:http, 8 kept-alive sockets)
//   bench URL SIZE TURNS [h1]
//                    TURNS echo turns of SIZE bytes (agent `acp agent
//                    --echo`): prints turns/s; with h1 the same client
//                    code over HTTP/1.1 (node:http, keep-alive) instead
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import fs from 'node:fs';

const [mode, url, arg, arg2, arg3] = process.argv.slice(2);
const done = (ok, info) => {
  process.stdout.write(JSON.stringify({ ok, mode, ...info }) + '\n');
  process.exit(ok ? 0 : 1);
};
if (mode !== 'slow') setTimeout(() => done(false, { error: 'timeout' }), 60000).unref();
const u = new URL(url || 'http://127.0.0.1:1/acp');

// Windows of 1 MiB (stream) and 4 MiB (connection), as for the server's
// side: node's default 64 KiB costs a round trip in every 64 KiB message.
// An https:// URL is HTTP/2 over TLS (ALPN h2; the CA from
// NODE_EXTRA_CA_CERTS), an http:// one cleartext h2c with prior knowledge.
const connect = () => new Promise((resolve, reject) => {
  const settings = { initialWindowSize: 1 << 20 };
  const s = u.protocol === 'https:' ? http2.connect(u.origin, { settings })
    : http2.connect(u.origin, { settings, createConnection: () => {
      const c = net.connect(Number(u.port), u.hostname);
      c.setNoDelay(true); // node:http does the same for HTTP/1.1
      return c;
    } });
  if (u.protocol === 'https:') {
    s.once('connect', () => {
      if (s.alpnProtocol !== 'h2') reject(new Error(`ALPN agreed on ${s.alpnProtocol}`));
    });
  }
  s.once('connect', () => { s.setLocalWindowSize(4 << 20); resolve(s); });
  s.once('error', reject);
});

// HTTP/1.1 stand-in for an HTTP/2 session (bench h1): a keep-alive agent.
const h1session = () => ({ h1: new http.Agent({ keepAlive: true, maxSockets: 8 }) });

function h1request(sess, method, headers, body) {
  const h = { ...headers };
  delete h[':path'];
  return http.request({ host: u.hostname, port: u.port, path: headers[':path'] || u.pathname,
    method, headers: h, agent: sess.h1 });
}

// One request: resolves {status, headers, body}.
function request(sess, method, headers, body) {
  if (sess.h1) {
    return new Promise((resolve, reject) => {
      const req = h1request(sess, method, headers, body);
      req.on('response', (res) => {
        const parts = [];
        res.on('data', (d) => parts.push(d));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
          body: Buffer.concat(parts).toString() }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  return new Promise((resolve, reject) => {
    const req = sess.request({ ':method': method, ':path': u.pathname, ...headers },
      { endStream: body === undefined });
    let status = 0;
    let hdrs = {};
    const parts = [];
    req.on('response', (h) => { status = h[':status']; hdrs = h; });
    req.on('data', (d) => parts.push(d));
    req.on('end', () => resolve({ status, headers: hdrs, body: Buffer.concat(parts).toString() }));
    req.on('error', reject);
    if (body !== undefined) req.end(body);
  });
}

const json = { 'content-type': 'application/json' };
const post = (sess, headers, msg) => request(sess, 'POST', { ...json, ...headers }, JSON.stringify(msg));

async function initialize(sess, extra = {}) {
  const r = await post(sess, extra, { jsonrpc: '2.0', id: 0, method: 'initialize',
    params: { protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: false }, terminal: false } } });
  return r;
}

// The connection's SSE stream: calls onMsg(message) for each event.
function openSse(sess, cid, onMsg, extra = {}) {
  return new Promise((resolve, reject) => {
    let buf = '';
    const hdrs = { accept: 'text/event-stream', 'acp-connection-id': cid, ...extra };
    let st;
    if (sess.h1) {
      const req = h1request({ h1: false }, 'GET', hdrs);
      req.on('response', (res) => {
        res.setEncoding('utf8');
        res.on('data', (d) => st(d));
        resolve({ stream: res, status: res.statusCode });
      });
      req.on('error', reject);
      req.end();
      st = (d) => feed(d);
    } else {
      st = sess.request({ ':method': 'GET', ':path': u.pathname, ...hdrs }, { endStream: true });
      st.setEncoding('utf8');
      st.on('response', (h) => resolve({ stream: st, status: h[':status'] }));
      st.on('data', (d) => feed(d));
      st.on('error', (e) => reject(e));
    }
    function feed(d) {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (data) onMsg(JSON.parse(data));
      }
    }
  });
}

// An ACP connection over HTTP/2: `sess` carries initialize and the SSE
// stream, `postSess` (default sess) the other POSTs.
async function acpConnection(sess, postSess = sess) {
  const r = await initialize(sess);
  const cid = r.headers['acp-connection-id'];
  const init = JSON.parse(r.body || '{}');
  if (r.status !== 200 || !cid || init.id !== 0) done(false, { status: r.status, cid, body: r.body });
  const waiting = new Map();
  const conn = { cid, updates: [], permissions: 0, reads: [], onRequest: null, onUpdate: null };
  let nextId = 1;
  const sse = await openSse(sess, cid, async (m) => {
    if (m.id !== undefined && !m.method && waiting.has(m.id)) {
      const w = waiting.get(m.id);
      waiting.delete(m.id);
      if (m.error) w.reject(new Error(JSON.stringify(m.error))); else w.resolve(m.result);
    } else if (m.method === 'session/update') {
      conn.updates.push(m.params.update);
      if (conn.onUpdate) conn.onUpdate(m.params.update);
    } else if (m.method && m.id !== undefined) {
      const result = await conn.onRequest(m);
      const a = await post(postSess, { 'acp-connection-id': cid }, { jsonrpc: '2.0', id: m.id, result });
      if (a.status !== 202) done(false, { answer: a.status });
    }
  });
  if (sse.status !== 200) done(false, { sse: sse.status });
  conn.sse = sse.stream;
  conn.call = async (method, params, headers = {}) => {
    const id = nextId++;
    const p = new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
    const a = await post(postSess, { 'acp-connection-id': cid, ...headers }, { jsonrpc: '2.0', id, method, params });
    if (a.status !== 202) done(false, { method, status: a.status, body: a.body });
    return p;
  };
  conn.notify = async (method, params) => {
    // A session's notification names its session (400 without, the RFD).
    const sh = params && params.sessionId ? { 'acp-session-id': params.sessionId } : {};
    const a = await post(postSess, { 'acp-connection-id': cid, ...sh }, { jsonrpc: '2.0', method, params });
    if (a.status !== 202) done(false, { method, status: a.status });
  };
  conn.onRequest = async (m) => {
    if (m.method === 'session/request_permission') {
      conn.permissions++;
      const opt = m.params.options.find((o) => o.kind === 'allow_once') || m.params.options[0];
      return { outcome: { outcome: 'selected', optionId: opt.optionId } };
    }
    if (m.method === 'fs/read_text_file') {
      conn.reads.push(m.params.path);
      return { content: fs.readFileSync(m.params.path, 'utf8') };
    }
    return {};
  };
  const s = await conn.call('session/new', { cwd: process.cwd(), mcpServers: [] });
  conn.sessionId = s.sessionId;
  conn.prompt = (text) => conn.call('session/prompt',
    { sessionId: conn.sessionId, prompt: [{ type: 'text', text }] },
    { 'acp-session-id': conn.sessionId });
  conn.del = () => request(postSess, 'DELETE', { 'acp-connection-id': cid });
  return conn;
}

const chunks = (c) => c.updates.filter((x) => x.sessionUpdate === 'agent_message_chunk')
  .map((x) => (x.content && x.content.text) || '');

async function echo(conn, text) {
  conn.updates.length = 0;
  const r = await conn.prompt(text);
  const got = chunks(conn).join('');
  return { stop: r.stopReason, ok: r.stopReason === 'end_turn' && got === text, len: got.length };
}

if (mode === 'full') {
  const sess = await connect();
  const c = await acpConnection(sess);
  const r = await c.prompt(`/ask:read Read ${arg}\n/read ${arg}`);
  const first = fs.readFileSync(arg, 'utf8').split('\n')[0];
  const ok = r.stopReason === 'end_turn' && c.permissions === 1 && c.reads.length === 1 &&
    c.reads[0] === arg && chunks(c).some((t) => t.includes(first));
  const d = await c.del();
  done(ok && d.status === 202, { cid: c.cid, stop: r.stopReason, permissions: c.permissions,
    reads: c.reads, delete: d.status });
} else if (mode === 'echo') {
  const sess = await connect();
  const c = await acpConnection(sess);
  const e = await echo(c, 'hello over h2c');
  const d = await c.del();
  done(e.ok && d.status === 202, { cid: c.cid, ...e });
} else if (mode === 'cancel') {
  const sess = await connect();
  const c = await acpConnection(sess);
  let sent = false;
  c.onUpdate = () => {
    if (sent) return;
    sent = true;
    c.notify('session/cancel', { sessionId: c.sessionId });
  };
  const r = await c.prompt('/wait');
  await c.del();
  done(r.stopReason === 'cancelled' && sent, { cid: c.cid, stop: r.stopReason });
} else if (mode === 'multi') {
  const sess = await connect();
  const other = await connect();
  const a = await acpConnection(sess);
  const b = await acpConnection(sess, other);
  // a's turns one after another (an echo collects its connection's
  // updates: two at once on one connection would see each other's text when
  // the server sends both turns' lines in one DATA frame), b's beside them.
  const [ra, rb] = await Promise.all([
    (async () => [await echo(a, 'first connection'), await echo(a, 'first again'),
      await echo(a, 'first, third turn')])(),
    echo(b, 'second connection')]);
  const res = [...ra, rb];
  const ok = a.cid !== b.cid && res.every((x) => x.ok);
  await a.del();
  await b.del();
  done(ok, { a: a.cid, b: b.cid, res });
} else if (mode === 'big') {
  const sess = await connect();
  const c = await acpConnection(sess);
  const out = [];
  for (const n of [65536, Number(arg || 65536)]) {
    const text = 'x'.repeat(n);
    out.push(await echo(c, text));
  }
  await c.del();
  done(out.every((x) => x.ok), { out: out.map((x) => x.len) });
} else if (mode === 'rst') {
  const sess = await connect();
  const c = await acpConnection(sess);
  c.onUpdate = () => {
    c.sse.close(http2.constants.NGHTTP2_CANCEL);
    setTimeout(() => done(true, { cid: c.cid }), 100);
  };
  c.prompt('busy\n/wait').catch(() => {});
} else if (mode === 'idle') {
  const sess = await connect();
  let goaway = false;
  sess.on('goaway', () => { goaway = true; });
  sess.on('error', () => {});
  sess.on('close', () => done(goaway, { goaway }));
} else if (mode === 'bench') {
  const size = Number(arg || 5);
  const turns = Number(arg2 || 200);
  const sess = arg3 === 'h1' ? h1session() : await connect();
  const c = await acpConnection(sess);
  const text = 'x'.repeat(size);
  for (let i = 0; i < 10; i++) await echo(c, text); // warm-up
  const t0 = process.hrtime.bigint();
  let good = 0;
  for (let i = 0; i < turns; i++) if ((await echo(c, text)).ok) good++;
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  await c.del();
  done(good === turns, { proto: arg3 === 'h1' ? 'http/1.1' : 'h2c', size, turns,
    turnsPerSec: Math.round(turns / s), MiBps: +((size * turns) / s / 1048576).toFixed(1) });
} else if (mode === 'slow') {
  const sess = await connect();
  const c = await acpConnection(sess);
  let paused = false;
  c.onUpdate = () => {
    if (paused) return;
    paused = true;
    c.sse.pause();
    process.stdout.write(JSON.stringify({ ok: true, mode, cid: c.cid }) + '\n');
  };
  c.prompt(`/big ${arg}`).catch(() => {});
  setInterval(() => {}, 1000);
} else if (mode === 'stall') {
  const sess = await connect();
  const c = await acpConnection(sess);
  let paused = false;
  const closed = new Promise((resolve) => {
    c.sse.on('error', () => {}); // the reset: its code is looked at below
    c.sse.on('close', () => resolve(c.sse.rstCode));
  });
  c.onUpdate = () => {
    if (paused) return;
    paused = true;
    c.sse.pause(); // no WINDOW_UPDATE for it from now on
    process.stdout.write(JSON.stringify({ cid: c.cid }) + '\n');
  };
  c.prompt(`/big ${arg}`).catch(() => {});
  const code = await closed;
  // The HTTP/2 session goes on: a new ACP connection on it.
  const r = await initialize(sess);
  const cid2 = r.headers['acp-connection-id'];
  if (r.status === 200 && cid2) await request(sess, 'DELETE', { 'acp-connection-id': cid2 });
  done(code === http2.constants.NGHTTP2_CANCEL && r.status === 200,
    { cid: c.cid, rstCode: code, status: r.status });
} else if (mode === 'status') {
  const sess = await connect();
  const h = {};
  if (arg2) h.authorization = `Bearer ${arg2}`;
  if (arg3) h.origin = arg3;
  const r = await initialize(sess, h);
  if (r.status === 200) await request(sess, 'DELETE', { 'acp-connection-id': r.headers['acp-connection-id'] });
  done(String(r.status) === arg, { status: r.status, www: r.headers['www-authenticate'] });
} else if (mode === 'unknown') {
  const sess = await connect();
  const h = { 'acp-connection-id': '00000000-0000-4000-8000-000000000000' };
  const a = (await post(sess, h, { jsonrpc: '2.0', method: 'session/cancel', params: {} })).status;
  const b = (await request(sess, 'GET', { ...h, accept: 'text/event-stream' })).status;
  const c = (await request(sess, 'DELETE', h)).status;
  const p = (await request(sess, 'GET', { ':path': '/other', accept: 'text/event-stream' })).status;
  done(a === 404 && b === 404 && c === 404 && p === 404, { post: a, get: b, delete: c, path: p });
} else if (mode === 'toobig') {
  const sess = await connect();
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { pad: 'x'.repeat(Number(arg)) } });
  let status;
  try { status = (await request(sess, 'POST', json, body)).status; } catch (e) { status = String(e.code || e.message); }
  // The session is still usable: an ordinary request on it.
  const after = await initialize(sess);
  if (after.status === 200) await request(sess, 'DELETE', { 'acp-connection-id': after.headers['acp-connection-id'] });
  done(status === 413 && after.status === 200, { status, after: after.status });
} else if (mode === 'nojson') {
  const sess = await connect();
  const r = await request(sess, 'POST', { 'content-type': 'text/plain' }, '{}');
  done(r.status === 415, { status: r.status });
} else if (mode === 'garbage') {
  const s = net.connect(Number(u.port), u.hostname, () => {
    s.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    // A frame header claiming a 16 MiB SETTINGS frame on stream 3.
    s.write(Buffer.from([0xff, 0xff, 0xff, 0x04, 0x00, 0x00, 0x00, 0x00, 0x03, 1, 2, 3, 4, 5, 6]));
  });
  let data = Buffer.alloc(0);
  s.on('data', (d) => { data = Buffer.concat([data, d]); });
  s.on('error', () => {});
  s.on('close', () => {
    // Walk the frames: is there a GOAWAY (type 7)?
    let off = 0;
    let goaway = false;
    while (off + 9 <= data.length) {
      const len = data.readUIntBE(off, 3);
      if (data[off + 3] === 7) goaway = true;
      off += 9 + len;
    }
    done(goaway, { bytes: data.length, goaway });
  });
} else if (mode === 'sessions') {
  const sess = await connect();
  const r = await initialize(sess);
  const cid = r.headers['acp-connection-id'];
  if (r.status !== 200 || !cid) done(false, { status: r.status, cid });
  const h = { 'acp-connection-id': cid };
  const conn = [];
  const sa = [];
  const waiters = [];
  const got = (list, m) => {
    list.push(m);
    for (const w of waiters.splice(0)) w();
  };
  const until = async (pred) => { while (!pred()) await new Promise((res) => waiters.push(res)); };
  const cs = await openSse(sess, cid, (m) => got(conn, m));
  if (cs.status !== 200) done(false, { sse: cs.status });
  for (const id of [2, 3]) {
    const st = await post(sess, h, { jsonrpc: '2.0', id, method: 'session/new', params: { cwd: process.cwd(), mcpServers: [] } });
    if (st.status !== 202) done(false, { sessionNew: st.status });
  }
  await until(() => conn.some((m) => m.id === 2) && conn.some((m) => m.id === 3));
  const a = conn.find((m) => m.id === 2).result.sessionId;
  const b = conn.find((m) => m.id === 3).result.sessionId;
  const ss = await openSse(sess, cid, (m) => got(sa, m), { 'acp-session-id': a });
  if (ss.status !== 200) done(false, { sessionStream: ss.status });
  const before = conn.length;
  for (const [id, sid] of [[4, a], [5, b]]) {
    const st = await post(sess, { ...h, 'acp-session-id': sid }, { jsonrpc: '2.0', id, method: 'session/prompt',
      params: { sessionId: sid, prompt: [{ type: 'text', text: `hello ${sid}` }] } });
    if (st.status !== 202) done(false, { prompt: st.status });
  }
  await until(() => sa.some((m) => m.id === 4) && conn.some((m) => m.id === 5));
  const later = conn.slice(before);
  const sidOf = (m) => m.params && m.params.sessionId;
  const ok = sa.length >= 2 && sa.every((m) => m.id === 4 || sidOf(m) === a) &&
    sa.some((m) => m.method === 'session/update') &&
    later.some((m) => m.method === 'session/update' && sidOf(m) === b) &&
    !later.some((m) => m.id === 4 || sidOf(m) === a) &&
    sa.findIndex((m) => m.id === 4) === sa.length - 1;
  await request(sess, 'DELETE', h);
  done(ok, { onSession: sa.map((m) => m.method || `answer ${m.id}`),
    onConnection: later.map((m) => m.method || `answer ${m.id}`) });
} else if (mode === 'hold') {
  const sess = await connect();
  const r = await initialize(sess);
  const cid = r.headers['acp-connection-id'];
  if (r.status !== 200 || !cid) done(false, { status: r.status, cid });
  const h = { 'acp-connection-id': cid };
  const cs = await openSse(sess, cid, () => {});
  if (cs.status !== 200) done(false, { sse: cs.status });
  const pad = 'p'.repeat(256 * 1024);
  let first503;
  const saw503 = new Promise((res) => { first503 = res; });
  const posts = Array.from({ length: 48 }, (_, i) => {
    const body = JSON.stringify({ jsonrpc: '2.0', method: '_test/fill', params: { i, pad } });
    return request(sess, 'POST', { ...json, ...h }, body).then((x) => {
      if (x.status === 503) first503(x.body);
      return { status: x.status, text: x.body, len: Buffer.byteLength(body) };
    }, (e) => ({ status: 0, text: e.message, len: 0 }));
  });
  const text503 = await Promise.race([saw503, Promise.all(posts).then(() => null)]);
  fs.writeFileSync(`${arg}/go`, '');
  const res = await Promise.all(posts);
  const n202 = res.filter((x) => x.status === 202).length;
  const n503 = res.filter((x) => x.status === 503).length;
  const want = res.filter((x) => x.status === 202).reduce((s, x) => s + x.len + 1, 0);
  await request(sess, 'DELETE', h);
  let size = -1;
  for (let k = 0; k < 400; k++) {
    size = fs.existsSync(`${arg}/got`) ? fs.statSync(`${arg}/got`).size : -1;
    if (size === want) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  done(n503 >= 1 && n202 >= 32 && n202 + n503 === 48 && size === want &&
    /too many messages wait/.test(text503 || ''), { n202, n503, agentGot: size, want, text503,
    other: res.filter((x) => x.status !== 202 && x.status !== 503) });
} else if (mode === 'gone' || mode === 'expire') {
  const sess = mode === 'expire' && arg === 'h1' ? h1session() : await connect();
  const r = await initialize(sess);
  const cid = r.headers['acp-connection-id'];
  if (r.status !== 200 || !cid) done(false, { status: r.status, cid });
  const h = { 'acp-connection-id': cid };
  const cs = await openSse(sess, cid, () => {});
  if (cs.status !== 200) done(false, { sse: cs.status });
  const pad = 'p'.repeat(256 * 1024);
  let first503;
  const saw503 = new Promise((res) => { first503 = res; });
  const posts = Array.from({ length: 56 }, (_, i) =>
    post(sess, h, { jsonrpc: '2.0', method: '_test/fill', params: { i, pad } }).then((x) => {
      if (x.status === 503) first503();
      return { status: x.status, text: x.body };
    }, (e) => ({ status: 0, text: e.message })));
  await Promise.race([saw503, Promise.all(posts)]);
  if (mode === 'expire') {
    const res = await Promise.all(posts);
    const late = res.filter((x) => x.status === 503 && /did not read in time/.test(x.text)).length;
    const del = (await request(sess, 'DELETE', h)).status;
    done(del === 202 && late >= 1 && res.every((x) => x.status === 202 || x.status === 503),
      { del, n202: res.filter((x) => x.status === 202).length, late,
        other: res.filter((x) => x.status !== 202 && x.status !== 503) });
  }
  const del = (await request(sess, 'DELETE', h)).status;
  const res = await Promise.all(posts);
  const count = (st) => res.filter((x) => x.status === st).length;
  const n410 = count(410);
  done(del === 202 && n410 >= 1 && count(202) + count(503) + n410 === 56 &&
    res.filter((x) => x.status === 410).every((x) => /connection ended/.test(x.text)),
  { del, n202: count(202), n503: count(503), n410, other: res.filter((x) => ![202, 410, 503].includes(x.status)) });
} else {
  process.stderr.write('usage: node h2_peer.mjs full|echo|cancel|multi|big|rst|sessions|hold|gone|expire|status|unknown|toobig|nojson|garbage URL [ARG...]\n');
  process.exit(2);
}
