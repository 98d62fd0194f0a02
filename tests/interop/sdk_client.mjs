#!/usr/bin/env node
// sdk_client.mjs - an ACP v1 client written with the official ACP TypeScript
// SDK that drives ANY agent command over stdio and checks its behaviour.
//
// Usage:
//   node sdk_client.mjs [--scenario full|echo|cancel|bench] [--timeout SEC]
//                       [--payload BYTES] [--turns N] [--verbose]
//                       [--dialect sdk|acp] -- CMD ARGS...
//   node sdk_client.mjs [same options] --url ws://HOST:PORT/acp [--token T]
//
// With --url the agent is remote (--http: over Streamable HTTP with the
// SDK's experimental/http-client): the SDK's experimental/ws-client connects
// to it (with the pinned `ws` package as its WebSocket on Node 20), nothing
// is spawned, and the same scenarios run over the connection.
//
// Every scenario: spawn CMD (stdin/stdout = ACP, stderr inherited), initialize
// (protocolVersion 1, clientCapabilities.fs.readTextFile=true), session/new
// with cwd = a fresh temp dir holding hello.txt, then:
//   full   prompt "read <cwd>/hello.txt". Checks: stopReason end_turn; >= 1
//          agent_message_chunk; a tool_call and a tool_call_update with the
//          same toolCallId; exactly one session/request_permission (answered
//          with the first allow_once/allow_always option); exactly one
//          fs/read_text_file of hello.txt (served from disk, confined to cwd);
//          the file's text appears in a later agent_message_chunk.
//   echo   prompt "echo:hello interop". Checks: stopReason end_turn; exactly
//          one update, an agent_message_chunk with text "hello interop".
//   cancel prompt "wait"; ~50 ms after the first session/update, send
//          session/cancel. Checks: stopReason "cancelled"; >= 1 update before
//          the response; no update for 300 ms after the response.
//   unstable  against `acp agent --unstable`: a prompt of the unstable
//          commands (subagent_update, session_message(+_chunk),
//          auth/status_update, usage in the PromptResponse), then
//          session/set_title, session/status, session/fork, session/archive,
//          session/list {archived: only}, session/unarchive, auth/status,
//          each answer as the schema says.
//   bench  the prompt-turn benchmark workload (bench/turns/ts_client.mjs):
//          --turns N (default 200) prompts of --payload BYTES (default 5)
//          against an agent that echoes the prompt (e.g. sdk_agent.mjs --echo);
//          checks every echoed chunk has exactly the payload length.
// Output: one JSON line on stdout, {"ok":true|false, "scenario":..., "updates":N,
// "stopReason":..., ...}; "errors" lists failed checks. Exit 0 only if every
// check passed, 1 on a failed check, 2 on bad usage.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync, realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { loadSdk, loadSdkModule } from './sdk_loader.mjs';

function usage(msg) {
  if (msg) process.stderr.write(`sdk_client: ${msg}\n`);
  process.stderr.write(
    'usage: node sdk_client.mjs [--scenario full|echo|cancel|bench|unstable] [--timeout SEC]\n' +
      '                           [--payload BYTES] [--turns N] [--verbose] -- CMD ARGS...\n',
  );
  process.exit(2);
}

const opts = { scenario: 'full', timeout: 30, payload: 5, turns: 200, verbose: false };
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
  } else if (a === '--scenario') opts.scenario = val();
  else if (a === '--timeout') opts.timeout = Number(val());
  else if (a === '--payload') opts.payload = Number(val());
  else if (a === '--turns') opts.turns = Number(val());
  else if (a === '--verbose') opts.verbose = true;
  else if (a === '--dialect') opts.dialect = val();
  else if (a === '--url') opts.url = val();
  else if (a === '--http') opts.http = true;
  else if (a === '--token') opts.token = val();
  else usage(`unknown argument ${a}`);
}
if (opts.url) cmd = cmd || [opts.url];
if (!cmd || cmd.length === 0) usage('missing agent command after --');
if (!['full', 'echo', 'cancel', 'bench', 'unstable'].includes(opts.scenario)) usage(`unknown scenario ${opts.scenario}`);
if (!(opts.timeout > 0)) usage('bad --timeout');
// The checks are the same for every agent; only the prompt that asks for
// each behaviour differs. `sdk` is sdk_agent.mjs's language, `acp` is the
// command language of libacp's reference agent (`acp agent --help`).
if (!['sdk', 'acp'].includes(opts.dialect || 'sdk')) usage(`unknown dialect ${opts.dialect}`);
const acpDialect = opts.dialect === 'acp';
const log = (...m) => { if (opts.verbose) process.stderr.write(`sdk_client: ${m.join(' ')}\n`); };

