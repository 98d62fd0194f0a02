// Summarize conformance results: every checks.json under the given
// directories (one per scenario run) -> one line per scenario and a total.
// A scenario fails when any of its checks has status FAILURE.
// Usage: node summarize.mjs LABEL DIR...
import fs from "node:fs";
import path from "node:path";

const [label, ...rawDirs] = process.argv.slice(2);
const dirs = rawDirs.map((d) => path.resolve(d));
const found = [];
function walk(d) {
  let ents = [];
  try { ents = fs.readdirSync(d, { withFileTypes: true }); } catch { return; }
  for (const e of ents) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name === "checks.json") found.push(p);
  }
}
dirs.forEach(walk);
const rows = [];
for (const f of found.sort()) {
  let checks = [];
  try { checks = JSON.parse(fs.readFileSync(f, "utf8")); } catch { continue; }
  // <out>/[server-]<scenario>-<ISO timestamp>/checks.json; auth scenarios
  // nest one level deeper (auth/<name>-<ts>).
  const rel = path.relative(dirs.find((d) => f.startsWith(d + path.sep)) ?? dirs[0], path.dirname(f));
  const name = rel.replace(/^server-/, "").replace(/-\d{4}-\d\d-\d\dT[\d-]+(\.\d+)?Z?$/, "");
  const failed = checks.filter((c) => c.status === "FAILURE");
  const warned = checks.filter((c) => c.status === "WARNING");
  rows.push({ name, ok: failed.length === 0, checks: checks.length, failed, warned });
}
let pass = 0, fail = 0;
for (const r of rows) {
  r.ok ? pass++ : fail++;
  const extra = r.failed.map((c) => `${c.id}: ${c.errorMessage ?? ""}`.slice(0, 200)).join("; ");
  const warn = r.warned.length ? ` (${r.warned.length} warning(s))` : "";
  console.log(`  ${r.ok ? "PASS" : "FAIL"} ${r.name} [${r.checks} checks]${warn}${extra ? " -- " + extra : ""}`);
}
console.log(`${label}: scenarios ${pass} passed, ${fail} failed`);
