#!/usr/bin/env node
// mcp_sdk2_server.mjs - an MCP server written with the official MCP
// TypeScript SDK 2.4 (@modelcontextprotocol/server, pinned in
// tests/interop/package.json), which speaks 2026-07-28 (and serves 2025-era
// clients through its legacy leg). Peer of run-mcp-sdk2-server.sh: our
// client (`acp mcp ...`) calls it.
//
// Usage:
//   node mcp_sdk2_server.mjs stdio        serveStdio on stdin/stdout
//   node mcp_sdk2_server.mjs http PORT    createMcpHandler behind node:http
//                                         on 127.0.0.1:PORT, path /mcp
// Env: SDK2_LOG  a file; one line per message received:
//        "<method> meta=<io.modelcontextprotocol/protocolVersion or ->"
//        and over HTTP also " mcp-method=<h> mcp-name=<h> session=<h>"
//        ("-" when a header is absent).
//
// The server (name "sdk2-server", version "2.4.0") has tools echo
// {message: string} and add {a: number, b: number}, the resource
// test://hello (text "hello from sdk2"), the prompt greet {name}, and a
// tools/list cache hint of 60 s, private.
import { createRequire } from 'node:module';
import { appendFileSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { peersDir } from './sdk_loader.mjs';

// Import a package's ESM entry from the peers folder (the `import`
// condition of its exports, picked by hand: ESM ignores NODE_PATH).
const require = createRequire(path.join(peersDir, 'package.json'));
function esmEntry(name) {
  const parts = name.split('/');
  const pkg = name.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  const sub = `.${name.slice(pkg.length)}`;
  const dir = path.join(peersDir, 'node_modules', pkg);
  const exp = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')).exports;
  let e = exp && (typeof exp === 'string' || exp['.'] === undefined ? { '.': exp } : exp)[sub];
  while (e && typeof e === 'object') e = e.import ?? e.default;
  return typeof e === 'string' ? path.join(dir, e) : require.resolve(name);
}
const load = (name) => import(pathToFileURL(esmEntry(name)).href);

let sdk;
let stdio;
let z;
try {
  sdk = await load('@modelcontextprotocol/server');
  stdio = await load('@modelcontextprotocol/server/stdio');
  z = await load('zod/v4');
} catch (e) {
  process.stderr.write(`mcp_sdk2_server: SDK missing: ${e?.message ?? e}\n`);
  process.exit(3);
}

const logFile = process.env.SDK2_LOG;
function note(msg, extra) {
  if (!logFile || msg === null || typeof msg !== 'object') return;
  for (const m of Array.isArray(msg) ? msg : [msg]) {
    if (typeof m?.method !== 'string') continue;
    const v = m.params?._meta?.['io.modelcontextprotocol/protocolVersion'] ?? '-';
    appendFileSync(logFile, `${m.method} meta=${v}${extra ?? ''}\n`);
  }
}

function factory() {
  const server = new sdk.McpServer(
    { name: 'sdk2-server', version: '2.4.0' },
    {
      instructions: 'An MCP TypeScript SDK 2.4 server for libacp interop.',
      cacheHints: { 'tools/list': { ttlMs: 60000, cacheScope: 'private' } },
    },
  );
  server.registerTool(
    'echo',
    { description: 'Echo the message back', inputSchema: z.object({ message: z.string() }) },
    async ({ message }) => ({ content: [{ type: 'text', text: message }] }),
  );
  server.registerTool(
    'add',
    { description: 'Add two numbers', inputSchema: z.object({ a: z.number(), b: z.number() }) },
    async ({ a, b }) => ({
      content: [{ type: 'text', text: String(a + b) }],
      structuredContent: { sum: a + b },
    }),
  );
  server.registerResource('hello', 'test://hello', { mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href ?? String(uri), mimeType: 'text/plain', text: 'hello from sdk2' }],
  }));
  server.registerPrompt(
    'greet',
    { description: 'Greet someone', argsSchema: z.object({ name: z.string() }) },
    async ({ name }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Please greet ${name}.` } }],
    }),
  );
  return server;
}

const [mode, portArg] = process.argv.slice(2);
if (mode === 'stdio') {
  // Tee stdin: the transport reads one copy, the log the other.
  const tee = new PassThrough();
  let buf = '';
  process.stdin.on('data', (d) => {
    buf += d.toString('utf8');
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        note(JSON.parse(line));
      } catch {
        /* not JSON: the transport answers it */
      }
    }
  });
  process.stdin.pipe(tee);
  stdio.serveStdio(factory, { transport: new stdio.StdioServerTransport(tee, process.stdout) });
} else if (mode === 'http' && portArg) {
  const handler = sdk.createMcpHandler(factory);
  const srv = http.createServer(async (req, res) => {
    if (!req.url.startsWith('/mcp')) {
      res.writeHead(404).end();
      return;
    }
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const h = (n) => req.headers[n] ?? '-';
    if (req.method === 'POST') {
      try {
        note(JSON.parse(body.toString('utf8')),
          ` mcp-method=${h('mcp-method')} mcp-name=${h('mcp-name')} session=${h('mcp-session-id')}`);
      } catch {
        /* the handler answers it */
      }
    }
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
      else if (v !== undefined) headers.set(k, v);
    }
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const c of response.body) res.write(c);
    }
    res.end();
  });
  srv.listen(Number(portArg), '127.0.0.1', () => {
    process.stderr.write(`mcp_sdk2_server: http://127.0.0.1:${portArg}/mcp\n`);
  });
} else {
  process.stderr.write('usage: mcp_sdk2_server.mjs stdio | http PORT\n');
  process.exit(2);
}
