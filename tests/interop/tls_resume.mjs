// tls_resume.mjs - Node's own TLS client (node:tls, an independent peer)
// against a TLS server: connects, sends one HTTP/1.1 request, keeps the
// session the server gave it ('session' event: a TLS 1.3 ticket, or a TLS
// 1.2 session with its ticket or id), and reconnects with it, twice.
//
//   node tls_resume.mjs PORT CA.pem MODE
//     MODE: tls13 | tls12 (tickets) | tls12-id (SSL_OP_NO_TICKET: the
//           server's session-id cache)
//
// Prints one JSON line {mode, version, reused: [first, second, third]}
// and exits 0, or prints the error and exits 1. The caller decides what
// `reused` must be (true for the reconnects against a server that
// resumes, false when resumption is off).
import tls from 'node:tls';
import fs from 'node:fs';
import { constants } from 'node:crypto';

const [port, caFile, mode] = process.argv.slice(2);
const ca = fs.readFileSync(caFile);
setTimeout(() => { console.error('timeout'); process.exit(1); }, 30000).unref();

function once(session) {
  return new Promise((resolve, reject) => {
    const opts = { host: '127.0.0.1', port: Number(port), ca, ALPNProtocols: ['http/1.1'] };
    if (mode !== 'tls13') opts.maxVersion = 'TLSv1.2';
    if (mode === 'tls12-id') opts.secureOptions = constants.SSL_OP_NO_TICKET;
    if (session) opts.session = session;
    let got = null;
    let reused = null;
    let version = null;
    const s = tls.connect(opts, () => {
      reused = s.isSessionReused();
      version = s.getProtocol();
      // acp serve answers a GET without an upgrade with an error status;
      // "Connection: close" makes it end the socket after it.
      s.write(`GET /acp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
    });
    s.on('session', (sess) => { got = sess; });
    let head = '';
    s.on('data', (d) => { head += d.toString('latin1'); });
    s.on('error', reject);
    s.on('close', () => {
      if (!/^HTTP\/1\.1 \d{3}/.test(head)) {
        reject(new Error(`no HTTP answer: ${JSON.stringify(head.slice(0, 80))}`));
        return;
      }
      resolve({ reused, version, session: got });
    });
  });
}

try {
  const reused = [];
  let version = '';
  let session = null;
  for (let i = 0; i < 3; i++) {
    const r = await once(session);
    reused.push(r.reused);
    version = r.version;
    if (r.session) session = r.session; // the newest, as our client keeps it
  }
  console.log(JSON.stringify({ mode, version, reused }));
  process.exit(0);
} catch (e) {
  console.error(String(e && e.stack || e));
  process.exit(1);
}
