#!/usr/bin/env node
// sdk_agent.mjs - a scripted ACP v1 agent written with the official ACP
// TypeScript SDK (@agentclientprotocol/sdk, pinned in package.json). It talks
// newline-delimited JSON-RPC on stdin/stdout and writes nothing else to stdout
// (diagnostics go to stderr, only with --verbose).
//
// Usage: node sdk_agent.mjs [--echo] [--verbose] [--serve]
//
// --serve: instead of stdio, host the agent with the SDK's
// experimental/server (AcpServer) and experimental/node adapters on
// http://127.0.0.1:<free port>/acp, WebSocket upgrades through the pinned
// `ws` package; prints {"port":N} on stdout once listening, runs until
// SIGTERM.
//
// Behaviour (the contract interop clients, ours included, test against):
//   initialize       -> protocolVersion 1, agentCapabilities (no loadSession),
//                       agentInfo {name:"libacp-interop-sdk-agent"}, authMethods [].
//   session/new      -> {sessionId:"sess-<n>"}; session/prompt for an unknown
//                       session id fails with -32602.
//   session/prompt   -> the prompt text is the concatenation of its text blocks.
//     --echo mode, or text "echo:<T>":
//                       one agent_message_chunk carrying the whole prompt text
//                       (--echo) or <T> ("echo:"), then stopReason end_turn.
//                       This is the benchmark workload.
//     text "wait":      one agent_message_chunk "waiting for cancel", then waits
//                       for session/cancel (or $/cancel_request of the prompt)
//                       and answers stopReason "cancelled"; no update after.
//     anything else (scripted "full" turn; "read <abs path>" names a file):
//                       1. three agent_message_chunk text chunks
//                       2. tool_call {toolCallId:"call-<n>", kind:"read", status:"pending"}
//                       3. session/request_permission for that tool call with
//                          options allow (allow_once) and reject (reject_once)
//                       4. allowed and a path was given and the client advertised
//                          fs.readTextFile: fs/read_text_file {sessionId, path};
//                          tool_call_update status "completed" carrying the text,
//                          then an agent_message_chunk "file content: <text>".
//                          Rejected/cancelled: tool_call_update status "failed",
//                          agent_message_chunk "permission denied".
//                          No path: tool_call_update "completed", chunk "no file".
//                       5. stopReason end_turn.
//   session/cancel   -> cancels the running prompt of that session, if any.
import { Readable, Writable } from 'node:stream';
import { loadSdk, loadSdkModule } from './sdk_loader.mjs';

const acp = await loadSdk();

const argv = process.argv.slice(2);
const echoMode = argv.includes('--echo');
const verbose = argv.includes('--verbose');
const serveMode = argv.includes('--serve');
for (const a of argv) {
  if (a !== '--echo' && a !== '--verbose' && a !== '--serve') {
    process.stderr.write(`sdk_agent: unknown argument ${a}\nusage: node sdk_agent.mjs [--echo] [--verbose]\n`);
    process.exit(2);
  }
}
const log = (...m) => { if (verbose) process.stderr.write(`sdk_agent: ${m.join(' ')}\n`); };

let clientCaps = {};
let nextSession = 1;
let nextToolCall = 1;
// sessionId -> { cancel: (() => void) | null, cancelled: boolean }
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