if (opts.scenario === 'bench') {
  const { runBench } = await import('../../bench/turns/ts_client.mjs');
  let res;
  try {
    res = await runBench({ cmd, payload: opts.payload, turns: opts.turns, impl: 'sdk_client', timeoutSec: opts.timeout });
  } catch (e) {
    process.stdout.write(JSON.stringify({ ok: false, scenario: 'bench', errors: [String(e && e.message ? e.message : e)] }) + '\n');
    process.exit(1);
  }
  process.stdout.write(JSON.stringify({ ok: true, scenario: 'bench', ...res }) + '\n');
  process.exit(0);
}

const acp = await loadSdk(opts.scenario === 'unstable' ? '/unstable' : '');

const errors = [];
const check = (cond, msg) => { if (!cond) errors.push(msg); return cond; };
const summary = { ok: false, scenario: opts.scenario, agent: cmd.join(' ') };

// Workspace for the session.
const cwd = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'acp-interop-')));
const fileText = 'hello from the interop client\nsecond line\n';
const filePath = path.join(cwd, 'hello.txt');
writeFileSync(filePath, fileText);

// Recorded traffic.
const updates = []; // {seq, kind, update}
let responded = false;
let lateUpdates = 0;
let firstUpdateResolve;
const firstUpdate = new Promise((r) => { firstUpdateResolve = r; });
const permissionRequests = [];
const fileReads = [];
const authUpdates = [];

