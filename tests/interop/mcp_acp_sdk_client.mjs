#!/usr/bin/env node
// mcp_acp_sdk_client.mjs - an ACP v1 client written with the official ACP
// TypeScript SDK 2.4 that OFFERS an MCP server to the agent through the
// SDK's own MCP-over-ACP provider (McpOverAcpProvider from
// @agentclientprotocol/sdk/unstable, serving an @modelcontextprotocol/server
// McpServer through fromMcpServer from
// @agentclientprotocol/sdk/experimental/mcp-server). That provider speaks
// only the connectionless binding (agent -> client `mcp/message {serverId,
// requestId, method, params}` answered by a {result} / {error} carrier, no
// mcp/connect) and only MCP 2026-07-28 inside it. Peer of
// tests/interop/run-mcp-acp-sdk-provider.sh; made to run in front of any
// agent command (`acp agent --mcp-acp native`, or `acp conductor agent ...`
// with a bridge).
//
// Usage:
//   node mcp_acp_sdk_client.mjs [--name NAME] [--prompt TEXT]...
//                               [--timeout SEC] [--cancel-on TOOL]
//                               [--verbose] -- CMD ARGS...
//   --name NAME    the server's name in the session/new declaration
//                  (default "tools")
//   --prompt TEXT  a prompt to send (repeatable, in order; default
//                  "/mcp-tools"); a literal "\n" in TEXT is a newline
//   --timeout SEC  give up after SEC seconds (default 30): exit 1
//   --cancel-on TOOL  when a tools/call of TOOL reaches the provider, send
//                  session/cancel for the session (the call is then in
//                  flight: the agent should cancel it)
//   -- CMD ARGS    the agent command, spawned with stdin/stdout as ACP
//                  (stderr inherited)
//
// The MCP server (name "sdk-tools", version "2.4.0", instructions set) has
// the tools:
//   echo {message: string}  -> text content `message`
//   add {a: number, b: number} -> text content a+b
//   sleep {ms: number}      -> text "slept" after ms milliseconds, unless
//                              the request is cancelled first
//
// Steps: initialize (protocolVersion 1); register the server on the
// connection; session/new {cwd: a temp dir, mcpServers: [the SDK's own
// declaration {"type":"acp","name","serverId"}]}; each prompt in turn.
// Output on stdout, one line each:
//   "agent mcpCapabilities.acp <true|false>"
//   for each prompt: the agent's agent_message_chunk text as it came
//   (newline-terminated if it is not), then "stop <stopReason>"
//   "provider <method>,<method>,..."  the MCP methods the provider served
//     (after the SDK checked the 2026 _meta; a request lacking it never
//     reaches the server and is not listed)
//   "provider-client <json>"  the io.modelcontextprotocol/clientInfo of the
//     last request ("none" if absent)
//   "provider-cancelled <method>,..."  requests the agent cancelled while
//     the provider ran them (the SDK aborts them on $/cancel_request),
//     before the server was unregistered
// Exit 0 when every step completed (whatever the agent answered), 1 on a
// failure (printed on stderr: "mcp_acp_sdk_client: ..."), 2 on bad usage,
// 3 when the SDK lacks the MCP-over-ACP provider.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { peersDir } from './sdk_loader.mjs';

function usage(msg) {
  if (msg) process.stderr.write(`mcp_acp_sdk_client: ${msg}\n`);
  process.stderr.write(
    'usage: node mcp_acp_sdk_client.mjs [--name NAME] [--prompt TEXT]... ' +
      '[--timeout SEC] [--cancel-on TOOL] [--verbose] -- CMD ARGS...\n',
  );
  process.exit(2);
}

const opts = { name: 'tools', prompts: [], timeout: 30, verbose: false };
const argv = process.argv.slice(2);
let cmd = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const val = () => {
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    return argv[++i];
  };
  if (a === '--') {
    cmd = argv.slice(i + 1);
    break;
  } else if (a === '--name') opts.name = val();
  else if (a === '--prompt') opts.prompts.push(val().replace(/\\n/g, '\n'));
  else if (a === '--timeout') opts.timeout = Number(val());
  else if (a === '--cancel-on') opts.cancelOn = val();
  else if (a === '--verbose') opts.verbose = true;
  else usage(`unknown argument ${a}`);
}
if (!cmd || cmd.length === 0) usage('missing agent command after --');
if (!(opts.timeout > 0)) usage('bad --timeout');
if (opts.prompts.length === 0) opts.prompts.push('/mcp-tools');
const log = (...m) => {
  if (opts.verbose) process.stderr.write(`mcp_acp_sdk_client: ${m.join(' ')}\n`);
};
const fail = (msg) => {
  process.stderr.write(`mcp_acp_sdk_client: ${msg}\n`);
  process.exit(1);
};

