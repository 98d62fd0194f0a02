#!/usr/bin/env node
// report.mjs - print the table and the ours/theirs ratios for the JSON lines
// written by bench/run-turns.sh.
//
// Usage: node report.mjs FILE.jsonl
// A line whose "impl" is "ts" is the TypeScript SDK pair ("theirs"), "floor"
// is bench/uv_cat_floor (libuv <-> cat, the floor); any other impl is ours.
// Ours and the floor may come in rounds ("round": 1, 2, ...): the ratio
// ours/floor is the median of the rounds' ratios, and ours/theirs uses our
// median round (by rt/s). Exit 1 if the file holds no result or a bad line.
import { readFileSync } from 'node:fs';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node report.mjs FILE.jsonl\n');
  process.exit(2);
}
let bad = 0;
const rows = [];
for (const line of readFileSync(file, 'utf8').split('\n')) {
  if (!line.trim()) continue;
  try {
    const r = JSON.parse(line);
    if (typeof r !== 'object' || r === null || typeof r.payload !== 'number') throw new Error('not a result');
    rows.push(r);
  } catch {
    process.stderr.write(`report: ignoring bad line: ${line.slice(0, 200)}\n`);
    bad++;
  }
}
if (rows.length === 0) {
  process.stderr.write('report: no results\n');
  process.exit(1);
}

// "floor-block" is the same floor with a client that waits in read(2), not
// in epoll (uv_cat_floor --block): shown beside, not the target.
// "null-agent" is our client against bench/acp_null_agent (an agent that
// costs next to nothing): it splits ours over the floor into client and
// agent.
// "nospin" is ours with --read-spin-us 0 on both sides.
const others = ['ts', 'floor', 'floor-block', 'null-agent', 'nospin'];
const side = (r) => (others.includes(r.impl) ? r.impl : 'ours');
const mib = (kib) => (typeof kib === 'number' ? (kib / 1024).toFixed(1) : 'n/a');
const num = (x, d) => (typeof x === 'number' ? x.toFixed(d) : 'n/a');
const size = (b) => (b >= 1048576 && b % 1048576 === 0 ? `${b / 1048576} MiB` : b >= 1024 && b % 1024 === 0 ? `${b / 1024} KiB` : `${b} B`);

