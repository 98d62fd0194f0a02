#!/usr/bin/env node
// remote_peer.mjs - raw WebSocket peers (the pinned `ws` package, not the
// ACP SDK) for the fault cases of run-remote-interop.sh, each against a
// server at URL (e.g. `acp serve`). Prints one JSON line; exit 0 when the
// expectation held, 1 otherwise.
//
//   big URL BYTES      send one text message of BYTES bytes; expect the
//                      server to close with 1009 (message too big)
//   drop URL           initialize; at its answer drop the TCP connection
//                      without a close frame (terminate)
//   vanish URL         initialize, session/new, prompt "/wait"; at the first
//                      session/update drop the TCP connection without a
//                      close frame (terminate); prints the session id
//   binary URL         a binary frame is ignored (RFD): then initialize works
//   dead URL           a raw TCP client that completes the upgrade and then
//                      never answers a ping: expect the server to drop it
//   refused URL TOKEN  expect the upgrade to fail with HTTP 401
//   resume URL         a turn ("remember me"), then drop the TCP connection
//                      (no close frame), reconnect with the cookies the
//                      upgrade set and session/load: the replayed history
//                      must hold the prompt (the same agent process). A
//                      reconnect before the server saw the drop gets a new
//                      agent: retried every 100 ms, at most 50 times
//   slowbig URL BYTES  a raw TCP client: upgrade, then the head of one
//                      masked text frame of BYTES bytes and 64 KiB of it;
//                      then stall 2.5 s (neither reading nor writing: a
//                      peer on a loaded machine), send the rest, and only
//                      then read: expect the server's close frame with
//                      1009, then the end of the stream, and no error on
//                      the socket (no reset while we were still sending)
//   resumeturn URL     initialize, session/new, prompt "busy\n/wait"; at the
//                      first session/update drop the TCP connection (no
//                      close frame); reconnect with the cookies and prompt
//                      the old session: it must answer (its turn was
//                      cancelled: a session with a turn running refuses a
//                      prompt), the cancelled turn's answer must not come,
//                      and session/load must replay "busy" (the same agent
//                      process). Retried as `resume` is
//   resumeask URL [V]  as resumeturn, with protocol version V (default 1),
//                      but the turn asks permission ("/ask") and the
//                      connection drops when session/request_permission
//                      arrives, unanswered: after the reconnect a new
//                      prompt on the session must be served (the agent
//                      gave up the question with the connection)
//   resumeheld URL V WHAT  as resumeturn (protocol V) against
//                      late_agent.mjs signal, which ends the cancelled turn
//                      only on SIGUSR1 but serves requests meanwhile: the
//                      new connection's first request names the dropped
//                      session, before the agent ended its turn. WHAT
//                      load (v1 only: v2 has no session/load): the replay
//                      must arrive ("busy"); prompt: the new turn's own
//                      update ("mine") and its end_turn must. Nothing of
//                      the cancelled turn may arrive. The caller sends
//                      SIGUSR1 once serve says it holds the request
//   wrongcookie URL    initialize, session/new, drop (no close frame);
//                      reconnect with a cookie no agent has: session/load
//                      of the old session must fail (a new agent)
//   goingaway URL FILE send initialize; at its answer write FILE; expect
//                      the server's close frame with 1001 (the caller
//                      stops the server)
//   closecode URL CODE send initialize; expect at least one message back,
//                      then the server's close frame with CODE (an agent
//                      that exits by itself: 1000 if it exited 0, else 1011)
import net from 'node:net';
import { loadSdkModule } from './sdk_loader.mjs';

const [mode, url, arg, what] = process.argv.slice(2);
const wsmod = await loadSdkModule('ws');
const WebSocket = wsmod.WebSocket || wsmod.default;
const done = (ok, info) => {
  process.stdout.write(JSON.stringify({ ok, mode, ...info }) + '\n');
  process.exit(ok ? 0 : 1);
};
setTimeout(() => done(false, { error: 'timeout' }), 30000).unref();

const init = { jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: 1, clientCapabilities: {} } };

