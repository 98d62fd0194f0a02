#!/usr/bin/env node
// ts_client.mjs - prompt-turn benchmark client written with the official ACP
// TypeScript SDK (the "theirs" side of bench/run-turns.sh).
//
// Usage: node ts_client.mjs [--payload BYTES] [--turns N] [--warmup N]
//                           [--impl NAME] [--timeout SEC]
//                           (-- AGENT_CMD ARGS... | --url URL [--http])
//
// Spawns the agent (stdin/stdout = ACP, stderr inherited), initialize,
// session/new, then N sequential session/prompt requests, each one text block
// of BYTES repeated ASCII. The agent must answer each with exactly one
// agent_message_chunk echoing the text, then stopReason end_turn (e.g.
// tests/interop/sdk_agent.mjs --echo). Per turn, the round trip is timed with
// process.hrtime from just before the request is sent until its response
// arrives; the echoed chunk must have exactly BYTES characters.
// Before closing the agent's stdin, reads VmHWM (peak RSS) of the agent from
// /proc/<pid>/status, and its own.
//
// Prints one JSON line on stdout:
//   {"impl","payload","turns","seconds","rtps","mibps","p50_us","p99_us",
//    "client_peak_rss_kib","agent_peak_rss_kib","agent_pid"}
//   rtps  = turns / seconds; mibps = turns * payload / seconds / 2^20 (payload
//   bytes echoed back per second, one direction); p50/p99 = nearest-rank
//   percentiles of the per-turn round trips in microseconds.
// Exit 0 on success, 1 on a failed check (message on stderr), 2 on bad usage.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const loaderUrl = pathToFileURL(path.join(here, '..', '..', 'tests', 'interop', 'sdk_loader.mjs')).href;

