#!/usr/bin/env node
// The one table of `make bench` (bench/README.md, "The table"): every
// workload with ours, its floor, its peer, ours/floor, ours/peer and our
// peak RSS, gathered from the machine-readable lines the bench scripts
// wrote in one run:
//   DIR/turns.jsonl   bench/run-turns.sh --out
//   DIR/turns-pinned.jsonl   bench/run-turns.sh --pin CPU --out
//   DIR/mcp.jsonl     bench/run-mcp.sh --out
//   DIR/mcp-2026.jsonl bench/run-mcp-2026.sh --out
//   DIR/bridge.log    bench/run-mcp-bridge.sh's output (its JSON lines)
//   DIR/remote.jsonl  bench/run-remote.sh --out
//   DIR/idle.jsonl    bench/idle-conns.mjs --out
// A file that is missing (a script skipped) leaves its rows out.
// Usage: node bench/summary.mjs DIR [--json]  (--json: one JSON line a row)
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
const asJson = process.argv.includes("--json");
if (!dir) {
  console.error("usage: node bench/summary.mjs DIR [--json]");
  process.exit(2);
}
const jsonLines = (name) => {
  const p = join(dir, name);
  if (!existsSync(p)) return [];
  return readFileSync(p, "utf8").split("\n").filter((l) => l.startsWith("{"))
    .map((l) => { try { return JSON.parse(l); } catch { return null; } }).filter(Boolean);
};
// The lower middle (as the scripts' own medians).
const median = (xs) => {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return v.length ? v[Math.floor((v.length - 1) / 2)] : undefined;
};
// The run with the median value of `key` among `runs`.
const medianRun = (runs, key) => {
  const v = runs.filter((r) => Number.isFinite(r[key])).sort((a, b) => a[key] - b[key]);
  return v.length ? v[Math.floor((v.length - 1) / 2)] : undefined;
};
// Median over rounds of ours/floor, pairing each round of ours with the
// floor's run of the same round.
const roundRatio = (ours, floors, key) => median(ours.filter((o) => o.round).map((o) => {
  const fl = floors.find((x) => x.round === o.round);
  return fl ? o[key] / fl[key] : NaN;
}));

const rows = [];
const row = (workload, unit, ours, floor, peer, overFloor, overPeer, rss, notes) =>
  rows.push({ workload, unit, ours, floor, peer, ours_over_floor: overFloor, ours_over_peer: overPeer, rss_mib: rss, notes });
const mib = (k) => (k == null ? undefined : k / 1024);

// CPU (user + system) of both processes a round trip, median over runs
// (acp bench-client and uv_cat_floor report whole runs).
const cpuPer = (runs) => median(runs.map((r) => {
  const a = r.client_cpu_us, b = r.agent_cpu_us ?? r.server_cpu_us, n = r.turns ?? r.calls;
  return Number.isFinite(a) && Number.isFinite(b) && n > 0 ? (a + b) / n : NaN;
}));

