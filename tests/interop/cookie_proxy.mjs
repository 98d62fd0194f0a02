#!/usr/bin/env node
// cookie_proxy.mjs - an HTTP/1.1 reverse proxy for run-remote-interop.sh
// that stands in for a load balancer's cookie stickiness: every answer sets
// `Set-Cookie: lb=s1; Path=/; HttpOnly` (and a second cookie), and each
// request is logged as one JSON line on stdout with whether it carried the
// cookies back. Streams (SSE) are piped as they come.
//   node cookie_proxy.mjs TARGET_PORT   (prints {"port":N} first)
import http from 'node:http';

const target = Number(process.argv[2]);
let n = 0;
const server = http.createServer((req, res) => {
  const cookie = req.headers.cookie || '';
  process.stdout.write(JSON.stringify({ n: n++, method: req.method,
    lb: /(^|; )lb=s1(;|$)/.test(cookie), other: /(^|; )other=2(;|$)/.test(cookie) }) + '\n');
  const headers = { ...req.headers, host: `127.0.0.1:${target}` };
  const up = http.request({ host: '127.0.0.1', port: target, method: req.method,
    path: req.url, headers }, (ur) => {
    const h = { ...ur.headers, 'set-cookie': ['lb=s1; Path=/; HttpOnly', 'other=2; Max-Age=60'] };
    res.writeHead(ur.statusCode, h);
    ur.pipe(res);
  });
  up.on('error', () => res.destroy());
  res.on('close', () => up.destroy());
  req.pipe(up);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
process.on('SIGTERM', () => process.exit(0));
