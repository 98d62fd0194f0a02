#!/usr/bin/env node
// sdk_v2_client.mjs - an ACP v2 (draft) client written with the official ACP
// TypeScript SDK's `experimental/v2` entry point; drives an agent command
// over stdio and checks the v2 exchange.
//
// Usage: node sdk_v2_client.mjs [--timeout SEC] [--scenario basic|semantics]
//                               -- CMD ARGS...
//
// --scenario semantics (against acp agent --protocol-v2, whose command
// language it uses) checks the v2 semantics that differ from v1, each as
// the SDK parses it: session/new without modes (the mode a config option
// of category "mode"); a turn with /plan, /tool, /diff, /ask, /mode giving
// plan_update items, tool_call_update upserts only, a diff with changes
// and a git_patch, state running -> requires_action -> running -> idle
// around a permission request {title, subject: tool_call}, and a
// config_option_update; /cancellable ended by tool_call/cancel (status
// cancelled, the turn goes on); /run as a terminal the agent owns (output
// chunks in base64, exitStatus) and terminal/cancel stopping one (SIGTERM);
// session/resume with replayFrom start
// replaying the prompt under its messageId, then an idle snapshot before
// the answer; an unknown replay cursor refused with -32602; a prompt for an
// unknown session refused with -32002 (no turn, no update).
//
// Initialize (the SDK asks for protocolVersion 2 and validates the answer
// against the v2 schema), session/new in a fresh temp dir, then one prompt
// "hello v2" whose text the agent streams back, read with the SDK's
// readTextUntilIdle() (agent_message chunks until state_update idle).
// Checks: the agent answered protocolVersion 2; the streamed text is
// "hello v2". Output: one JSON line {"ok", "protocolVersion", "text",
// "errors"}; exit 0 only if every check passed, 1 otherwise, 2 on bad usage.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { loadSdk } from './sdk_loader.mjs';

const argv = process.argv.slice(2);
let timeout = 30;
let scenario = 'basic';
const sep = argv.indexOf('--');
if (sep < 0 || sep === argv.length - 1) {
  process.stderr.write('usage: node sdk_v2_client.mjs [--timeout SEC] -- CMD ARGS...\n');
  process.exit(2);
}
for (let i = 0; i < sep; i++) {
  if (argv[i] === '--timeout') timeout = Number(argv[++i]);
  else if (argv[i] === '--scenario') scenario = argv[++i];
  else {
    process.stderr.write(`sdk_v2_client: unknown option ${argv[i]}\n`);
    process.exit(2);
  }
}
const [cmd, ...args] = argv.slice(sep + 1);
const acp = await loadSdk('/experimental/v2');
const cwd = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'acp-v2-')));
const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const errors = [];
const result = { ok: false, protocolVersion: null, text: null, errors };
const timer = setTimeout(() => {
  errors.push(`timed out after ${timeout} s`);
  finish();
}, timeout * 1000);

function finish() {
  clearTimeout(timer);
  result.ok = errors.length === 0;
  process.stdout.write(JSON.stringify(result) + '\n');
  child.kill();
  rmSync(cwd, { recursive: true, force: true });
  process.exit(result.ok ? 0 : 1);
}

// --scenario semantics: every session/update in arrival order, and the
// permission requests, for the checks below.
const updates = [];
const permissions = [];
let wake = null;
function nextMatching(pred) {
  return new Promise((resolve) => {
    const look = () => {
      const i = updates.findIndex((u, k) => k >= seen && pred(u));
      if (i >= 0) { seen = i + 1; resolve(updates[i]); return; }
      wake = look;
    };
    look();
  });
}
let seen = 0;
const untilIdle = () => nextMatching((u) => u.sessionUpdate === 'state_update' && u.state === 'idle');

