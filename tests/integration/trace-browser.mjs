// trace-browser.mjs - load pages written by `acp trace --html` in headless
// Chromium, driven through its own DevTools protocol (no npm package: Node's
// fetch and WebSocket), and check what a person would see.
//
// usage: node trace-browser.mjs CHROMIUM CHAIN.html EXPECT.json BIG.html OUTDIR
// EXPECT.json: {"lanes": [...], "messages": N, "method": "session/new",
//               "methodCount": M}
// Prints PASS/FAIL lines and the load time of BIG.html; exits 1 on failure.
// Screenshots go to OUTDIR (trace-chain.png, trace-open.png, trace-big.png).
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [chromium, chainPage, expectFile, bigPage, outDir] = process.argv.slice(2);
const expect = JSON.parse(fs.readFileSync(expectFile, "utf8"));
let failed = 0;
const ok = (name) => console.log(`PASS ${name}`);
const ko = (name, detail) => {
  failed++;
  console.log(`FAIL ${name}`);
  if (detail !== undefined) console.log(`     ${JSON.stringify(detail).slice(0, 1500)}`);
};
const check = (name, cond, detail) => (cond ? ok(name) : ko(name, detail));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "acp-trace-chromium-"));
const browser = spawn(chromium, [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
  "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
  "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
  `--user-data-dir=${profile}`, "--window-size=1400,1100", "about:blank",
], { stdio: ["ignore", "ignore", "pipe"] });
let stderr = "";
const wsUrl = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`chromium did not start: ${stderr}`)), 30000);
  browser.stderr.on("data", (d) => {
    stderr += d;
    const m = /DevTools listening on (ws:\/\/\S+)/.exec(stderr);
    if (m) { clearTimeout(timer); resolve(m[1]); }
  });
  browser.on("exit", (c) => reject(new Error(`chromium exited ${c}: ${stderr}`)));
});
const port = new URL(wsUrl).port;

async function cleanup() {
  browser.kill("SIGTERM");
  await sleep(300);
  if (browser.exitCode === null) browser.kill("SIGKILL");
  // Chromium's helper processes may still be writing the profile for a
  // moment after it exits (seen on a loaded machine: ENOTEMPTY): wait for
  // the exit, then retry the removal.
  for (let i = 0; i < 50 && browser.exitCode === null && browser.signalCode === null; i++)
    await sleep(100);
  fs.rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
}