// Prompt turns: 5 B in round trips/s, larger payloads in MiB/s.
// turns-pinned.jsonl (run-turns.sh --pin CPU): the same with both processes
// of ours and of the floor on one CPU, the cheap wake-ups.
const turnRows = (turns, pinned) => {
  for (const p of [...new Set(turns.map((t) => t.payload))].sort((a, b) => a - b)) {
    const key = p >= 65536 ? "mibps" : "rtps";
    const unit = p >= 65536 ? "MiB/s" : "rt/s";
    const at = turns.filter((t) => t.payload === p);
    const ours = at.filter((t) => !["ts", "floor", "floor-block", "null-agent", "nospin"].includes(t.impl));
    const nospin = at.filter((t) => t.impl === "nospin");
    const floors = at.filter((t) => t.impl === "floor");
    const blocks = at.filter((t) => t.impl === "floor-block");
    const nulls = at.filter((t) => t.impl === "null-agent");
    const overBlock = roundRatio(ours, blocks, key);
    // Our time per turn over the floor's, split (medians over rounds): our
    // client against bench/acp_null_agent over the floor, ours over that;
    // ours without the read spin where that ran (the null agent never
    // spins; our client runs against it with --read-spin-us 0).
    const perRound = (f) => median(ours.filter((o) => o.round).map((o) => {
      const fl = floors.find((x) => x.round === o.round), z = nulls.find((x) => x.round === o.round);
      const w = nospin.find((x) => x.round === o.round) ?? o;
      return fl && z ? f(1e6 / w.rtps, 1e6 / z.rtps, 1e6 / fl.rtps) : NaN;
    }));
    const clientUs = perRound((o, z, fl) => z - fl), agentUs = perRound((o, z) => o - z);
    const ts = at.find((t) => t.impl === "ts");
    const o = medianRun(ours, key), fl = medianRun(floors, key);
    if (!o && !ts) continue;
    const name = p >= 1048576 ? `${p / 1048576} MiB` : p >= 1024 ? `${p / 1024} KiB` : `${p} B`;
    row(`prompt turn ${name}${pinned ? ", both on one CPU" : ""}`, unit, o?.[key], fl?.[key], ts?.[key], roundRatio(ours, floors, key),
      o && ts ? o[key] / ts[key] : undefined,
      o ? Math.max(mib(o.client_peak_rss_kib) ?? 0, mib(o.agent_peak_rss_kib) ?? 0) : undefined,
      (pinned ? "taskset: client, agent and the floor's two on one CPU; floor: libuv <-> cat"
        : "floor: libuv <-> cat; peer: TS SDK pair") + "; RSS: larger of client, agent" +
        (overBlock !== undefined ? `; ours/floor-block (a client waiting in read(2), no loop) ${overBlock.toFixed(2)}` : "") +
        // Only where wake-ups are cheap: at ~45 us a wake-up the shares
        // (about 1 us) drown in the rounds' noise.
        (pinned && clientUs !== undefined && agentUs !== undefined
          ? `; our time over the floor's, us/turn: client ${clientUs.toFixed(2)}, agent ${agentUs.toFixed(2)} (our client against bench/acp_null_agent)`
          : "") +
        (o?.client_file_rss_kib != null
          ? `; of it mapped files (program and shared libraries): client ${o.client_file_rss_kib}, agent ${o.agent_file_rss_kib} KiB`
          : ""));
    if (o?.client_file_rss_kib != null && o.agent_file_rss_kib != null)
      rows[rows.length - 1].rss_own_mib = Math.max(mib(o.client_peak_rss_kib - o.client_file_rss_kib),
        mib(o.agent_peak_rss_kib - o.agent_file_rss_kib));
    const cpuOurs = cpuPer(ours), cpuFloor = cpuPer(floors);
    if (cpuOurs !== undefined)
      rows[rows.length - 1].notes += `; CPU us/turn (client + agent, median of rounds): ours ${cpuOurs.toFixed(1)}` +
        (cpuFloor !== undefined ? `, floor ${cpuFloor.toFixed(1)}` : "");
    // Ours with --read-spin-us 0 on both sides (run-turns.sh).
    const n = medianRun(nospin, key);
    if (n) {
      const cpuN = cpuPer(nospin);
      row("... without the read spin (--read-spin-us 0)", unit, n[key], fl?.[key], ts?.[key], roundRatio(nospin, floors, key),
        ts ? n[key] / ts[key] : undefined,
        Math.max(mib(n.client_peak_rss_kib) ?? 0, mib(n.agent_peak_rss_kib) ?? 0),
        "ours with the spin before each blocking read off on both sides" +
          (cpuN !== undefined ? `; CPU us/turn (client + agent): ${cpuN.toFixed(1)}` : ""));
    }
  }
};
turnRows(jsonLines("turns.jsonl"), false);
turnRows(jsonLines("turns-pinned.jsonl"), true);