const child = opts.url ? null : spawn(cmd[0], cmd.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
let childExit = null;
const childExited = new Promise((resolve) => {
  if (!child) return;
  child.on('exit', (code, signal) => { childExit = { code, signal }; resolve(); });
  child.on('error', (e) => { childExit = { error: e.message }; resolve(); });
});
if (child) child.stdin.on('error', () => {}); // EPIPE when the agent dies; reported via exit

let finished = false;
function finish(code) {
  if (finished) return;
  finished = true;
  summary.ok = code === 0 && errors.length === 0;
  if (errors.length) summary.errors = errors;
  process.stdout.write(JSON.stringify(summary) + '\n');
  try { rmSync(cwd, { recursive: true, force: true }); } catch {}
  if (child && childExit === null) {
    try { child.stdin.end(); } catch {}
    const t = setTimeout(() => { if (childExit === null) child.kill('SIGKILL'); }, 2000);
    childExited.then(() => { clearTimeout(t); process.exit(summary.ok ? 0 : 1); });
  } else {
    process.exit(summary.ok ? 0 : 1);
  }
}

const timer = setTimeout(() => {
  errors.push(`timeout after ${opts.timeout}s (agent did not finish the scenario)`);
  finish(1);
}, opts.timeout * 1000);

function insideCwd(p) {
  if (typeof p !== 'string' || !path.isAbsolute(p)) return false;
  let real;
  try { real = realpathSync(p); } catch { return false; }
  return real === cwd || real.startsWith(cwd + path.sep);
}

const app = acp
  .client({ name: 'libacp-interop-sdk-client' })
  .onNotification('session/update', ({ params }) => {
    const kind = params.update && params.update.sessionUpdate;
    if (responded) lateUpdates++;
    updates.push({ kind, update: params.update, sessionId: params.sessionId });
    log('update', kind);
    firstUpdateResolve();
  })
  .onRequest('session/request_permission', ({ params }) => {
    permissionRequests.push(params);
    const opt = (params.options || []).find((o) => o.kind === 'allow_once' || o.kind === 'allow_always');
    log('permission ->', opt ? opt.optionId : 'cancelled');
    return opt ? { outcome: { outcome: 'selected', optionId: opt.optionId } } : { outcome: { outcome: 'cancelled' } };
  })
  .onRequest('fs/read_text_file', async ({ params }) => {
    fileReads.push(params);
    if (!insideCwd(params.path)) {
      throw new acp.RequestError(-32602, `path outside the session cwd: ${params.path}`);
    }
    let content;
    try {
      content = await readFile(params.path, 'utf8');
    } catch (e) {
      throw new acp.RequestError(-32002, `cannot read ${params.path}: ${e.code || e.message}`);
    }
    if (params.line != null || params.limit != null) {
      const lines = content.split('\n');
      const start = Math.max(0, (params.line || 1) - 1);
      const end = params.limit != null ? start + params.limit : lines.length;
      content = lines.slice(start, end).join('\n');
    }
    return { content };
  });

if (opts.scenario === 'unstable') {
  // Only the unstable API knows this method.
  app.onNotification('auth/status_update', ({ params }) => {
    authUpdates.push(params);
  });
}

let stream;
if (opts.url && opts.http) {
  // Streamable HTTP: POST per message, GET SSE for the agent's messages.
  const { createHttpStream } = await loadSdkModule('@agentclientprotocol/sdk/experimental/http-client');
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : undefined;
  stream = createHttpStream(opts.url, { headers });
} else if (opts.url) {
  const { createWebSocketStream } = await loadSdkModule('@agentclientprotocol/sdk/experimental/ws-client');
  const wsmod = await loadSdkModule('ws');
  const WebSocket = wsmod.WebSocket || wsmod.default;
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : undefined;
  stream = createWebSocketStream(opts.url, { WebSocket, headers });
} else {
  stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
}

async function run(agent) {
  const init = await agent.request('initialize', {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: false }, terminal: false },
    clientInfo: { name: 'libacp-interop-sdk-client', version: '0.1.0' },
  });
  summary.protocolVersion = init.protocolVersion;
  summary.agentInfo = init.agentInfo || null;
  summary.sessionCapabilities = (init.agentCapabilities || {}).sessionCapabilities || null;
  check(init.protocolVersion === 1, `initialize: protocolVersion ${init.protocolVersion}, want 1`);

  const sess = await agent.request('session/new', { cwd, mcpServers: [] });
  check(typeof sess.sessionId === 'string' && sess.sessionId.length > 0, 'session/new: no sessionId');
  const sessionId = sess.sessionId;

  const prompt = (text) =>
    agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }).then((r) => {
      responded = true;
      return r;
    });

  if (opts.scenario === 'echo') {
    const r = await prompt(acpDialect ? 'hello interop' : 'echo:hello interop');
    summary.stopReason = r.stopReason;
    check(r.stopReason === 'end_turn', `stopReason ${r.stopReason}, want end_turn`);
    check(updates.length === 1, `got ${updates.length} updates, want exactly 1`);
    const u = updates[0];
    check(u && u.kind === 'agent_message_chunk', `update kind ${u && u.kind}, want agent_message_chunk`);
    check(u && u.update.content && u.update.content.text === 'hello interop',
      `echoed text ${JSON.stringify(u && u.update.content && u.update.content.text)}, want "hello interop"`);
  } else if (opts.scenario === 'full') {
    const r = await prompt(acpDialect ? `/ask:read Read ${filePath}\n/read ${filePath}` : `read ${filePath}`);
    summary.stopReason = r.stopReason;
    check(r.stopReason === 'end_turn', `stopReason ${r.stopReason}, want end_turn`);
    const chunks = updates.filter((u) => u.kind === 'agent_message_chunk');
    check(chunks.length >= 1, 'no agent_message_chunk');
    const tc = updates.find((u) => u.kind === 'tool_call');
    const tcu = updates.find((u) => u.kind === 'tool_call_update');
    check(tc, 'no tool_call update');
    check(tcu, 'no tool_call_update update');
    if (tc && tcu) check(tc.update.toolCallId === tcu.update.toolCallId, 'tool_call_update toolCallId differs from tool_call');
    check(permissionRequests.length === 1, `${permissionRequests.length} permission requests, want 1`);
    if (permissionRequests[0]) check(permissionRequests[0].sessionId === sessionId, 'permission request for another session');
    check(fileReads.length === 1, `${fileReads.length} fs/read_text_file requests, want 1`);
    if (fileReads[0]) check(fileReads[0].path === filePath, `read ${fileReads[0].path}, want ${filePath}`);
    const firstLine = fileText.split('\n')[0];
    check(chunks.some((u) => u.update.content && typeof u.update.content.text === 'string' && u.update.content.text.includes(firstLine)),
      'file content not reported in an agent_message_chunk');
    check(updates.every((u) => u.sessionId === sessionId), 'update for another session');
    summary.permissionRequests = permissionRequests.length;
    summary.fileReads = fileReads.length;
  } else if (opts.scenario === 'unstable') {
    const r = await prompt('/subagent sess_child Research\n/message sess_child Look\n' +
      '/auth unauthenticated\n/turn-usage 120 30\ndone');
    summary.stopReason = r.stopReason;
    check(r.stopReason === 'end_turn', `stopReason ${r.stopReason}, want end_turn`);
    check(r.usage && r.usage.inputTokens === 120 && r.usage.outputTokens === 30 &&
      r.usage.totalTokens === 150, `PromptResponse usage ${JSON.stringify(r.usage)}`);
    const kinds = updates.map((u) => u.kind);
    for (const k of ['subagent_update', 'session_message', 'session_message_chunk']) {
      check(kinds.includes(k), `no ${k} update (got ${kinds.join(',')})`);
    }
    const sub = updates.find((u) => u.kind === 'subagent_update');
    check(sub && sub.update.sessionId === 'sess_child', 'subagent_update names sess_child');
    check(authUpdates.length === 1 && authUpdates[0].state === 'unauthenticated',
      `auth/status_update ${JSON.stringify(authUpdates)}`);
    const caps = summary.sessionCapabilities || {};
    for (const c of ['fork', 'title', 'archive', 'status']) {
      check(caps[c], `sessionCapabilities.${c} not advertised`);
    }
    await agent.request('session/set_title', { sessionId, title: 'Interop' });
    const st = await agent.request('session/status', { sessionId });
    check(st.status === 'open', `session/status ${JSON.stringify(st)}, want open`);
    const fork = await agent.request('session/fork', { sessionId, cwd });
    check(typeof fork.sessionId === 'string' && fork.sessionId !== sessionId,
      `session/fork answered ${JSON.stringify(fork.sessionId)}`);
    await agent.request('session/archive', { sessionId });
    const st2 = await agent.request('session/status', { sessionId });
    check(st2.status === 'saved', `session/status after archive ${JSON.stringify(st2)}, want saved`);
    const only = await agent.request('session/list', { archived: 'only' });
    check(only.sessions.length === 1 && only.sessions[0].sessionId === sessionId &&
      only.sessions[0].title === 'Interop' && only.sessions[0].archived === true,
      `session/list archived only: ${JSON.stringify(only.sessions)}`);
    await agent.request('session/unarchive', { sessionId });
    const all = await agent.request('session/list', {});
    check(all.sessions.length === 2, `session/list after unarchive: ${all.sessions.length} sessions, want 2`);
    const auth = await agent.request('auth/status', {});
    check(auth.state === 'unauthenticated', `auth/status ${JSON.stringify(auth)}`);
    let missing = null;
    try {
      await agent.request('session/status', { sessionId: 'sess_nope' });
    } catch (e) {
      missing = e;
    }
    check(missing && missing.code === -32002, `session/status of an unknown id: ${missing && missing.code}, want -32002`);
  } else if (opts.scenario === 'cancel') {
    const pending = prompt(acpDialect ? '/wait' : 'wait');
    pending.catch(() => {});
    await Promise.race([firstUpdate, pending]);
    check(updates.length >= 1, 'prompt finished before any update (cannot test cancel)');
    await new Promise((r) => setTimeout(r, 50));
    log('sending session/cancel');
    await agent.notify('session/cancel', { sessionId });
    const r = await pending;
    summary.stopReason = r.stopReason;
    check(r.stopReason === 'cancelled', `stopReason ${r.stopReason}, want cancelled`);
    await new Promise((r2) => setTimeout(r2, 300));
    check(lateUpdates === 0, `${lateUpdates} session/update after the prompt response`);
    summary.lateUpdates = lateUpdates;
  }
  summary.updates = updates.length;
  summary.updateKinds = [...new Set(updates.map((u) => u.kind))];
}

try {
  await app.connectWith(stream, run);
} catch (e) {
  const m = e && typeof e.code === 'number' ? `JSON-RPC error ${e.code}: ${e.message}` : String(e && e.message ? e.message : e);
  errors.push(m);
  // Say why, if the agent died: give it a moment to be reaped.
  await Promise.race([childExited, new Promise((r) => setTimeout(r, 500))]);
  if (childExit !== null && !childExit.error) {
    errors.push(`agent exited early (code ${childExit.code}, signal ${childExit.signal})`);
  }
}
clearTimeout(timer);
if (childExit !== null && childExit.error) errors.push(`cannot run agent: ${childExit.error}`);
finish(errors.length ? 1 : 0);
