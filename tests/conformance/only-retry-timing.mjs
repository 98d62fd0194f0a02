// Exit 0 when the only checks of a client run (every checks.json under DIR)
// that are not SUCCESS/INFO are sse-retry's timing WARNING: the suite runs
// its scenarios in parallel (26 clients at once, several doing RSA/EC
// signatures), and on a 2-core machine under ASan our reconnection, ~503 ms
// for the server's `retry: 500` when run alone, was seen at 711 ms, past
// the check's 200 ms late tolerance. The suite itself calls a slightly late
// reconnect "acceptable" and makes it a WARNING; too early or very late
// (over twice the retry) stay FAILUREs and are never tolerated here.
// Prints what it tolerated. Usage: node only-retry-timing.mjs DIR [EF.yml]
// With EF.yml (the run's expected failures) that lists any scenario, it
// tolerates nothing: the suite also exits non-zero for a listed scenario
// that passes (a stale entry), and a retry warning must not hide that.
import fs from "node:fs";
import path from "node:path";

if (process.argv[3]) {
  const ef = fs.readFileSync(process.argv[3], "utf8")
    .split("\n").map((l) => l.replace(/#.*/, ""));
  const listed = ef.some((l) => /^\s*-\s*\S/.test(l) || /:\s*\[\s*[^\]\s]/.test(l));
  if (listed) {
    console.log(`not tolerating: ${process.argv[3]} lists expected failures`);
    process.exit(1);
  }
}

const found = [];
(function walk(d) {
  let ents = [];
  try { ents = fs.readdirSync(d, { withFileTypes: true }); } catch { return; }
  for (const e of ents) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name === "checks.json") found.push(p);
  }
})(path.resolve(process.argv[2]));
if (found.length === 0) process.exit(1);
let tolerated = 0;
for (const f of found) {
  let checks;
  try { checks = JSON.parse(fs.readFileSync(f, "utf8")); } catch { process.exit(1); }
  for (const c of checks) {
    if (c.status === "SUCCESS" || c.status === "INFO") continue;
    if (c.status === "WARNING" && c.id === "client-sse-retry-timing" &&
        c.details && c.details.tooEarly === false && c.details.veryLate === false) {
      console.log(`tolerated: sse-retry reconnect after ${c.details.actualDelayMs} ms ` +
                  `(retry ${c.details.expectedRetryMs} ms; scenarios run in parallel)`);
      tolerated++;
      continue;
    }
    process.exit(1);
  }
}
process.exit(tolerated > 0 ? 0 : 1);