// MCP: stdio sequential, stdio pipelined, Streamable HTTP.
const mcp = jsonLines("mcp.jsonl");
for (const [t, name, key, unit, note] of [
  ["stdio", "MCP stdio tools/call, sequential", "rtps", "rt/s", "floor: mcp_null_server"],
  ["stdio_pipelined", "MCP stdio tools/call, 64 in flight", "rtps", "rt/s", "floor: mcp_null_server"],
  ["http", "MCP HTTP tools/call, 64 conns", "rps", "req/s", "floor: http_floor"],
]) {
  const at = mcp.filter((l) => l.transport === t);
  const ours = at.filter((l) => l.impl === "ours"), floors = at.filter((l) => l.impl === "floor");
  const o = medianRun(ours, key), fl = medianRun(floors, key), s = medianRun(at.filter((l) => l.impl === "theirs"), key);
  if (!o && !s) continue;
  const inRounds = ours.some((x) => x.round);
  const cpuO = cpuPer(ours), cpuF = cpuPer(floors);
  row(name, unit, o?.[key], fl?.[key], s?.[key],
    inRounds ? roundRatio(ours, floors, key) : o && fl ? o[key] / fl[key] : undefined,
    o && s ? o[key] / s[key] : undefined, mib(o?.server_peak_rss_kib), `${note}; peer: server-everything` +
      (cpuO !== undefined ? `; CPU us/call (client + server, warm-up included): ours ${cpuO.toFixed(1)}` +
        (cpuF !== undefined ? `, floor ${cpuF.toFixed(1)}` : "") : ""));
  const nospin = at.filter((l) => l.impl === "nospin"), n = medianRun(nospin, key);
  if (n) {
    const cpuN = cpuPer(nospin);
    row("... without the read spin (--read-spin-us 0)", unit, n[key], fl?.[key], s?.[key], roundRatio(nospin, floors, key),
      s ? n[key] / s[key] : undefined, mib(n.server_peak_rss_kib),
      "our server with the spin before each blocking read off" +
        (cpuN !== undefined ? `; CPU us/call (client + server): ${cpuN.toFixed(1)}` : ""));
  }
}

// MCP 2026-07-28 stateless HTTP: one process, --workers 2, nginx + 2
// workers, each against the @modelcontextprotocol/server 2.4.0 server.
const m26 = jsonLines("mcp-2026.jsonl");
{
  const s = medianRun(m26.filter((l) => l.impl === "theirs"), "rps");
  const one = medianRun(m26.filter((l) => l.impl === "ours"), "rps");
  for (const [impl, name] of [
    ["ours", "MCP HTTP 2026 stateless tools/call, 64 conns"],
    ["workers2", "... acp mcp serve --workers 2"],
    ["nginx2", "... nginx + 2 workers"],
  ]) {
    const o = medianRun(m26.filter((l) => l.impl === impl), "rps");
    if (!o && !(impl === "ours" && s)) continue;
    row(name, "req/s", o?.rps, undefined, s?.rps, undefined, o && s ? o.rps / s.rps : undefined,
      mib(o?.server_peak_rss_kib),
      impl === "ours" ? "peer: @modelcontextprotocol/server 2.4.0; RSS: all processes" +
        (o && s ? `; peer RSS ${(mib(s.server_peak_rss_kib) ?? 0).toFixed(1)} MiB` : "")
        : `over one process: ${o && one ? (o.rps / one.rps).toFixed(2) : "n/a"}x; RSS: all processes`);
  }
}

// The MCP-over-ACP bridge: p50 latency, lower is better.
const bridge = jsonLines("bridge.log");
const runs = bridge.filter((l) => l.impl === "bridge");
const bf = bridge.find((l) => l.bridge_over_floor_p50 !== undefined);
const bp = bridge.find((l) => l.bridge_over_plain_p50 !== undefined);
if (runs.length) {
  const o = medianRun(runs, "p50_us"), fl = medianRun(bridge.filter((l) => l.impl === "relay-null"), "p50_us");
  row("MCP-over-ACP bridge tools/call p50", "us (lower is better)", o?.p50_us, fl?.p50_us, undefined,
    bf?.bridge_over_floor_p50, undefined, mib(o?.server_peak_rss_kib),
    `floor: four-pipe null path; bridge/plain stdio p50 ${bp ? bp.bridge_over_plain_p50 : "n/a"}`);
}

