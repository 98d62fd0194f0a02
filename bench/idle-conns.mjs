#!/usr/bin/env node
// idle-conns.mjs - what one idle remote ACP connection costs `acp serve`.
// Run it through bench/idle-conns.sh, which raises the descriptor limit.
//
// For each profile (WebSocket, then Streamable HTTP) it starts a fresh
// `acp serve --max-connections N+8 -- sh -c '<tiny agent>'`, opens one
// connection and reads acp serve's VmRSS (the baseline: the loop, the
// listener, the first buffers), then opens N more and waits until every
// one is established:
//   ws    GET /acp with Upgrade: websocket, answered 101;
//   http  POST initialize (answered 200 with Acp-Connection-Id, the socket
//         kept alive as a client keeps it) and GET text/event-stream with
//         that id on a second socket (the 200 head of the SSE stream read).
// Then it reads acp serve's VmRSS again. Figure: (after - baseline) / N, in
// KiB per connection, acp serve's own process only: the agent processes
// (one per connection, a shell that answers initialize, then reads) are not
// counted. Raw sockets (node:net), so nothing pools or limits connections.
//
// Prints one JSON line per profile on stdout (and appends it to --out):
//   {"bench":"idle","profile","conns","rss_before_kib","rss_after_kib",
//    "per_conn_kib","fds_serve","agents"}
// Usage: node bench/idle-conns.mjs [--conns N] [--out FILE] [--profile ws|http]
// Environment: ACP_BIN (the acp program).
import { spawn } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const acp = process.env.ACP_BIN || path.join(here, '..', 'build', 'acp');
let conns = 1000;
let out = null;
let profiles = ['ws', 'http'];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--conns') conns = Number(argv[++i]);
  else if (argv[i] === '--out') out = argv[++i];
  else if (argv[i] === '--profile') profiles = [argv[++i]];
  else {
    process.stderr.write('usage: node bench/idle-conns.mjs [--conns N] [--out FILE] [--profile ws|http]\n');
    process.exit(2);
  }
}

// The tiny agent: answers the first line (initialize, id 1 from us) and then
// reads and discards everything in a shell loop.
const agentSh = 'read l; printf \'%s\\n\' \'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}\'; while read -r l; do :; done';
const initBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } });

const rssKiB = (pid) => {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : -1;
};
const fdCount = (pid) => { try { return readdirSync(`/proc/${pid}/fd`).length; } catch { return -1; } };

const sockets = [];
// Sends `req` on a new socket and resolves with the response head (and the
// body, once Content-Length bytes arrived) while the socket stays open.
function request(port, req, wantBody) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    sockets.push(s);
    let buf = Buffer.alloc(0);
    const onData = (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      const len = Number((/\r\ncontent-length:\s*(\d+)/i.exec(head) || [])[1] || 0);
      if (wantBody && buf.length < end + 4 + len) return;
      s.off('data', onData);
      s.on('data', () => {}); // SSE comments and pings: read and drop
      resolve({ head, body: buf.subarray(end + 4, end + 4 + len).toString() });
    };
    s.on('data', onData);
    s.on('error', reject);
    s.on('close', () => reject(new Error('closed before the answer')));
    s.write(req);
  });
}

async function openWs(port) {
  const key = Buffer.from(Array.from({ length: 16 }, () => Math.floor(Math.random() * 256))).toString('base64');
  const { head } = await request(port, `GET /acp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
    `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`, false);
  if (!/^HTTP\/1\.1 101/.test(head)) throw new Error(`upgrade refused: ${head.split('\r\n')[0]}`);
}

async function openHttp(port) {
  const { head, body } = await request(port, `POST /acp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
    `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n` +
    `Content-Length: ${Buffer.byteLength(initBody)}\r\n\r\n${initBody}`, true);
  const id = (/\r\nacp-connection-id:\s*(\S+)/i.exec(head) || [])[1];
  if (!/^HTTP\/1\.1 200/.test(head) || !id) throw new Error(`initialize refused: ${head.split('\r\n')[0]} ${body}`);
  const sse = await request(port, `GET /acp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n` +
    `Acp-Connection-Id: ${id}\r\n\r\n`, false);
  if (!/^HTTP\/1\.1 200/.test(sse.head)) throw new Error(`SSE stream refused: ${sse.head.split('\r\n')[0]}`);
}

async function runProfile(profile) {
  const serve = spawn(acp, ['serve', '--listen', '127.0.0.1:0', '--verbose', '--max-connections', String(conns + 8),
    '--', 'sh', '-c', agentSh], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    serve.stderr.on('data', (d) => {
      log += d;
      const m = /127\.0\.0\.1:(\d+)\/acp/.exec(log);
      if (m) resolve(Number(m[1]));
      if (log.length > 65536) log = log.slice(-4096);
    });
    serve.on('exit', (code) => reject(new Error(`acp serve exited ${code}: ${log}`)));
  });
  let agents = 0;
  serve.stderr.on('data', (d) => { agents += (String(d).match(/agent pid/g) || []).length; });
  const open = profile === 'ws' ? openWs : openHttp;
  await open(port);
  const before = rssKiB(serve.pid);
  // A few at a time: the agents start as fast as the machine lets them.
  const batch = 50;
  for (let i = 0; i < conns; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, conns - i) }, () => open(port)));
  }
  const after = rssKiB(serve.pid);
  const r = {
    bench: 'idle', profile, conns, rss_before_kib: before, rss_after_kib: after,
    per_conn_kib: Number(((after - before) / conns).toFixed(2)), fds_serve: fdCount(serve.pid), agents,
  };
  for (const s of sockets.splice(0)) { s.removeAllListeners('close'); s.on('error', () => {}); s.destroy(); }
  serve.kill('SIGTERM');
  await new Promise((resolve) => serve.on('exit', resolve));
  return r;
}

for (const p of profiles) {
  const r = await runProfile(p);
  const line = JSON.stringify(r);
  process.stdout.write(line + '\n');
  if (out) appendFileSync(out, line + '\n');
}
process.exit(0);