async function semantics(ctx) {
  const check = (cond, what) => { if (!cond) errors.push(what); };
  const s = await ctx.request('session/new', { cwd, mcpServers: [] });
  const sid = s.sessionId;
  check(s.modes === undefined, 'session/new carries v1 modes');
  const mode = (s.configOptions || []).find((o) => o.configId === 'mode');
  check(mode && mode.category === 'mode' && mode.currentValue === 'code', `no mode config option: ${JSON.stringify(s.configOptions)}`);
  check(JSON.stringify((s.availableCommands || []).map((c) => c.name)) === '["plan","read","wait"]',
    `session/new availableCommands: ${JSON.stringify(s.availableCommands)}`);
  check(s.availableCommands[0].type === 'command' && s.availableCommands[0].input.type === 'text',
    `v2 command shape: ${JSON.stringify(s.availableCommands[0])}`);

  // plan variants and diff file states, as the SDK parses them
  let from0 = updates.length;
  seen = from0;
  await ctx.request('session/prompt', {
    sessionId: sid,
    prompt: [{ type: 'text', text: '/plan:build A\n/plan-other:notes Keep\n/diff:move a.c b.c\n/diff:add:binary img.png\n/commands' }],
  });
  await untilIdle();
  const vturn = updates.slice(from0);
  const plans = vturn.filter((u) => u.sessionUpdate === 'plan_update').map((u) => u.plan);
  check(plans.some((p) => p.type === 'items' && p.planId === 'build') &&
    plans.some((p) => p.type === '_acp_note' && p.planId === 'notes' && p.text === 'Keep'),
  `plan variants: ${JSON.stringify(plans)}`);
  const vdiffs = vturn.flatMap((u) => (u.sessionUpdate === 'tool_call_update' && u.content) || []).filter((c) => c.type === 'diff');
  const mv = vdiffs.find((d) => d.changes[0].operation === 'move');
  check(mv && mv.changes[0].oldPath === path.join(cwd, 'a.c') && mv.changes[0].path === path.join(cwd, 'b.c') &&
    mv.patch && mv.patch.text.includes('rename from ' + path.join(cwd, 'a.c')), `move diff: ${JSON.stringify(mv)}`);
  const cu = vturn.find((u) => u.sessionUpdate === 'available_commands_update');
  check(cu && cu.availableCommands.length === 3 && cu.availableCommands.every((c) => c.type === 'command'),
    `available_commands_update: ${JSON.stringify(cu)}`);
  const bin = vdiffs.find((d) => d.changes[0].fileType === 'binary');
  check(bin && bin.changes[0].operation === 'add' && !bin.patch, `binary diff: ${JSON.stringify(bin)}`);

  let from = updates.length;
  const p1 = await ctx.request('session/prompt', {
    sessionId: sid,
    prompt: [{ type: 'text', text: '/plan A; B\n/tool Look\n/diff src/a.c\n/ask Edit a.c\n/mode ask' }],
  });
  await untilIdle();
  const turn = updates.slice(from);
  const kinds = turn.map((u) => u.sessionUpdate);
  check(!kinds.includes('tool_call') && !kinds.includes('plan') && !kinds.includes('current_mode_update'),
    `v1 update kinds in a v2 turn: ${kinds.join(',')}`);
  const plan = turn.find((u) => u.sessionUpdate === 'plan_update');
  check(plan && plan.plan.type === 'items' && typeof plan.plan.planId === 'string' && plan.plan.entries.length === 2,
    `plan_update: ${JSON.stringify(plan)}`);
  const diff = turn.flatMap((u) => (u.sessionUpdate === 'tool_call_update' && u.content) || []).find((c) => c.type === 'diff');
  check(diff && diff.changes[0].operation === 'modify' && diff.changes[0].path === path.join(cwd, 'src/a.c') &&
    diff.patch && diff.patch.format === 'git_patch' && diff.patch.text.startsWith('diff --git '),
  `diff: ${JSON.stringify(diff)}`);
  const states = turn.filter((u) => u.sessionUpdate === 'state_update').map((u) => u.state + (u.stopReason ? ':' + u.stopReason : ''));
  check(JSON.stringify(states) === JSON.stringify(['running', 'requires_action', 'running', 'idle:end_turn']), `states ${states}`);
  const perm = permissions[0];
  check(perm && perm.title === 'Edit a.c' && perm.subject && perm.subject.type === 'tool_call' &&
    perm.subject.toolCall.title === 'Edit a.c' && perm.toolCall === undefined, `permission ${JSON.stringify(perm)}`);
  const cfg = turn.find((u) => u.sessionUpdate === 'config_option_update');
  check(cfg && cfg.configOptions.find((o) => o.configId === 'mode').currentValue === 'ask', `config_option_update ${JSON.stringify(cfg)}`);
  const user = turn.find((u) => u.sessionUpdate === 'user_message');
  check(user && user.messageId === p1.messageId, 'user_message does not carry the prompt\'s messageId');

  // tool_call/cancel
  from = updates.length;
  seen = from;
  await ctx.request('session/prompt', { sessionId: sid, prompt: [{ type: 'text', text: '/cancellable Long\nafter' }] });
  const tc = await nextMatching((u) => u.sessionUpdate === 'tool_call_update' && u.capabilities && u.capabilities.cancel);
  await ctx.request('tool_call/cancel', { sessionId: sid, toolCallId: tc.toolCallId });
  const done = await nextMatching((u) => u.sessionUpdate === 'tool_call_update' && u.toolCallId === tc.toolCallId && u.status);
  check(done.status === 'cancelled' && done.capabilities === null, `after tool_call/cancel: ${JSON.stringify(done)}`);
  const end = await untilIdle();
  check(end.stopReason === 'end_turn', `turn after tool_call/cancel ended ${end.stopReason}`);
  const text = updates.slice(from).filter((u) => u.sessionUpdate === 'agent_message_chunk').map((u) => u.content.text).join('');
  check(text === 'tool call cancelled\nafter', `text after tool_call/cancel: ${JSON.stringify(text)}`);
  try {
    await ctx.request('tool_call/cancel', { sessionId: sid, toolCallId: tc.toolCallId });
    errors.push('a final tool call was cancelled again');
  } catch (e) {
    check(e.code === -32602, `cancel of a final tool call: ${e.code}`);
  }

  // /run: a terminal the agent owns; terminal/cancel stops it (SIGTERM)
  from = updates.length;
  seen = from;
  await ctx.request('session/prompt', { sessionId: sid, prompt: [{ type: 'text', text: '/run echo hi\n/run sleep 60\nafter' }] });
  const t1 = await nextMatching((u) => u.sessionUpdate === 'terminal_update' && u.exitStatus);
  const out1 = updates.slice(from).filter((u) => u.sessionUpdate === 'terminal_output_chunk' && u.terminalId === t1.terminalId)
    .map((u) => Buffer.from(u.data, 'base64').toString()).join('');
  check(t1.exitStatus.exitCode === 0 && out1 === 'hi\n', `echo hi: exit ${JSON.stringify(t1.exitStatus)}, output ${JSON.stringify(out1)}`);
  const t2 = await nextMatching((u) => u.sessionUpdate === 'terminal_update' && u.capabilities && u.capabilities.cancel && u.terminalId !== t1.terminalId);
  check(t2.command === 'sleep 60' && t2.cwd === cwd, `terminal_update ${JSON.stringify(t2)}`);
  await ctx.request('terminal/cancel', { sessionId: sid, terminalId: t2.terminalId });
  const t2end = await nextMatching((u) => u.sessionUpdate === 'terminal_update' && u.terminalId === t2.terminalId && u.exitStatus);
  check(t2end.exitStatus.signal === 'SIGTERM' && t2end.capabilities === null, `after terminal/cancel: ${JSON.stringify(t2end)}`);
  const end2 = await untilIdle();
  check(end2.stopReason === 'end_turn', `turn after terminal/cancel ended ${end2.stopReason}`);
  try {
    await ctx.request('terminal/cancel', { sessionId: sid, terminalId: t2.terminalId });
    errors.push('an exited terminal was cancelled again');
  } catch (e) {
    check(e.code === -32602, `cancel of an exited terminal: ${e.code}`);
  }

  // session/cancel of a turn whose /run still runs: the command is stopped
  // and its end reported (terminal exitStatus, the call cancelled) before
  // the idle state_update with stopReason cancelled
  from = updates.length;
  seen = from;
  await ctx.request('session/prompt', { sessionId: sid, prompt: [{ type: 'text', text: '/run sleep 60\nnot reached' }] });
  const t3 = await nextMatching((u) => u.sessionUpdate === 'terminal_update' && u.capabilities && u.capabilities.cancel);
  await ctx.notify('session/cancel', { sessionId: sid });
  const end3 = await untilIdle();
  const tail3 = updates.slice(from).map((u) => u.sessionUpdate + ':' + (u.exitStatus ? u.exitStatus.signal : u.status || u.state || ''));
  check(end3.stopReason === 'cancelled' &&
    JSON.stringify(tail3.slice(-3)) === JSON.stringify(['terminal_update:SIGTERM', 'tool_call_update:cancelled', 'state_update:idle']) &&
    t3.terminalId, `cancel of a /run turn: ${JSON.stringify(tail3)}`);

  // resume with replay: the history, then the state snapshot, then the answer
  // (The SDK may run notification handlers after it resolves the answer, so
  // wait for the snapshot; its place before the answer is in the
  // resume_replay_v2 transcript.)
  from = updates.length;
  seen = from;
  await ctx.request('session/resume', { sessionId: sid, cwd, replayFrom: { type: 'start' } });
  await nextMatching((u) => u.sessionUpdate === 'state_update');
  const replay = updates.slice(from);
  const ru = replay.find((u) => u.sessionUpdate === 'user_message' && u.messageId === p1.messageId);
  check(ru, 'replay lost the prompt\'s messageId');
  const last = replay[replay.length - 1];
  check(last && last.sessionUpdate === 'state_update' && last.state === 'idle', `resume did not end with a state snapshot: ${JSON.stringify(last)}`);
  from = updates.length;
  seen = from;
  await ctx.request('session/resume', { sessionId: sid, cwd });
  await nextMatching((u) => u.sessionUpdate === 'state_update');
  const plain = updates.slice(from);
  check(plain.length === 1 && plain[0].sessionUpdate === 'state_update', `resume without replay sent ${JSON.stringify(plain)}`);
  try {
    await ctx.request('session/resume', { sessionId: sid, cwd, replayFrom: { type: '_later' } });
    errors.push('an unknown replay cursor was accepted');
  } catch (e) {
    check(e.code === -32602, `unknown replay cursor: ${e.code}`);
  }

  // A prompt the agent cannot take is refused with an error: it is not
  // accepted and then ended at once with stopReason "error", and no update
  // of a turn comes for it.
  from = updates.length;
  seen = from;
  try {
    await ctx.request('session/prompt', { sessionId: 'no-such-session', prompt: [{ type: 'text', text: 'x' }] });
    errors.push('a prompt for an unknown session was accepted');
  } catch (e) {
    check(e.code === -32002, `prompt for an unknown session: ${e.code}`);
  }
  await ctx.request('session/resume', { sessionId: sid, cwd });
  await nextMatching((u) => u.sessionUpdate === 'state_update');
  const stray = updates.slice(from, -1);
  check(stray.length === 0, `updates for a refused prompt: ${JSON.stringify(stray)}`);
  result.text = 'semantics checked';
}

try {
  const app = acp.client({ name: 'sdk-v2-client' });
  if (scenario === 'semantics') {
    app.onNotification('session/update', ({ params }) => {
      updates.push(params.update);
      if (wake) { const w = wake; wake = null; w(); }
    });
    app.onRequest('session/request_permission', ({ params }) => {
      permissions.push(params);
      return { outcome: { outcome: 'selected', optionId: params.options[0].optionId } };
    });
  }
  await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request('initialize', {
      protocolVersion: acp.PROTOCOL_VERSION,
      info: { name: 'sdk-v2-client', version: '1' },
      capabilities: {},
    });
    result.protocolVersion = init.protocolVersion;
    if (init.protocolVersion !== 2) errors.push(`protocolVersion ${init.protocolVersion}, want 2`);
    if (scenario === 'semantics') {
      await semantics(ctx);
      return;
    }
    await ctx.buildSession(cwd).withSession(async (session) => {
      await session.prompt('hello v2');
      result.text = await session.readTextUntilIdle();
    });
  });
  if (scenario !== 'semantics' && result.text !== 'hello v2') errors.push(`text ${JSON.stringify(result.text)}, want "hello v2"`);
} catch (e) {
  errors.push(String(e && e.stack ? e.stack : e));
}
finish();
