#!/usr/bin/env node
// sdk_v2_agent.mjs - a scripted ACP v2 (draft) agent written with the official
// ACP TypeScript SDK's `experimental/v2` agent API (SDK pinned in
// package.json). It talks newline-delimited JSON-RPC on stdin/stdout and
// writes nothing else to stdout (diagnostics go to stderr, only with
// --verbose).
//
// Usage: node sdk_v2_agent.mjs [--verbose]
//
// Behaviour (the contract `acp client --protocol-v2` is tested against):
//   initialize     -> protocolVersion 2 (the SDK refuses a client asking for
//                     less), info {name:"libacp-interop-sdk-v2-agent"},
//                     capabilities {session: {}}, no authMethods.
//   session/new    -> {sessionId:"sess-<n>"}; unknown session ids in later
//                     calls fail with -32602.
//   session/prompt -> answered at once with {messageId:"user-<n>"} (v2: the
//                     prompt is accepted, the turn runs after), then the turn
//                     streams as session/update notifications:
//                     user_message (the prompt, same messageId),
//                     state_update running, the turn's own updates, and
//                     state_update idle with the stop reason.
//     "echo:<T>":    one agent_message_chunk <T>; idle end_turn.
//     "wait":        one chunk "waiting for cancel"; waits for session/cancel,
//                    then idle stopReason "cancelled".
//     "cancel-tool": a tool_call_update in_progress advertising
//                    capabilities.cancel; waits for tool_call/cancel, answers
//                    it, confirms with tool_call_update status "cancelled",
//                    chunk "tool cancelled"; idle end_turn.
//     anything else (the full turn): chunks "Hello" " from the" " v2 agent.",
//                    tool_call_update {toolCallId:"call-<n>", kind "read",
//                    status "pending", title "Read notes"}, state_update
//                    requires_action, session/request_permission {title,
//                    subject {type:"tool_call", toolCall}, options allow
//                    (allow_once) / reject (reject_once)}, state_update
//                    running, then allowed: tool_call_update "completed" with
//                    text content and chunk "allowed"; otherwise
//                    tool_call_update "failed" and chunk "denied"; idle
//                    end_turn.
//   session/cancel -> ends the running turn of that session, if any (a
//                     pending permission request is cancelled with
//                     $/cancel_request through its signal).
import { Readable, Writable } from 'node:stream';
import { loadSdk } from './sdk_loader.mjs';

const acp = await loadSdk('/experimental/v2');

const argv = process.argv.slice(2);
const verbose = argv.includes('--verbose');
for (const a of argv) {
  if (a !== '--verbose') {
    process.stderr.write(`sdk_v2_agent: unknown argument ${a}\nusage: node sdk_v2_agent.mjs [--verbose]\n`);
    process.exit(2);
  }
}
const log = (...m) => { if (verbose) process.stderr.write(`sdk_v2_agent: ${m.join(' ')}\n`); };

let nextSession = 1;
let nextMessage = 1;
let nextToolCall = 1;
// sessionId -> { cancel: AbortController | null, tools: Map<toolCallId, () => void> }
const sessions = new Map();

function promptText(prompt) {
  let s = '';
  for (const block of prompt) if (block && block.type === 'text') s += block.text;
  return s;
}

function session(id) {
  const s = sessions.get(id);
  if (!s) throw acp.RequestError.invalidParams({ sessionId: id }, 'unknown session');
  return s;
}

