#!/usr/bin/env node
// mcp_bridge_agent.mjs - an ACP v1 agent written with the official ACP
// TypeScript SDK (@agentclientprotocol/sdk) that consumes stdio MCP servers
// with the official MCP TypeScript SDK (@modelcontextprotocol/sdk). It is the
// peer of tests/interop/run-mcp-bridge-interop.sh: behind `acp conductor
// agent`, it does NOT advertise mcpCapabilities.acp, so the conductor rewrites
// every {"type":"acp"} declaration into a stdio server running
// `acp mcp-shim SOCKET TOKEN`, and this agent talks MCP to it.
//
// Usage: node mcp_bridge_agent.mjs [--http] [--verbose]
// --http: advertise mcpCapabilities.http and consume http servers ({type:
// "http", name, url, headers}) with StreamableHTTPClientTransport too (for
// `acp conductor --mcp-bridge http`); their line is
//   "server S http <url> auth <bearer|none> tools <t1,t2,...>\n".
// The ACP SDK is found as in sdk_loader.mjs (ACP_PEERS_DIR or
// <repo>/build/peers/acp); the MCP SDK in MCP_SDK_DIR (a node_modules folder)
// or <repo>/build/peers/mcp/interop/node_modules.
//
// Behaviour:
//   initialize     -> protocolVersion 1, agentCapabilities without
//                     mcpCapabilities.acp (and http/sse false).
//   session/new    -> records the stdio mcpServers ({name, command, args,
//                     env}) of the session; answers {sessionId:"sess-<n>"}.
//   session/prompt -> the prompt text T is the concatenation of its text
//                     blocks. For each recorded stdio server S, in order:
//                     connect with Client + StdioClientTransport, list tools,
//                     call echo {"message": T}, close; then one
//                     agent_message_chunk per server:
//                       "server S command C <args[0]> socket <args[1]>
//                        tools <t1,t2,...>\n"
//                     and one with the echo result text followed by "\n".
//                     With no stdio server: chunk "error: no stdio MCP
//                     server\n". Any failure: chunk "error: S: <message>\n".
//                     The turn always ends with stopReason end_turn.
// Only JSON-RPC goes to stdout; diagnostics go to stderr with --verbose.
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { loadSdk, repoRoot } from './sdk_loader.mjs';

const verbose = process.argv.includes('--verbose');
const http = process.argv.includes('--http');
const log = (...m) => {
  if (verbose) process.stderr.write(`mcp_bridge_agent: ${m.join(' ')}\n`);
};

const acp = await loadSdk();
const mcpDir =
  process.env.MCP_SDK_DIR || path.join(repoRoot, 'build', 'peers', 'mcp', 'interop', 'node_modules');
const mcpSdk = (p) =>
  import(pathToFileURL(path.join(mcpDir, '@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await mcpSdk('client/index.js');
const { StdioClientTransport } = await mcpSdk('client/stdio.js');
const { StreamableHTTPClientTransport } = await mcpSdk('client/streamableHttp.js');

let nextSession = 1;
// sessionId -> { cwd, servers: [{name, command, args, env}] }
const sessions = new Map();

function promptText(prompt) {
  let s = '';
  for (const block of prompt) if (block && block.type === 'text') s += block.text;
  return s;
}

function textUpdate(sessionId, text) {
  return {
    sessionId,
    update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } },
  };
}

// The declaration's env is an array of {name, value}.
function envObject(list) {
  const env = {};
  for (const e of list || []) if (e && typeof e.name === 'string') env[e.name] = String(e.value ?? '');
  return env;
}

// Connects to one stdio server, lists its tools, calls echo; always closes.
async function useServer(server, cwd, message) {
  const transport =
    server.type === 'http'
      ? new StreamableHTTPClientTransport(new URL(server.url), {
          requestInit: { headers: envObject(server.headers) },
        })
      : new StdioClientTransport({
          command: server.command,
          args: server.args || [],
          env: envObject(server.env),
          cwd,
          stderr: verbose ? 'inherit' : 'ignore',
        });
  const client = new Client({ name: 'libacp-mcp-bridge-agent', version: '0.1.0' }, { capabilities: {} });
  try {
    await client.connect(transport);
    const listed = await client.listTools();
    const tools = (listed.tools || []).map((t) => t.name);
    log('tools of', server.name, tools.join(','));
    const res = await client.callTool({ name: 'echo', arguments: { message } });
    if (res.isError) throw new Error(`echo failed: ${JSON.stringify(res.content)}`);
    const echoed = (res.content || [])
      .filter((c) => c.type === 'text')
      .map((c) => c.text)
      .join('');
    return { tools, echoed };
  } finally {
    await client.close().catch(() => {});
  }
}

const app = acp
  .agent({ name: 'libacp-mcp-bridge-agent' })
  .onRequest('initialize', () => ({
    protocolVersion: 1,
    agentCapabilities: {
      loadSession: false,
      promptCapabilities: { image: false, audio: false, embeddedContext: false },
      mcpCapabilities: { http, sse: false },
    },
    agentInfo: { name: 'libacp-mcp-bridge-agent', title: 'libacp MCP bridge interop agent', version: '0.1.0' },
    authMethods: [],
  }))
  .onRequest('session/new', ({ params }) => {
    const sessionId = `sess-${nextSession++}`;
    const servers = (params.mcpServers || []).filter(
      (s) =>
        s &&
        ((typeof s.command === 'string' && (s.type === undefined || s.type === 'stdio')) ||
          (http && s.type === 'http' && typeof s.url === 'string')),
    );
    log('session/new', sessionId, JSON.stringify(params.mcpServers || []));
    sessions.set(sessionId, { cwd: params.cwd, servers });
    return { sessionId };
  })
  .onRequest('session/prompt', async ({ params, client }) => {
    const s = sessions.get(params.sessionId);
    if (!s) throw acp.RequestError.invalidParams({ sessionId: params.sessionId }, 'unknown session');
    const say = (t) => client.notify('session/update', textUpdate(params.sessionId, t));
    const text = promptText(params.prompt);
    if (s.servers.length === 0) {
      await say('error: no stdio MCP server\n');
      return { stopReason: 'end_turn' };
    }
    for (const server of s.servers) {
      try {
        const { tools, echoed } = await useServer(server, s.cwd, text);
        if (server.type === 'http') {
          const auth = (server.headers || []).find((h) => h && h.name === 'Authorization');
          const kind = auth && /^Bearer [0-9a-f]{32}$/.test(auth.value) ? 'bearer' : 'none';
          await say(`server ${server.name} http ${server.url} auth ${kind} tools ${tools.join(',')}\n`);
        } else {
          const [sub = '', sock = ''] = server.args || [];
          await say(`server ${server.name} command ${server.command} ${sub} socket ${sock} tools ${tools.join(',')}\n`);
        }
        await say(`${echoed}\n`);
      } catch (e) {
        await say(`error: ${server.name}: ${String(e?.message ?? e).replace(/\n/g, ' ')}\n`);
      }
    }
    return { stopReason: 'end_turn' };
  });

const conn = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
log('connection closed');
process.exit(0);