// Import a package's ESM entry from the peers folder. createRequire()
// resolves the `require` condition, and a dual package's CommonJS copy has
// classes of its own: fromMcpServer tests `instanceof McpServer` against
// the ESM one, so pick the `import` condition of its exports by hand.
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
const acp = await load('@agentclientprotocol/sdk/unstable');
if (typeof acp.McpOverAcpProvider !== 'function') {
  process.stderr.write('mcp_acp_sdk_client: the SDK has no McpOverAcpProvider\n');
  process.exit(3);
}
let fromMcpServer;
let McpServer;
let z;
try {
  ({ fromMcpServer } = await load('@agentclientprotocol/sdk/experimental/mcp-server'));
  ({ McpServer } = await load('@modelcontextprotocol/server'));
  z = await load('zod/v4');
} catch (e) {
  process.stderr.write(`mcp_acp_sdk_client: MCP server SDK missing: ${e?.message ?? e}\n`);
  process.exit(3);
}

const timer = setTimeout(() => fail(`timeout after ${opts.timeout} s`), opts.timeout * 1000);
const cwd = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'acp-mcp-acp-sdk-client-')));
const out = (line) => process.stdout.write(line);

// The MCP server, built afresh per request as fromMcpServer requires.
const tools = fromMcpServer(() => {
  const server = new McpServer(
    { name: 'sdk-tools', version: '2.4.0' },
    { instructions: 'Tools offered by an ACP client through MCP-over-ACP.' },
  );
  server.registerTool(
    'echo',
    { description: 'Echo the message back', inputSchema: z.object({ message: z.string() }) },
    async ({ message }) => ({ content: [{ type: 'text', text: message }] }),
  );
  server.registerTool(
    'add',
    { description: 'Add two numbers', inputSchema: z.object({ a: z.number(), b: z.number() }) },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
  );
  server.registerTool(
    'sleep',
    { description: 'Wait ms milliseconds', inputSchema: z.object({ ms: z.number() }) },
    async ({ ms }, ctx) =>
      new Promise((resolve) => {
        const signal = ctx?.mcpReq?.signal ?? ctx?.signal;
        const done = () => resolve({ content: [{ type: 'text', text: 'slept' }] });
        const timer = setTimeout(done, ms);
        signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          done();
        });
      }),
  );
  return server;
});
const served = [];
const cancelled = [];
let clientInfo;
let onToolCall = () => {};
const handler = async (cx) => {
  served.push(cx.method);
  clientInfo = cx.clientInfo;
  log('mcp', cx.method, JSON.stringify(cx.params ?? {}));
  cx.signal.addEventListener('abort', () => {
    log('mcp cancelled', cx.method);
    cancelled.push(cx.method);
  });
  if (cx.method === 'tools/call') onToolCall(cx.params?.name);
  return tools.handler(cx);
};

const provider = new acp.McpOverAcpProvider();
const child = spawn(cmd[0], cmd.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
child.on('error', (e) => fail(`cannot start ${cmd[0]}: ${e.message}`));
const app = acp
  .client({ name: 'libacp-mcp-acp-sdk-client' })
  .onRequest('mcp/message', provider.handleRequest);
const connection = app.connect(acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));

let rc = 0;
try {
  const init = await connection.agent.request('initialize', {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: 'libacp-mcp-acp-sdk-client', version: '0.1.0' },
  });
  out(`agent mcpCapabilities.acp ${init?.agentCapabilities?.mcpCapabilities?.acp === true}\n`);
  const reg = provider.registerServer(connection.agent, { name: opts.name, handler });
  log('declaration', JSON.stringify(reg.declaration));
  const session = await connection.agent.buildSession(cwd).withMcpServer(reg.declaration).start();
  onToolCall = (name) => {
    if (name !== opts.cancelOn) return;
    log('session/cancel on', name);
    connection.agent.notify('session/cancel', { sessionId: session.sessionId }).catch(() => {});
  };
  for (const prompt of opts.prompts) {
    log('prompt', JSON.stringify(prompt));
    const done = session.prompt(prompt);
    const text = await session.readText();
    const res = await done;
    out(text === '' || text.endsWith('\n') ? text : `${text}\n`);
    out(`stop ${res.stopReason}\n`);
  }
  session.dispose();
  const cancelledByAgent = [...cancelled];
  await reg.dispose();
  out(`provider ${served.join(',')}\n`);
  out(`provider-client ${clientInfo === undefined ? 'none' : JSON.stringify(clientInfo)}\n`);
  out(`provider-cancelled ${cancelledByAgent.join(',')}\n`);
} catch (e) {
  process.stderr.write(`mcp_acp_sdk_client: ${e?.message ?? e}${e?.data ? ' ' + JSON.stringify(e.data) : ''}\n`);
  rc = 1;
}
clearTimeout(timer);
connection.close();
child.stdin.end();
await new Promise((resolve) => {
  if (child.exitCode !== null || child.signalCode !== null) resolve();
  else child.on('exit', resolve);
});
rmSync(cwd, { recursive: true, force: true });
process.exit(rc);