const head = ['impl', 'round', 'payload', 'turns', 'seconds', 'rt/s', 'MiB/s', 'p50 us', 'p99 us', 'client RSS MiB', 'agent RSS MiB'];
const table = [head];
for (const r of rows) {
  table.push([
    side(r) === 'ours' ? `ours(${r.impl})` : side(r),
    typeof r.round === 'number' ? String(r.round) : '-',
    size(r.payload),
    String(r.turns),
    num(r.seconds, 2),
    num(r.rtps, 0),
    num(r.mibps, 2),
    num(r.p50_us, 1),
    num(r.p99_us, 1),
    mib(r.client_peak_rss_kib),
    mib(r.agent_peak_rss_kib),
  ]);
}
const print = (t, left = [0]) => {
  const w = t[0].map((_, i) => Math.max(...t.map((row) => row[i].length)));
  for (const row of t) console.log(row.map((c, i) => (left.includes(i) ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  '));
};
print(table, [0, 2]);

// The lower middle of the numbers (as run-mcp-bridge.sh's median).
const median = (xs) => {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  return v.length ? v[Math.floor((v.length - 1) / 2)] : undefined;
};
// Our row with the median rt/s for a payload (the row compared with theirs).
const oursMedian = (p) => {
  const os = rows.filter((r) => r.payload === p && side(r) === 'ours').sort((a, b) => a.rtps - b.rtps);
  return os.length ? os[Math.floor((os.length - 1) / 2)] : undefined;
};
const ratio = (a, b) => (typeof a === 'number' && typeof b === 'number' && b !== 0 ? (a / b).toFixed(2) : 'n/a');
const rt = [['payload', 'rt/s', 'MiB/s', 'p50', 'p99', 'client RSS', 'agent RSS']];
for (const p of [...new Set(rows.map((r) => r.payload))]) {
  const o = oursMedian(p);
  const t = rows.find((r) => r.payload === p && side(r) === 'ts');
  if (!o || !t) continue;
  rt.push([
    size(p),
    ratio(o.rtps, t.rtps),
    ratio(o.mibps, t.mibps),
    ratio(o.p50_us, t.p50_us),
    ratio(o.p99_us, t.p99_us),
    ratio(o.client_peak_rss_kib, t.client_peak_rss_kib),
    ratio(o.agent_peak_rss_kib, t.agent_peak_rss_kib),
  ]);
}
console.log('');
if (rt.length > 1) {
  console.log('ratios ours/theirs (throughput: higher is better; latency and RSS: lower is better)');
  print(rt);
} else {
  console.log('ratios ours/theirs: n/a (need both ours and ts results for a payload)');
}
// Ours against the floor, round by round (the same round's floor run came
// right after ours). Targets from issue 11: 5 B rt/s >= 0.9x the floor,
// 64 KiB MiB/s >= 0.8x, 1 MiB MiB/s >= 0.6x.
const target = (p) => (p <= 5 ? ['rt/s', 0.9] : p <= 65536 ? ['MiB/s', 0.8] : ['MiB/s', 0.6]);
const ft = [['payload', 'rounds', 'floor rt/s', 'floor MiB/s', 'floor p50 us', 'rt/s', 'MiB/s', 'p50', 'target', 'rounds (rt/s ratio)', 'no spin rt/s', 'rt/s over floor-block', 'us/turn over floor: client', 'agent']];
// The round's run of ours without the read spin, if there is one.
const nospinOf = (p, o) => rows.find((r) => r.payload === p && r.impl === 'nospin' && r.round === o.round);
// The split, per round: a turn's time (1/rt/s) with the null agent over
// the floor's is our client's share (plus what the null agent costs over
// cat), ours over the null agent's is our agent's. Without the read spin
// on our side (the null agent never spins, and run-turns.sh runs our
// client against it with --read-spin-us 0): the round's nospin run where
// there is one.
const split = (p, o, f) => {
  const z = rows.find((r) => r.payload === p && side(r) === 'null-agent' && r.round === o.round);
  if (!z) return [NaN, NaN];
  const w = nospinOf(p, o) || o;
  return [1e6 / z.rtps - 1e6 / f.rtps, 1e6 / w.rtps - 1e6 / z.rtps];
};
for (const p of [...new Set(rows.map((r) => r.payload))]) {
  const pairs = [];
  for (const o of rows.filter((r) => r.payload === p && side(r) === 'ours')) {
    const f = rows.find((r) => r.payload === p && side(r) === 'floor' && r.round === o.round);
    if (f) pairs.push([o, f]);
  }
  if (pairs.length === 0) continue;
  const fs = pairs.map(([, f]) => f);
  const q = (k) => median(pairs.map(([o, f]) => o[k] / f[k]));
  const [tk, tv] = target(p);
  const got = tk === 'rt/s' ? q('rtps') : q('mibps');
  ft.push([
    size(p),
    String(pairs.length),
    num(median(fs.map((f) => f.rtps)), 0),
    num(median(fs.map((f) => f.mibps)), 2),
    num(median(fs.map((f) => f.p50_us)), 1),
    num(q('rtps'), 2),
    num(q('mibps'), 2),
    num(q('p50_us'), 2),
    `${tk} >= ${tv}: ${typeof got === 'number' && got >= tv ? 'met' : 'NOT met'}`,
    pairs.map(([o, f]) => (o.rtps / f.rtps).toFixed(2)).join(' '),
    num(median(pairs.map(([o, f]) => {
      const w = nospinOf(p, o);
      return w ? w.rtps / f.rtps : NaN;
    })), 2),
    num(median(pairs.map(([o]) => {
      const b = rows.find((r) => r.payload === p && side(r) === 'floor-block' && r.round === o.round);
      return b ? o.rtps / b.rtps : NaN;
    })), 2),
    num(median(pairs.map(([o, f]) => split(p, o, f)[0])), 2),
    num(median(pairs.map(([o, f]) => split(p, o, f)[1])), 2),
  ]);
}
console.log('');
if (ft.length > 1) {
  console.log('floor (bench/uv_cat_floor: libuv <-> cat, same lines) and ours/floor, median of alternating rounds');
  print(ft, [0, 8]);
} else {
  console.log('ours/floor: n/a (need ours and floor results for a payload)');
}
console.log('');
console.log('reference (issue) for the TS pair: 5,096 rt/s and 126 us median at 5 B; 28 MiB/s at 1 MiB; ~104-149 MiB peak RSS per process');
process.exit(bad ? 1 : 0);