/** Peak resident set (VmHWM) of a live process in KiB, or null. */
export function peakRssKiB(pid) {
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

function makePayload(n) {
  const pattern = 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
  return pattern.repeat(Math.ceil(n / pattern.length)).slice(0, n);
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[idx];
}

/**
 * Runs the benchmark against `cmd` (array). Resolves with the result object;
 * rejects with an Error on any failed check.
 */
export async function runBench({ cmd, url, http = false, payload, turns, warmup = 0, impl = 'ts', timeoutSec = 0 }) {
  const { loadSdk, loadSdkModule } = await import(loaderUrl);
  const acp = await loadSdk();
  const text = makePayload(payload);

  // With `url` the agent is remote (the SDK's experimental/ws-client, the
  // pinned `ws` package as its WebSocket; with `http` its
  // experimental/http-client, Streamable HTTP): nothing is spawned.
  const child = url ? null : spawn(cmd[0], cmd.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
  let exitInfo = url ? { code: null } : null;
  const exited = new Promise((resolve) => {
    if (!child) { resolve(); return; }
    child.on('exit', (code, signal) => { exitInfo = { code, signal }; resolve(); });
    child.on('error', (e) => { exitInfo = { error: e.message }; resolve(); });
  });
  if (child) child.stdin.on('error', () => {});

  // Per-turn echo accounting, reset before every prompt.
  let chunks = 0;
  let chunkLen = 0;
  let otherUpdates = 0;
  const app = acp
    .client({ name: 'libacp-bench-ts-client' })
    .onNotification('session/update', ({ params }) => {
      const u = params.update;
      if (u && u.sessionUpdate === 'agent_message_chunk' && u.content && u.content.type === 'text') {
        chunks++;
        chunkLen += u.content.text.length;
      } else {
        otherUpdates++;
      }
    });

  let timer = null;
  const timeout = timeoutSec > 0
    ? new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timeout after ${timeoutSec}s`)), timeoutSec * 1000); })
    : null;

  let stream;
  if (url && http) {
    const { createHttpStream } = await loadSdkModule('@agentclientprotocol/sdk/experimental/http-client');
    stream = createHttpStream(url);
  } else if (url) {
    const { createWebSocketStream } = await loadSdkModule('@agentclientprotocol/sdk/experimental/ws-client');
    const wsmod = await loadSdkModule('ws');
    stream = createWebSocketStream(url, { WebSocket: wsmod.WebSocket || wsmod.default });
  } else {
    stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  }
  const work = app.connectWith(stream, async (agent) => {
    await agent.request('initialize', {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: 'libacp-bench-ts-client', version: '0.1.0' },
    });
    const { sessionId } = await agent.request('session/new', { cwd: process.cwd(), mcpServers: [] });
    const params = { sessionId, prompt: [{ type: 'text', text }] };

    const one = async (i) => {
      chunks = 0;
      chunkLen = 0;
      otherUpdates = 0;
      const t0 = process.hrtime.bigint();
      const r = await agent.request('session/prompt', params);
      const dt = process.hrtime.bigint() - t0;
      if (r.stopReason !== 'end_turn') throw new Error(`turn ${i}: stopReason ${r.stopReason}, want end_turn`);
      if (chunks !== 1 || otherUpdates !== 0) {
        throw new Error(`turn ${i}: got ${chunks} agent_message_chunk and ${otherUpdates} other updates, want exactly 1 chunk`);
      }
      if (chunkLen !== payload) throw new Error(`turn ${i}: echoed ${chunkLen} bytes, want ${payload}`);
      return dt;
    };

    for (let i = 0; i < warmup; i++) await one(-1 - i);
    const rtt = new Float64Array(turns);
    const start = process.hrtime.bigint();
    for (let i = 0; i < turns; i++) rtt[i] = Number(await one(i)) / 1000;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    rtt.sort();
    return {
      seconds,
      p50: percentile(rtt, 0.5),
      p99: percentile(rtt, 0.99),
      agentRss: child ? peakRssKiB(child.pid) : -1,
    };
  });

  let m;
  try {
    m = await (timeout ? Promise.race([work, timeout]) : work);
  } catch (e) {
    if (child && exitInfo === null) child.kill('SIGKILL');
    await exited;
    if (exitInfo && exitInfo.error) throw new Error(`cannot run agent: ${exitInfo.error}`);
    throw e;
  } finally {
    if (timer) clearTimeout(timer);
  }
  // connectWith closed the connection; close the agent's stdin and reap it.
  if (child) try { child.stdin.end(); } catch {}
  const kill = setTimeout(() => { if (child && exitInfo === null) child.kill('SIGKILL'); }, 5000);
  await exited;
  clearTimeout(kill);

  const round = (x, d) => Number(x.toFixed(d));
  return {
    impl,
    payload,
    turns,
    seconds: round(m.seconds, 3),
    rtps: round(turns / m.seconds, 1),
    mibps: round((turns * payload) / m.seconds / 1048576, 3),
    p50_us: round(m.p50, 1),
    p99_us: round(m.p99, 1),
    client_peak_rss_kib: peakRssKiB(process.pid),
    agent_peak_rss_kib: m.agentRss,
    agent_pid: child ? child.pid : -1,
    agent_exit: exitInfo && exitInfo.code,
  };
}

function usage(msg) {
  if (msg) process.stderr.write(`ts_client: ${msg}\n`);
  process.stderr.write('usage: node ts_client.mjs [--payload BYTES] [--turns N] [--warmup N] [--impl NAME] [--timeout SEC] (-- AGENT_CMD ARGS... | --url ws://HOST:PORT/acp | --url http://HOST:PORT/acp --http)\n');
  process.exit(2);
}

async function main() {
  const o = { payload: 5, turns: 20000, warmup: 0, impl: 'ts', timeoutSec: 0 };
  const argv = process.argv.slice(2);
  let cmd = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const num = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 0) usage(`bad value for ${a}`);
      return v;
    };
    if (a === '--') { cmd = argv.slice(i + 1); break; }
    else if (a === '--payload') o.payload = num();
    else if (a === '--turns') o.turns = num();
    else if (a === '--warmup') o.warmup = num();
    else if (a === '--timeout') o.timeoutSec = num();
    else if (a === '--impl') { if (i + 1 >= argv.length) usage('--impl needs a value'); o.impl = argv[++i]; }
    else if (a === '--url') { if (i + 1 >= argv.length) usage('--url needs a value'); o.url = argv[++i]; }
    else if (a === '--http') o.http = true;
    else usage(`unknown argument ${a}`);
  }
  if ((!cmd || cmd.length === 0) && !o.url) usage('missing agent command after -- (or --url URL)');
  if (o.turns < 1) usage('--turns must be >= 1');
  try {
    const r = await runBench({ cmd, ...o });
    process.stdout.write(JSON.stringify(r) + '\n');
    process.exit(0);
  } catch (e) {
    process.stderr.write(`ts_client: FAILED: ${e && e.message ? e.message : e}\n`);
    process.exit(1);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