async function runTurn(client, sessionId, userId, prompt) {
  const s = sessions.get(sessionId);
  const ctl = new AbortController();
  s.cancel = ctl;
  const up = (update) => client.notify('session/update', { sessionId, update });
  const agentId = `agent-${nextMessage++}`;
  const say = (text) => up({ sessionUpdate: 'agent_message_chunk', messageId: agentId, content: { type: 'text', text } });
  const idle = (stopReason) => up({ sessionUpdate: 'state_update', state: 'idle', stopReason });
  const cancelled = new Promise((resolve) => ctl.signal.addEventListener('abort', () => resolve('cancelled'), { once: true }));

  await up({ sessionUpdate: 'user_message', messageId: userId, content: prompt });
  await up({ sessionUpdate: 'state_update', state: 'running' });
  const text = promptText(prompt);
  try {
    if (text.startsWith('echo:')) {
      await say(text.slice(5));
      await idle('end_turn');
      return;
    }
    if (text.trim() === 'wait') {
      await say('waiting for cancel');
      await cancelled;
      log('turn cancelled');
      await idle('cancelled');
      return;
    }
    if (text.trim() === 'cancel-tool') {
      const toolCallId = `call-${nextToolCall++}`;
      const toolDone = new Promise((resolve) => s.tools.set(toolCallId, resolve));
      await up({
        sessionUpdate: 'tool_call_update', toolCallId, title: 'Long task', kind: 'execute',
        status: 'in_progress', capabilities: { cancel: {} },
      });
      await say('tool running');
      const why = await Promise.race([toolDone.then(() => 'tool'), cancelled]);
      s.tools.delete(toolCallId);
      await up({ sessionUpdate: 'tool_call_update', toolCallId, status: 'cancelled', capabilities: null });
      if (why === 'cancelled') {
        await idle('cancelled');
        return;
      }
      await say('tool cancelled');
      await idle('end_turn');
      return;
    }
    await say('Hello');
    await say(' from the');
    await say(' v2 agent.');
    const toolCallId = `call-${nextToolCall++}`;
    const toolCall = { toolCallId, title: 'Read notes', kind: 'read', status: 'pending' };
    await up({ sessionUpdate: 'tool_call_update', ...toolCall });
    await up({ sessionUpdate: 'state_update', state: 'requires_action' });
    let perm = null;
    try {
      perm = await client.request('session/request_permission', {
        sessionId,
        title: 'Read notes',
        subject: { type: 'tool_call', toolCall },
        options: [
          { optionId: 'allow', name: 'Allow once', kind: 'allow_once' },
          { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
        ],
      }, { cancellationSignal: ctl.signal, stopWaitingOnCancel: true });
    } catch (e) {
      log('permission request ended:', String(e && e.message));
    }
    if (ctl.signal.aborted) {
      await up({ sessionUpdate: 'tool_call_update', toolCallId, status: 'cancelled' });
      await idle('cancelled');
      return;
    }
    await up({ sessionUpdate: 'state_update', state: 'running' });
    const allowed = perm && perm.outcome && perm.outcome.outcome === 'selected' && perm.outcome.optionId === 'allow';
    log('permission outcome', JSON.stringify(perm && perm.outcome));
    if (allowed) {
      await up({
        sessionUpdate: 'tool_call_update', toolCallId, status: 'completed',
        content: [{ type: 'content', content: { type: 'text', text: 'notes read' } }],
      });
      await say(' allowed');
    } else {
      await up({ sessionUpdate: 'tool_call_update', toolCallId, status: 'failed' });
      await say(' denied');
    }
    await idle('end_turn');
  } finally {
    s.cancel = null;
  }
}

const app = acp
  .agent()
  .onRequest('initialize', ({ params }) => {
    log('initialize, client protocolVersion', params.protocolVersion);
    return {
      protocolVersion: 2,
      info: { name: 'libacp-interop-sdk-v2-agent', title: 'libacp interop SDK v2 agent', version: '0.1.0' },
      capabilities: { session: {} },
    };
  })
  .onRequest('session/new', () => {
    const sessionId = `sess-${nextSession++}`;
    sessions.set(sessionId, { cancel: null, tools: new Map() });
    return { sessionId };
  })
  .onRequest('session/prompt', ({ params, client }) => {
    const s = session(params.sessionId);
    if (s.cancel) throw acp.RequestError.invalidRequest({ sessionId: params.sessionId }, 'a turn is running');
    const messageId = `user-${nextMessage++}`;
    // The response goes first; the turn runs after it.
    setImmediate(() => {
      runTurn(client, params.sessionId, messageId, params.prompt).catch((e) => log('turn failed', String(e)));
    });
    return { messageId };
  })
  .onRequest('tool_call/cancel', ({ params }) => {
    const s = session(params.sessionId);
    const done = s.tools.get(params.toolCallId);
    if (!done) throw acp.RequestError.invalidParams({ toolCallId: params.toolCallId }, 'unknown or final tool call');
    log('tool_call/cancel', params.toolCallId);
    done();
    return {};
  })
  .onNotification('session/cancel', ({ params }) => {
    const s = sessions.get(params.sessionId);
    log('session/cancel', params.sessionId);
    if (s && s.cancel) s.cancel.abort();
  });

const conn = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await conn.closed;
log('connection closed');
process.exit(0);
