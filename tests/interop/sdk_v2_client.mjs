#!/usr/bin/env node
// sdk_v2_client.mjs - an ACP v2 (draft) client written with the official ACP
// TypeScript SDK's `experimental/v2` entry point; drives an agent command
// over stdio and checks the v2 exchange.
//
// Usage: node sdk_v2_client.mjs [--timeout SEC] -- CMD ARGS...
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
const sep = argv.indexOf('--');
if (sep < 0 || sep === argv.length - 1) {
  process.stderr.write('usage: node sdk_v2_client.mjs [--timeout SEC] -- CMD ARGS...\n');
  process.exit(2);
}
for (let i = 0; i < sep; i++) {
  if (argv[i] === '--timeout') timeout = Number(argv[++i]);
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

try {
  await acp.client({ name: 'sdk-v2-client' }).connectWith(stream, async (ctx) => {
    const init = await ctx.request('initialize', {
      protocolVersion: acp.PROTOCOL_VERSION,
      info: { name: 'sdk-v2-client', version: '1' },
      capabilities: {},
    });
    result.protocolVersion = init.protocolVersion;
    if (init.protocolVersion !== 2) errors.push(`protocolVersion ${init.protocolVersion}, want 2`);
    await ctx.buildSession(cwd).withSession(async (session) => {
      await session.prompt('hello v2');
      result.text = await session.readTextUntilIdle();
    });
  });
  if (result.text !== 'hello v2') errors.push(`text ${JSON.stringify(result.text)}, want "hello v2"`);
} catch (e) {
  errors.push(String(e && e.stack ? e.stack : e));
}
finish();
