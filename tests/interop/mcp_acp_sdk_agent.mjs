#!/usr/bin/env node
// mcp_acp_sdk_agent.mjs - an ACP v1 agent written with the official ACP
// TypeScript SDK 2.4 (@agentclientprotocol/sdk/unstable) that consumes
// MCP servers declared {"type":"acp"} with the SDK's own MCP-over-ACP caller
// (McpOverAcpCaller): the connectionless binding, agent -> client
// `mcp/message {serverId, requestId, method, params}` answered by a
// {result} / {error} carrier. Peer of tests/interop/run-mcp-acp-sdk.sh,
// behind `acp conductor agent "acp proxy tools" ...`: it advertises
// mcpCapabilities.acp, so the conductor passes the declaration untouched.
//
// Usage: node mcp_acp_sdk_agent.mjs [--verbose] [--accept-id]
//   --accept-id  before the SDK sees an incoming line, rename the key `id`
//                of {"type":"acp"} declarations in mcpServers to `serverId`
//                (the 2.4 schema requires serverId; `acp proxy tools` sends
//                id). Without it the SDK refuses such a session/new with
//                -32602 Invalid params, as a strict SDK agent would.
// The SDK is found as in sdk_loader.mjs (ACP_PEERS_DIR or
// <repo>/build/peers/acp).
//
// Behaviour:
//   initialize     -> protocolVersion 1, mcpCapabilities {acp:true}.
//   session/new    -> records the acp mcpServers ({name, serverId}); answers
//                     {sessionId:"sess-<n>"}. session/new params are
//                     validated by the SDK's schema before we see them.
//   session/prompt -> the prompt text T is the concatenation of its text
//                     blocks. For each recorded acp server S, in order, one
//                     agent_message_chunk per line:
//                       "server S tools <t1,t2,...>\n"      (tools/list)
//                       "echo <text>\n"       (tools/call echo {message:T})
//                       "unknown-tool <how> <code> <message>\n"
//                     where the last comes from tools/call of the
//                     nonexistent tool "no_such_tool": <how> is "carrier"
//                     for an inner MCP {error}, "tool-error" for a result
//                     with isError, "result" for a plain result, "outer"
//                     for an outer ACP error.
//                       "unknown-server <how> <code-or-json> <message>\n"
//                     from tools/list sent to serverId "<S's id>-nope",
//                     which nobody declared (<how> as above).
//                     With no acp server: "error: no acp MCP server\n".
//                     Any other failure: "error: S: <message>\n".
//                     The turn always ends with stopReason end_turn.
// Only JSON-RPC goes to stdout; diagnostics go to stderr with --verbose.
import { createRequire } from 'node:module';
import path from 'node:path';
import { Readable, Transform, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { peersDir } from './sdk_loader.mjs';

const verbose = process.argv.includes('--verbose');
const log = (...m) => {
  if (verbose) process.stderr.write(`mcp_acp_sdk_agent: ${m.join(' ')}\n`);
};

const require = createRequire(path.join(peersDir, 'package.json'));
const acp = await import(pathToFileURL(require.resolve('@agentclientprotocol/sdk/unstable')).href);
if (typeof acp.McpOverAcpCaller !== 'function') {
  process.stderr.write('mcp_acp_sdk_agent: the SDK has no McpOverAcpCaller\n');
  process.exit(3);
}

const mcp = new acp.McpOverAcpCaller({ clientInfo: { name: 'libacp-mcp-acp-sdk-agent', version: '0.1.0' } });
let nextSession = 1;
// sessionId -> [{name, serverId}]
const sessions = new Map();

function promptText(prompt) {
  let s = '';
  for (const block of prompt) if (block && block.type === 'text') s += block.text;
  return s;
}

const oneLine = (s) => String(s).replace(/\n/g, ' ');

function textOf(result) {
  return ((result && result.content) || [])
    .filter((c) => c && c.type === 'text')
    .map((c) => c.text)
    .join('');
}

// One server: tools/list, echo, an unknown tool. Returns the lines to send.
async function useServer(client, server, message) {
  const lines = [];
  const listed = await mcp.request(client, server.serverId, 'tools/list', {});
  if ('error' in listed) throw new Error(`tools/list: MCP error ${listed.error.code} ${listed.error.message}`);
  const tools = ((listed.result && listed.result.tools) || []).map((t) => t.name);
  lines.push(`server ${server.name} tools ${tools.join(',')}\n`);

  const echo = await mcp.request(client, server.serverId, 'tools/call', { name: 'echo', arguments: { message } });
  if ('error' in echo) throw new Error(`echo: MCP error ${echo.error.code} ${echo.error.message}`);
  if (echo.result && echo.result.isError) throw new Error(`echo failed: ${JSON.stringify(echo.result.content)}`);
  lines.push(`echo ${textOf(echo.result)}\n`);

  try {
    const bad = await mcp.request(client, server.serverId, 'tools/call', { name: 'no_such_tool', arguments: {} });
    if ('error' in bad) lines.push(`unknown-tool carrier ${bad.error.code} ${oneLine(bad.error.message)}\n`);
    else if (bad.result && bad.result.isError) lines.push(`unknown-tool tool-error 0 ${oneLine(textOf(bad.result))}\n`);
    else lines.push(`unknown-tool result 0 ${oneLine(JSON.stringify(bad.result))}\n`);
  } catch (e) {
    lines.push(`unknown-tool outer ${e?.code ?? 0} ${oneLine(e?.message ?? e)}\n`);
  }

  try {
    const bad = await mcp.request(client, `${server.serverId}-nope`, 'tools/list', {});
    lines.push(`unknown-server ${'error' in bad ? 'carrier' : 'result'} ${oneLine(JSON.stringify(bad))}\n`);
  } catch (e) {
    lines.push(`unknown-server outer ${e?.code ?? 0} ${oneLine(e?.message ?? e)}\n`);
  }
  return lines;
}

const app = acp
  .agent({ name: 'libacp-mcp-acp-sdk-agent' })
  .onNotification('mcp/message', mcp.handleNotification)
  .onRequest('initialize', () => ({
    protocolVersion: 1,
    agentCapabilities: {
      loadSession: false,
      promptCapabilities: { image: false, audio: false, embeddedContext: false },
      mcpCapabilities: { http: false, sse: false, acp: true },
    },
    agentInfo: { name: 'libacp-mcp-acp-sdk-agent', title: 'libacp MCP-over-ACP SDK agent', version: '0.1.0' },
    authMethods: [],
  }))
  .onRequest('session/new', ({ params }) => {
    const sessionId = `sess-${nextSession++}`;
    log('session/new', sessionId, JSON.stringify(params.mcpServers || []));
    const servers = (params.mcpServers || []).filter((s) => acp.isMcpServerAcp(s));
    sessions.set(sessionId, servers.map((s) => ({ name: s.name, serverId: s.serverId })));
    return { sessionId };
  })
  .onRequest('session/prompt', async ({ params, client }) => {
    const servers = sessions.get(params.sessionId);
    if (!servers) throw acp.RequestError.invalidParams({ sessionId: params.sessionId }, 'unknown session');
    const say = (t) => client.notify('session/update', {
      sessionId: params.sessionId,
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: t } },
    });
    const text = promptText(params.prompt);
    if (servers.length === 0) {
      await say('error: no acp MCP server\n');
      return { stopReason: 'end_turn' };
    }
    for (const server of servers) {
      try {
        for (const line of await useServer(client, server, text)) await say(line);
      } catch (e) {
        await say(`error: ${server.name}: ${oneLine(e?.message ?? e)}\n`);
      }
    }
    return { stopReason: 'end_turn' };
  });

// --accept-id: a line filter in front of the SDK (see the usage above).
function acceptIdFilter() {
  let pending = '';
  const fix = (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      return line;
    }
    const list = msg && msg.params && msg.params.mcpServers;
    if (!Array.isArray(list)) return line;
    let changed = false;
    for (const s of list) {
      if (s && s.type === 'acp' && typeof s.id === 'string' && s.serverId === undefined) {
        s.serverId = s.id;
        delete s.id;
        changed = true;
      }
    }
    if (!changed) return line;
    log('--accept-id: renamed id to serverId in', msg.method);
    return JSON.stringify(msg);
  };
  return new Transform({
    transform(chunk, _enc, done) {
      pending += chunk.toString('utf8');
      const parts = pending.split('\n');
      pending = parts.pop();
      done(null, parts.map((l) => fix(l) + '\n').join(''));
    },
    flush(done) {
      done(null, pending ? fix(pending) : '');
    },
  });
}

const input = process.argv.includes('--accept-id') ? process.stdin.pipe(acceptIdFilter()) : process.stdin;
const conn = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(input)));
await conn.closed;
log('connection closed');
process.exit(0);