let pages;
for (let i = 0; i < 50; i++) {
  pages = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json())
    .filter((t) => t.type === "page");
  if (pages.length) break;
  await sleep(100);
}
const ws = new WebSocket(pages[0].webSocketDebuggerUrl);
await new Promise((r, j) => { ws.onopen = r; ws.onerror = j; });
let nextId = 1;
const waiting = new Map();
const listeners = [];
const consoleErrors = [];
ws.onmessage = (ev) => {
  const msg = JSON.parse(ev.data);
  if (msg.id && waiting.has(msg.id)) {
    const { resolve, reject } = waiting.get(msg.id);
    waiting.delete(msg.id);
    if (msg.error) reject(new Error(JSON.stringify(msg.error)));
    else resolve(msg.result);
    return;
  }
  if (msg.method === "Runtime.exceptionThrown")
    consoleErrors.push(msg.params.exceptionDetails.exception?.description ??
      msg.params.exceptionDetails.text);
  if (msg.method === "Runtime.consoleAPICalled" &&
      (msg.params.type === "error" || msg.params.type === "assert"))
    consoleErrors.push(msg.params.args.map((a) => a.value ?? a.description).join(" "));
  if (msg.method === "Log.entryAdded" && msg.params.entry.level === "error")
    consoleErrors.push(msg.params.entry.text);
  for (const l of listeners.slice()) l(msg);
};
const send = (method, params = {}) => new Promise((resolve, reject) => {
  const id = nextId++;
  waiting.set(id, { resolve, reject });
  ws.send(JSON.stringify({ id, method, params }));
});
const once = (method) => new Promise((resolve) => {
  const l = (msg) => {
    if (msg.method === method) {
      listeners.splice(listeners.indexOf(l), 1);
      resolve(msg.params);
    }
  };
  listeners.push(l);
});
async function evaluate(expression) {
  const r = await send("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true });
  if (r.exceptionDetails) throw new Error(`${expression}: ${r.exceptionDetails.exception?.description}`);
  return r.result.value;
}
async function navigate(file) {
  const loaded = once("Page.loadEventFired");
  const t0 = performance.now();
  await send("Page.navigate", { url: `file://${path.resolve(file)}` });
  await loaded;
  return performance.now() - t0;
}
async function screenshot(name) {
  const { data } = await send("Page.captureScreenshot", { format: "png" });
  fs.writeFileSync(path.join(outDir, name), Buffer.from(data, "base64"));
}
async function click(selector) {
  const box = await evaluate(`(() => { const e = document.querySelector(${JSON.stringify(selector)});
    if (!e) return null; e.scrollIntoView({block: "center"}); const r = e.getBoundingClientRect();
    return {x: r.left + Math.min(r.width / 2, 400), y: r.top + r.height / 2}; })()`);
  if (!box) throw new Error(`nothing to click: ${selector}`);
  for (const type of ["mousePressed", "mouseReleased"])
    await send("Input.dispatchMouseEvent", { type, x: box.x, y: box.y, button: "left", clickCount: 1 });
}

try {
  await send("Runtime.enable");
  await send("Log.enable");
  await send("Page.enable");
  await send("Emulation.setDeviceMetricsOverride",
    { width: 1400, height: 1100, deviceScaleFactor: 1, mobile: false });

  // ---- a recorded chain ---------------------------------------------------
  await navigate(chainPage);
  await evaluate("new Promise(r => requestAnimationFrame(() => r(1)))");
  check("chain page: loads with no console error", consoleErrors.length === 0, consoleErrors);
  const lanes = await evaluate("[...document.querySelectorAll('#lanes .lane')].map(e => e.textContent)");
  check("chain page: one lane per component, in chain order",
    JSON.stringify(lanes) === JSON.stringify(expect.lanes), { lanes, want: expect.lanes });
  const arrows = await evaluate("document.querySelectorAll('#space .row .arrow').length");
  const rows = await evaluate("acpTrace.rows");
  check("chain page: one arrow per message", arrows === expect.messages && rows === expect.messages,
    { arrows, rows, want: expect.messages });
  await screenshot("trace-chain.png");

  // Click the client's session/prompt: it opens with its exact bytes and
  // its response is highlighted; the button jumps to the response.
  const req = await evaluate(`acpTrace.rowOf(r => r.kind === "request" &&
    r.method === "session/prompt" && r.from === ${JSON.stringify(expect.lanes[0])})`);
  const resp = await evaluate(`acpTrace.pairOf(${req})`);
  await click(`#space .row[data-i="${req}"] .arrow`);
  const after = await evaluate(`({
    sel: [...document.querySelectorAll('#space .row.sel')].map(e => +e.dataset.i),
    pair: [...document.querySelectorAll('#space .row.pair')].map(e => +e.dataset.i),
    bytes: document.querySelector('#space .row.sel .open-box pre.exact')?.textContent,
    raw: acpTrace.raw(${req}),
    go: document.querySelector('#space .row.sel button[data-go]')?.dataset.go })`);
  check("click a request: it opens to its exact bytes",
    after.bytes !== undefined && after.bytes === after.raw, after);
  check("click a request: its response is highlighted",
    resp > req && JSON.stringify(after.sel) === JSON.stringify([req]) &&
    JSON.stringify(after.pair) === JSON.stringify([resp]) && +after.go === resp, { req, resp, after });
  await screenshot("trace-open.png");
  await click(`#space .row[data-i="${req}"] button[data-go]`);
  const moved = await evaluate(`({
    sel: [...document.querySelectorAll('#space .row.sel')].map(e => +e.dataset.i),
    pair: [...document.querySelectorAll('#space .row.pair')].map(e => +e.dataset.i),
    kind: document.querySelector('#space .row.sel .open-box .meta b')?.textContent })`);
  check("the response links back: selected, request highlighted",
    JSON.stringify(moved.sel) === JSON.stringify([resp]) &&
    JSON.stringify(moved.pair) === JSON.stringify([req]) && moved.kind === "result", moved);

  // Filters: by method, then by session.
  const filtered = await evaluate(`(() => {
    const s = document.getElementById('f-method');
    s.value = [...s.options].find(o => o.textContent.startsWith(${JSON.stringify(expect.method + " (")})).value;
    s.dispatchEvent(new Event('change'));
    return { shown: acpTrace.shown(), count: document.getElementById('count').textContent,
      labels: [...document.querySelectorAll('#space .row .lbl')].map(e => e.textContent) };
  })()`);
  check("filter by method: only its requests and responses",
    filtered.shown === expect.methodCount && filtered.labels.length === expect.methodCount &&
    filtered.labels.every((l) => l.includes(expect.method)) &&
    filtered.count === `${expect.methodCount} of ${expect.messages} messages`, filtered);
  const bySession = await evaluate(`(() => {
    const m = document.getElementById('f-method'); m.value = "-1";
    const s = document.getElementById('f-session');
    s.value = [...s.options].find(o => o.textContent.startsWith(${JSON.stringify(expect.session + " (")})).value;
    s.dispatchEvent(new Event('change'));
    return { shown: acpTrace.shown(), rows: document.querySelectorAll('#space .row').length };
  })()`);
  check("filter by session: its messages, initialize left out",
    bySession.shown === expect.sessionMessages && bySession.rows <= expect.sessionMessages,
    { bySession, want: expect.sessionMessages });
  check("chain page: still no console error", consoleErrors.length === 0, consoleErrors);

  // ---- 100,000 messages ----------------------------------------------------
  consoleErrors.length = 0;
  const wall = await navigate(bigPage);
  const big = await evaluate(`new Promise(r => requestAnimationFrame(() => r({
    ready: acpTrace.ready, rows: acpTrace.rows,
    dom: document.querySelectorAll('#space .row').length })))`);
  console.log(`100,000-message page: script done ${big.ready.toFixed(0)} ms after navigation start, ` +
    `load event after ${wall.toFixed(0)} ms (wall clock, ${fs.statSync(bigPage).size} bytes)`);
  check("big page: loads with no console error", consoleErrors.length === 0, consoleErrors);
  check("big page: 100,000 messages, only the visible rows in the DOM",
    big.rows === 100000 && big.dom > 10 && big.dom < 200, big);
  const end = await evaluate(`(() => { acpTrace.scrollTo(99999);
    return { last: !!document.querySelector('#space .row[data-i="99999"]'),
      dom: document.querySelectorAll('#space .row').length }; })()`);
  check("big page: scrolls to the last message", end.last && end.dom < 200, end);
  await screenshot("trace-big.png");
} catch (e) {
  ko("browser session", String(e && e.stack || e));
} finally {
  ws.close();
  await cleanup();
}
process.exit(failed ? 1 : 0);