async function scriptedTurn(client, sessionId, text) {
  const say = (t) => client.notify('session/update', textUpdate(sessionId, t));
  await say('Hello');
  await say(' from the');
  await say(' SDK agent.');

  const m = /^read\s+(\S.*)$/s.exec(text.trim());
  const filePath = m ? m[1].trim() : null;
  const toolCallId = `call-${nextToolCall++}`;
  await client.notify('session/update', {
    sessionId,
    update: {
      sessionUpdate: 'tool_call',
      toolCallId,
      title: filePath ? `Read ${filePath}` : 'Read nothing',
      kind: 'read',
      status: 'pending',
      locations: filePath ? [{ path: filePath }] : [],
      rawInput: filePath ? { path: filePath } : {},
    },
  });

  const perm = await client.request('session/request_permission', {
    sessionId,
    toolCall: { toolCallId, title: filePath ? `Read ${filePath}` : 'Read nothing', kind: 'read', status: 'pending' },
    options: [
      { optionId: 'allow', name: 'Allow once', kind: 'allow_once' },
      { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
    ],
  });
  const allowed = perm && perm.outcome && perm.outcome.outcome === 'selected' && perm.outcome.optionId === 'allow';
  log('permission outcome', JSON.stringify(perm && perm.outcome));

  if (!allowed) {
    await client.notify('session/update', {
      sessionId,
      update: { sessionUpdate: 'tool_call_update', toolCallId, status: 'failed' },
    });
    await say('permission denied');
    return { stopReason: 'end_turn' };
  }
  if (!filePath) {
    await client.notify('session/update', {
      sessionId,
      update: { sessionUpdate: 'tool_call_update', toolCallId, status: 'completed' },
    });
    await say('no file');
    return { stopReason: 'end_turn' };
  }
  if (!(clientCaps.fs && clientCaps.fs.readTextFile)) {
    await client.notify('session/update', {
      sessionId,
      update: { sessionUpdate: 'tool_call_update', toolCallId, status: 'failed' },
    });
    await say('client cannot read files');
    return { stopReason: 'end_turn' };
  }
  const file = await client.request('fs/read_text_file', { sessionId, path: filePath });
  await client.notify('session/update', {
    sessionId,
    update: {
      sessionUpdate: 'tool_call_update',
      toolCallId,
      status: 'completed',
      content: [{ type: 'content', content: { type: 'text', text: file.content } }],
    },
  });
  await say(`file content: ${file.content}`);
  return { stopReason: 'end_turn' };
}

const app = acp
  .agent({ name: 'libacp-interop-sdk-agent' })
  .onRequest('initialize', ({ params }) => {
    clientCaps = params.clientCapabilities || {};
    log('initialize, client protocolVersion', params.protocolVersion);
    return {
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: false,
        promptCapabilities: { image: false, audio: false, embeddedContext: false },
      },
      agentInfo: { name: 'libacp-interop-sdk-agent', title: 'libacp interop SDK agent', version: '0.1.0' },
      authMethods: [],
    };
  })
  .onRequest('session/new', () => {
    const sessionId = `sess-${nextSession++}`;
    sessions.set(sessionId, { cancel: null, cancelled: false });
    return { sessionId };
  })
  .onRequest('session/prompt', async ({ params, client, signal }) => {
    const s = sessions.get(params.sessionId);
    if (!s) throw acp.RequestError.invalidParams({ sessionId: params.sessionId }, 'unknown session');
    const text = promptText(params.prompt);
    if (echoMode || text.startsWith('echo:')) {
      const out = echoMode ? text : text.slice(5);
      await client.notify('session/update', textUpdate(params.sessionId, out));
      return { stopReason: 'end_turn' };
    }
    if (text.trim() === 'wait') {
      s.cancelled = false;
      const cancelled = new Promise((resolve) => {
        s.cancel = resolve;
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
      await client.notify('session/update', textUpdate(params.sessionId, 'waiting for cancel'));
      await cancelled;
      s.cancel = null;
      log('prompt cancelled');
      return { stopReason: 'cancelled' };
    }
    return scriptedTurn(client, params.sessionId, text);
  })
  .onNotification('session/cancel', ({ params }) => {
    const s = sessions.get(params.sessionId);
    log('session/cancel', params.sessionId);
    if (s && s.cancel) s.cancel();
  });

if (serveMode) {
  const { AcpServer } = await loadSdkModule('@agentclientprotocol/sdk/experimental/server');
  const node = await loadSdkModule('@agentclientprotocol/sdk/experimental/node');
  const wsmod = await loadSdkModule('ws');
  const WebSocketServer = wsmod.WebSocketServer || (wsmod.default && wsmod.default.WebSocketServer);
  const http = await import('node:http');
  const server = new AcpServer({ agent: app });
  const wss = new WebSocketServer({ noServer: true });
  const httpServer = http.createServer(node.createNodeHttpHandler(server));
  const upgrade = node.createNodeWebSocketUpgradeHandler(server, wss);
  httpServer.on('upgrade', (req, socket, head) => {
    if (new URL(req.url, 'http://x').pathname !== '/acp') { socket.destroy(); return; }
    upgrade(req, socket, head);
  });
  httpServer.listen(0, '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ port: httpServer.address().port }) + '\n');
  });
  process.on('SIGTERM', async () => {
    await server.close();
    httpServer.close();
    process.exit(0);
  });
  await new Promise(() => {});
}

const conn = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
log('connection closed');
process.exit(0);