// Remote ACP: prompt turns over WebSocket and over Streamable HTTP, ours
// (acp bench-client --url <-> acp serve) against the TS SDK pair; the floor
// is our own stdio turn, so ours/floor is what the network hop costs.
const remote = jsonLines("remote.jsonl").filter((l) => !l.failed);
const sizeName = (p) => (p >= 1048576 ? `${p / 1048576} MiB` : p >= 1024 ? `${p / 1024} KiB` : `${p} B`);
for (const p of [...new Set(remote.map((t) => t.payload))].sort((a, b) => a - b)) {
  const key = p >= 65536 ? "mibps" : "rtps";
  const unit = p >= 65536 ? "MiB/s" : "rt/s";
  const at = remote.filter((t) => t.payload === p);
  const s = at.find((t) => t.impl === "stdio");
  for (const prof of ["ws", "http"]) {
    const o = at.find((t) => t.impl === `ours-${prof}`), t = at.find((x) => x.impl === `ts-${prof}`);
    const name = prof === "ws" ? "WebSocket" : "Streamable HTTP";
    const kib = (x) => (x != null && x >= 0 ? `${(x / 1024).toFixed(1)}` : "n/a");
    if (o || t)
      row(`remote ${name} turn ${sizeName(p)}`, unit, o?.[key], s?.[key], t?.[key],
        o && s ? o[key] / s[key] : undefined, o && t ? o[key] / t[key] : undefined, mib(o?.server_peak_rss_kib),
        `floor: our stdio turn (the hop's cost); peer: TS SDK ${prof}-client <-> experimental/server; ` +
        `RSS MiB server ours ${kib(o?.server_peak_rss_kib)} (+agent ${kib(o?.server_agent_peak_rss_kib)}) vs ts ${kib(t?.server_peak_rss_kib)}, ` +
        `client ours ${kib(o?.client_peak_rss_kib)} vs ts ${kib(t?.client_peak_rss_kib)}`);
    // acp serve --no-handoff: every byte relayed through serve (the main
    // row above is the default: the agent adopts the WebSocket).
    const h = at.find((x) => x.impl === `ours-${prof}-relay`);
    if (h)
      row(`remote ${name} turn ${sizeName(p)}, acp serve --no-handoff`, unit, h[key], s?.[key], t?.[key],
        s ? h[key] / s[key] : undefined, t ? h[key] / t[key] : undefined, mib(h.server_peak_rss_kib),
        `ours: acp serve --no-handoff -- acp agent --echo (serve relays every byte, as for any stdio agent; ` +
        `serve CPU ${h.server_cpu_us} us, agent ${h.server_agent_cpu_us} us); peer: the same TS SDK pair`);
    // The same shape as the SDK server: the agent inside the server
    // process (bench/remote_echo_serve), beside the acp serve row above.
    const i = at.find((x) => x.impl === `ours-${prof}-inproc`);
    if (i)
      row(`remote ${name} turn ${sizeName(p)}, agent in process`, unit, i[key], s?.[key], t?.[key],
        s ? i[key] / s[key] : undefined, t ? i[key] / t[key] : undefined, mib(i.server_peak_rss_kib),
        `ours: bench/remote_echo_serve (echo agent inside the server, as the SDK's experimental/server); ` +
        `floor: our stdio turn; peer: the same TS SDK pair as the row above`);
  }
}

// Idle connections held by acp serve: its own RSS growth per connection.
for (const l of jsonLines("idle.jsonl").filter((x) => x.per_conn_kib !== undefined)) {
  row(`acp serve: ${l.conns} idle ${l.profile === "ws" ? "WebSocket" : "Streamable HTTP"} connections`, "KiB/conn",
    l.per_conn_kib, undefined, undefined, undefined, undefined, mib(l.rss_after_kib),
    `acp serve's own RSS ${l.rss_before_kib} -> ${l.rss_after_kib} KiB (agents not counted); target < 64 KiB/conn`);
}

if (asJson) {
  for (const r of rows) console.log(JSON.stringify(r));
  process.exit(0);
}
const f = (x, d = 0) => (x == null || !Number.isFinite(x) ? "n/a" : Number(x).toFixed(d));
const cols = ["workload", "unit", "ours", "floor", "peer", "ours/floor", "ours/peer", "RSS MiB"];
const table = rows.map((r) => [r.workload, r.unit, f(r.ours, r.ours < 100 ? 1 : 0), f(r.floor, r.floor < 100 ? 1 : 0),
  f(r.peer, r.peer < 100 ? 1 : 0), f(r.ours_over_floor, 2), f(r.ours_over_peer, 1),
  f(r.rss_mib, 1) + (r.rss_own_mib != null ? ` (own ${f(r.rss_own_mib, 1)})` : "")]);
const w = cols.map((c, i) => Math.max(c.length, ...table.map((t) => t[i].length)));
const line = (cells) => "| " + cells.map((c, i) => (i < 2 ? c.padEnd(w[i]) : c.padStart(w[i]))).join(" | ") + " |";
console.log("\n== make bench: one table (ours/floor: median of alternating rounds; rates: above 1 is faster, p50: below 1 is faster) ==");
console.log(line(cols));
console.log("|" + w.map((n, i) => (i < 2 ? "-" : "").padEnd(n + 1, "-") + (i < 2 ? "-" : ":")).join("|") + "|");
for (const t of table) console.log(line(t));
for (const r of rows) if (r.notes) console.log(`  ${r.workload}: ${r.notes}`);