if (mode === 'big') {
  const ws = new WebSocket(url);
  ws.on('open', () => ws.send('x'.repeat(Number(arg))));
  ws.on('close', (code) => done(code === 1009, { code }));
  ws.on('error', () => {});
} else if (mode === 'binary') {
  const ws = new WebSocket(url);
  ws.on('open', () => {
    ws.send(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'nope' })));
    ws.send(JSON.stringify(init));
  });
  ws.on('message', (data) => {
    const m = JSON.parse(String(data));
    ws.close();
    done(m.id === 1 && !!m.result, { id: m.id });
  });
  ws.on('error', (e) => done(false, { error: e.message }));
} else if (mode === 'drop') {
  const ws = new WebSocket(url);
  ws.on('open', () => ws.send(JSON.stringify(init)));
  ws.on('message', (data) => {
    const m = JSON.parse(String(data));
    ws.terminate();
    done(m.id === 1 && !!m.result, { id: m.id });
  });
  ws.on('error', (e) => done(false, { error: e.message }));
} else if (mode === 'vanish') {
  const ws = new WebSocket(url);
  let sessionId = null;
  ws.on('open', () => ws.send(JSON.stringify(init)));
  ws.on('message', (data) => {
    const m = JSON.parse(String(data));
    if (m.id === 1) {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'session/new',
        params: { cwd: process.cwd(), mcpServers: [] } }));
    } else if (m.id === 2) {
      sessionId = m.result.sessionId;
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'session/prompt',
        params: { sessionId, prompt: [{ type: 'text', text: 'busy\n/wait' }] } }));
    } else if (m.method === 'session/update') {
      ws.terminate();
      done(true, { sessionId });
    }
  });
  ws.on('error', (e) => done(false, { error: e.message }));
} else if (mode === 'dead') {
  const u = new URL(url);
  const s = net.connect(Number(u.port), u.hostname, () => {
    s.write(`GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\n` +
      'Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
      'Sec-WebSocket-Version: 13\r\n\r\n');
  });
  let got = '';
  let pings = 0;
  s.on('data', (d) => {
    got += d.toString('latin1');
    // Count ping frames (0x89) after the head; never answer them.
    const i = got.indexOf('\r\n\r\n');
    if (i >= 0) pings = [...got.slice(i + 4)].filter((c) => c.charCodeAt(0) === 0x89).length;
  });
  s.on('close', () => done(got.startsWith('HTTP/1.1 101') && pings >= 1, { pings }));
  s.on('error', () => {});
} else if (mode === 'slowbig') {
  const u = new URL(url);
  const total = Number(arg);
  const s = net.connect(Number(u.port), u.hostname);
  let got = Buffer.alloc(0);
  let upgraded = false;
  let err = null;
  const frameHead = () => {
    const h = Buffer.alloc(14);
    h[0] = 0x81; // FIN, text
    h[1] = 0x80 | 127; // masked, 64-bit length
    h.writeBigUInt64BE(BigInt(total), 2);
    h.writeUInt32BE(0, 10); // mask key 0: the payload goes as is
    return h;
  };
  const closeCode = () => {
    const i = got.indexOf('\r\n\r\n');
    if (i < 0) return null;
    const f = got.subarray(i + 4);
    // The first frame after the 101 must be the close frame (0x88).
    if (f.length < 4 || f[0] !== 0x88) return f.length ? -f[0] : null;
    return f.readUInt16BE(2);
  };
  s.on('data', (d) => {
    got = Buffer.concat([got, d]);
    if (!upgraded && got.indexOf('\r\n\r\n') >= 0) {
      upgraded = true;
      if (!got.toString('latin1').startsWith('HTTP/1.1 101')) done(false, { error: 'no 101' });
      s.pause(); // read nothing more until the stall is over
      s.write(Buffer.concat([frameHead(), Buffer.alloc(65536, 0x78)]));
      setTimeout(() => {
        s.write(Buffer.alloc(total - 65536, 0x78), () => {});
        s.resume();
      }, 2500);
    }
  });
  s.on('error', (e) => { err = e.code || e.message; });
  s.on('close', () => {
    const code = closeCode();
    // A write that failed (EPIPE, ECONNRESET: the server closed while we
    // still sent) is a failure too: a WebSocket library ends with 1006
    // then, whatever the kernel still holds for us to read.
    done(code === 1009 && !err, { code, error: err });
  });
  s.write(`GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\n` +
    'Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' +
    'Sec-WebSocket-Version: 13\r\n\r\n');
} else if (mode === 'refused') {
  const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${arg}` } });
  ws.on('unexpected-response', (req, res) => done(res.statusCode === 401, { status: res.statusCode }));
  ws.on('open', () => done(false, { error: 'upgrade accepted' }));
  ws.on('error', () => {});
} else if (mode === 'resume') {
  // One WebSocket ACP connection with a message queue.
  const open = (cookie) => new Promise((resolve, reject) => {
    const ws = new WebSocket(url, cookie ? { headers: { Cookie: cookie } } : {});
    const queue = [];
    let waiter = null;
    let setCookie = [];
    ws.on('upgrade', (res) => { setCookie = res.headers['set-cookie'] || []; });
    ws.on('message', (d) => { queue.push(JSON.parse(String(d))); if (waiter) waiter(); });
    ws.on('error', reject);
    ws.on('open', () => resolve({
      ws, setCookie, seen: [],
      send: (m) => ws.send(JSON.stringify(m)),
      async next(pred) {
        for (;;) {
          while (queue.length) { const m = queue.shift(); if (pred(m)) return m; this.seen.push(m); }
          await new Promise((r) => { waiter = r; });
          waiter = null;
        }
      },
    }));
  });
  const c1 = await open(null);
  const cookie = c1.setCookie.map((c) => c.split(';')[0]).join('; ');
  c1.send(init);
  await c1.next((m) => m.id === 1);
  c1.send({ jsonrpc: '2.0', id: 2, method: 'session/new', params: { cwd: process.cwd(), mcpServers: [] } });
  const sessionId = (await c1.next((m) => m.id === 2)).result.sessionId;
  c1.send({ jsonrpc: '2.0', id: 3, method: 'session/prompt',
    params: { sessionId, prompt: [{ type: 'text', text: 'remember me' }] } });
  await c1.next((m) => m.id === 3);
  c1.ws.terminate();
  for (let attempt = 1; attempt <= 50; attempt++) {
    const c2 = await open(cookie);
    c2.send(init);
    await c2.next((m) => m.id === 1);
    c2.send({ jsonrpc: '2.0', id: 2, method: 'session/load',
      params: { sessionId, cwd: process.cwd(), mcpServers: [] } });
    const r = await c2.next((m) => m.id === 2);
    const replayed = c2.seen.some((m) => JSON.stringify(m).includes('remember me'));
    c2.ws.close();
    if (r.result && replayed) done(!!cookie, { sessionId, attempt, cookie });
    await new Promise((res) => setTimeout(res, 100));
  }
  done(false, { error: 'not resumed' });
} else if (mode === 'resumeturn' || mode === 'wrongcookie' || mode === 'resumeask' ||
           mode === 'resumereuse' || mode === 'resumeheld') {
  const open = (cookie) => new Promise((resolve, reject) => {
    const ws = new WebSocket(url, cookie ? { headers: { Cookie: cookie } } : {});
    const queue = [];
    let waiter = null;
    let setCookie = [];
    ws.on('upgrade', (res) => { setCookie = res.headers['set-cookie'] || []; });
    ws.on('message', (d) => { queue.push(JSON.parse(String(d))); if (waiter) waiter(); });
    ws.on('error', reject);
    ws.on('open', () => resolve({
      ws, setCookie, seen: [],
      send: (m) => ws.send(JSON.stringify(m)),
      async next(pred) {
        for (;;) {
          while (queue.length) { const m = queue.shift(); if (pred(m)) return m; this.seen.push(m); }
          await new Promise((r) => { waiter = r; });
          waiter = null;
        }
      },
    }));
  });
  const version = mode !== 'wrongcookie' && arg ? Number(arg) : 1;
  // Anything of the cancelled turn that reached the new connection: the
  // old prompt's answer (id 3, where the new client did not reuse it) or
  // an update late_agent.mjs writes for it after the reconnect.
  const late = (m) => JSON.stringify(m).includes('late output of a cancelled turn') ||
    (m.method === 'session/update' && m.params.update.sessionUpdate === 'state_update' &&
     m.params.update.stopReason === 'cancelled');
  const hello = { ...init, params: { ...init.params, protocolVersion: version } };
  const c1 = await open(null);
  let cookie = c1.setCookie.map((c) => c.split(';')[0]).join('; ');
  c1.send(hello);
  await c1.next((m) => m.id === 1);
  c1.send({ jsonrpc: '2.0', id: 2, method: 'session/new', params: { cwd: process.cwd(), mcpServers: [] } });
  const sessionId = (await c1.next((m) => m.id === 2)).result.sessionId;
  if (mode === 'wrongcookie') {
    c1.ws.terminate();
    cookie = 'acp_agent=00000000-0000-4000-8000-000000000000';
    const c2 = await open(cookie);
    c2.send(init);
    await c2.next((m) => m.id === 1);
    c2.send({ jsonrpc: '2.0', id: 2, method: 'session/load',
      params: { sessionId, cwd: process.cwd(), mcpServers: [] } });
    const r = await c2.next((m) => m.id === 2);
    c2.ws.close();
    done(!!r.error, { sessionId, answer: r });
  }
  const ask = mode === 'resumeask';
  c1.send({ jsonrpc: '2.0', id: 3, method: 'session/prompt',
    params: { sessionId, prompt: [{ type: 'text', text: ask ? 'busy\n/ask go on' : 'busy\n/wait' }] } });
  await c1.next((m) => (ask ? m.method === 'session/request_permission' : m.method === 'session/update'));
  c1.ws.terminate();
  let last = null;
  for (let attempt = 1; attempt <= 50; attempt++) {
    const c2 = await open(cookie);
    c2.send(hello);
    await c2.next((m) => m.id === 1);
    if (mode === 'resumeheld') {
      // Sent before the agent ended the cancelled turn (it waits for
      // SIGUSR1): serve must hold it, or what the agent writes for the
      // session is taken for the cancelled turn's and dropped.
      const load = what === 'load';
      c2.send(load
        ? { jsonrpc: '2.0', id: 2, method: 'session/load',
          params: { sessionId, cwd: process.cwd(), mcpServers: [] } }
        : { jsonrpc: '2.0', id: 2, method: 'session/prompt',
          params: { sessionId, prompt: [{ type: 'text', text: 'mine' }] } });
      const r = await c2.next((m) => m.id === 2);
      last = r;
      if (r.error && /not found/i.test(r.error.message)) {
        c2.ws.close(); // a new agent: the server had not seen the drop yet
        await new Promise((res) => setTimeout(res, 100));
        continue;
      }
      let stop = r.result && r.result.stopReason;
      if (!load && r.result && version >= 2) {
        stop = (await c2.next((m) => m.method === 'session/update' &&
          m.params.update.sessionUpdate === 'state_update' &&
          m.params.update.state === 'idle')).params.update.stopReason;
      }
      const upd = (t) => c2.seen.some((m) => m.method === 'session/update' &&
        m.params.sessionId === sessionId && JSON.stringify(m.params.update).includes(t));
      const seenText = load ? upd('busy') : upd('"mine"');
      const stale = c2.seen.some((m) => m.id === 3 || late(m));
      c2.ws.close();
      done(!!cookie && !!r.result && seenText && !stale && (load || stop === 'end_turn'),
        { sessionId, attempt, version, what, answer: r, stopReason: stop, seenText, stale });
    }
    if (mode === 'resumereuse') {
      // The cancelled prompt was id 3: this connection's own prompt is id
      // 3 too. Its answer must be the new turn's (end_turn, its text),
      // and nothing else with id 3 may come (checked after one more turn).
      c2.send({ jsonrpc: '2.0', id: 3, method: 'session/prompt',
        params: { sessionId, prompt: [{ type: 'text', text: 'mine' }] } });
      const p = await c2.next((m) => m.id === 3);
      last = p;
      if (p.error && /not found/i.test(p.error.message)) {
        c2.ws.close(); // a new agent: the server had not seen the drop yet
        await new Promise((res) => setTimeout(res, 100));
        continue;
      }
      let stop = p.result && p.result.stopReason;
      const idle = (m) => m.method === 'session/update' &&
        m.params.update.sessionUpdate === 'state_update' && m.params.update.state === 'idle';
      if (p.result && version >= 2) stop = (await c2.next(idle)).params.update.stopReason;
      c2.send({ jsonrpc: '2.0', id: 4, method: 'session/prompt',
        params: { sessionId, prompt: [{ type: 'text', text: 'again' }] } });
      const q = await c2.next((m) => m.id === 4);
      if (q.result && version >= 2) await c2.next(idle);
      const text = c2.seen.some((m) => JSON.stringify(m).includes('"mine"'));
      const extra = c2.seen.filter((m) => m.id === 3).length;
      const stale = c2.seen.some(late);
      c2.ws.close();
      done(!!cookie && stop === 'end_turn' && text && !extra && !stale && !!q.result,
        { sessionId, attempt, version, answer: p, text, extra, stale });
    }
    c2.send({ jsonrpc: '2.0', id: 12, method: 'session/prompt',
      params: { sessionId, prompt: [{ type: 'text', text: 'hello again' }] } });
    const p = await c2.next((m) => m.id === 12);
    last = p;
    if (ask && p.error && !/not found/i.test(p.error.message)) {
      // The old agent refused the prompt (it still thinks a turn runs):
      // what this mode tests, so not retried. Only a new agent (the
      // reconnect reached the server before it learnt of the drop: the
      // session is not found) is a reason to try again.
      c2.ws.close();
      done(false, { sessionId, attempt, version, refused: p.error });
    }
    if (p.result && ask) {
      // v1 answers the prompt at the turn's end; v2 at once, and the turn
      // ends with state_update idle.
      let stop = p.result.stopReason;
      if (version >= 2) {
        const u = await c2.next((m) => m.method === 'session/update' &&
          m.params.update.sessionUpdate === 'state_update' && m.params.update.state === 'idle');
        stop = u.params.update.stopReason;
      }
      const stale = c2.seen.some((m) => m.id === 3 || late(m));
      c2.ws.close();
      done(!!cookie && stop === 'end_turn' && !stale, { sessionId, attempt, version, stopReason: stop, stale });
    }
    if (p.result && version >= 2) {
      // v2 has no session/load in acp agent; the old session answering
      // proves the same agent. The turn ends with its own idle.
      const u = await c2.next((m) => m.method === 'session/update' &&
        m.params.update.sessionUpdate === 'state_update' && m.params.update.state === 'idle');
      const stop = u.params.update.stopReason;
      const stale = c2.seen.some((m) => m.id === 3 || late(m));
      c2.ws.close();
      done(!!cookie && stop === 'end_turn' && !stale, { sessionId, attempt, version, stopReason: stop, stale });
    }
    if (p.result) {
      c2.send({ jsonrpc: '2.0', id: 13, method: 'session/load',
        params: { sessionId, cwd: process.cwd(), mcpServers: [] } });
      const r = await c2.next((m) => m.id === 13);
      const replayed = c2.seen.some((m) => JSON.stringify(m).includes('busy'));
      const stale = c2.seen.some((m) => m.id === 3 || late(m));
      c2.ws.close();
      done(!!cookie && !!r.result && replayed && !stale && p.result.stopReason === 'end_turn',
        { sessionId, attempt, stopReason: p.result.stopReason, replayed, stale });
    }
    c2.ws.close();
    await new Promise((res) => setTimeout(res, 100));
  }
  done(false, { error: 'not resumed', last });
} else if (mode === 'goingaway') {
  const fs = await import('node:fs');
  const ws = new WebSocket(url);
  let got = 0;
  ws.on('open', () => ws.send(JSON.stringify(init)));
  ws.on('message', () => { if (got++ === 0) fs.writeFileSync(arg, 'ready\n'); });
  ws.on('close', (code) => done(got >= 1 && code === 1001, { got, code }));
  ws.on('error', (e) => done(false, { error: e.message }));
} else if (mode === 'closecode') {
  const ws = new WebSocket(url);
  let got = 0;
  ws.on('open', () => ws.send(JSON.stringify(init)));
  ws.on('message', () => { got++; });
  ws.on('close', (code, reason) => done(got >= 1 && code === Number(arg),
    { got, code, reason: String(reason) }));
  ws.on('error', (e) => done(false, { error: e.message }));
} else {
  process.stderr.write('usage: node remote_peer.mjs big|slowbig|vanish|binary|dead|refused|resume|resumeturn|resumeask|resumeheld|resumereuse|wrongcookie|goingaway|closecode URL [ARG]\n');
  process.exit(2);
}
