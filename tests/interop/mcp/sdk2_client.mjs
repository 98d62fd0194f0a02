// The MCP TypeScript SDK v2 client (@modelcontextprotocol/client 2.4.0)
// driving `acp mcp serve --everything` at 2026-07-28 (stateless, per-request
// _meta), pinned so that no fallback to a 2025 session can hide a failure.
//
//   node sdk2_client.mjs stdio CMD [ARGS...]   (spawns the server)
//   node sdk2_client.mjs http URL              (Streamable HTTP)
//
// Lists tools, calls one, reads a resource, gets a prompt, and checks the
// 2026 results (era, server identity); then multi round-trip tools and a
// prompt whose input requests the SDK fulfils through its handlers and
// retries (one round, two rounds, three inputs at once). Prints one line per
// check; exit 0 when all passed, 1 otherwise. Resolves the SDK from
// MCP_SDK_DIR (the installed node_modules).
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.MCP_SDK_DIR;
if (!sdkDir) {
  console.error("sdk2_client: MCP_SDK_DIR is not set");
  process.exit(2);
}
const pkg = (p) =>
  import(pathToFileURL(path.join(sdkDir, "@modelcontextprotocol/client/dist", p)).href);
const { Client, StreamableHTTPClientTransport } = await pkg("index.mjs");
const { StdioClientTransport } = await pkg("stdio.mjs");

const [mode, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]));
} else {
  console.error("usage: sdk2_client.mjs stdio CMD ARGS... | http URL");
  process.exit(2);
}

let failures = 0;
let passes = 0;
function check(name, ok, detail) {
  if (ok) passes++;
  else failures++;
  console.log(`${ok ? "ok  " : "FAIL"} ${mode} ${name}${!ok && detail !== undefined ? ": " + JSON.stringify(detail).slice(0, 400) : ""}`);
}
async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    check(name, false, String(e?.message ?? e));
  }
}
const text = (r) => (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");

const client = new Client(
  { name: "libacp-interop-sdk2-client", version: "1.0.0" },
  {
    capabilities: { elicitation: {}, sampling: {}, roots: {} },
    versionNegotiation: { mode: { pin: "2026-07-28" } },
  },
);
// Input requests of multi round-trip results reach these handlers; the SDK
// retries the call with the answers and the server's requestState.
client.setRequestHandler("elicitation/create", async (req) => ({
  action: "accept",
  content: req.params.message.includes("color")
    ? { color: "teal" }
    : req.params.message.includes("context")
      ? { context: "from the SDK" }
      : { name: "Sdk" },
}));
client.setRequestHandler("sampling/createMessage", async () => ({
  role: "assistant",
  content: { type: "text", text: "Paris" },
  model: "sdk-model",
  stopReason: "endTurn",
}));
client.setRequestHandler("roots/list", async () => ({ roots: [{ uri: "file:///sdk", name: "sdk" }] }));

const deadline = setTimeout(() => {
  console.log(`FAIL ${mode} timeout after 30 s`);
  process.exit(1);
}, 30000);

await step("connect", async () => {
  await client.connect(transport);
  check("era is 2026-07-28",
    client.getNegotiatedProtocolVersion() === "2026-07-28" && client.getProtocolEra() !== "legacy",
    { version: client.getNegotiatedProtocolVersion(), era: client.getProtocolEra() });
  check("server identity", client.getServerVersion()?.name === "acp-mcp", client.getServerVersion());
  const caps = client.getServerCapabilities();
  check("capabilities", !!caps?.tools && !!caps?.resources && !!caps?.prompts, caps);
});

await step("tools/list", async () => {
  const r = await client.listTools();
  const names = r.tools.map((t) => t.name);
  check("tools/list", names.includes("test_simple_text") && names.includes("echo"), names);
  const again = await client.listTools();
  check("tools/list order is stable",
    JSON.stringify(again.tools.map((t) => t.name)) === JSON.stringify(names));
});

await step("tools/call", async () => {
  const r = await client.callTool({ name: "echo", arguments: { message: "from sdk v2" } });
  check("tools/call echo", text(r) === "Echo: from sdk v2" && !r.isError, r);
  const e = await client.callTool({ name: "test_error_handling", arguments: {} });
  check("tools/call isError", e.isError === true, e);
});

await step("resources/read", async () => {
  const r = await client.readResource({ uri: "test://static-text" });
  check("resources/read", r.contents?.[0]?.text === "This is the content of the static text resource.", r);
  let code;
  try {
    await client.readResource({ uri: "test://nope" });
  } catch (e) {
    code = e?.code;
  }
  check("unknown resource is -32602", code === -32602, code);
});

await step("prompts/get", async () => {
  const r = await client.getPrompt({ name: "test_prompt_with_arguments", arguments: { arg1: "a", arg2: "b" } });
  const t = r.messages?.[0]?.content?.text;
  check("prompts/get", t === "Prompt with arguments: arg1='a', arg2='b'", r);
});

await step("multi round-trip", async () => {
  const e = await client.callTool({ name: "test_input_required_result_elicitation", arguments: {} });
  check("input_required elicitation", text(e) === "Hello, Sdk!", e);
  const m = await client.callTool({ name: "test_input_required_result_multi_round", arguments: {} });
  check("input_required two rounds", text(m) === "Multi-round complete: favorite color teal", m);
  const all = await client.callTool({ name: "test_input_required_result_multiple_inputs", arguments: {} });
  check("input_required three at once", text(all).startsWith("Received all inputs"), all);
  const p = await client.getPrompt({ name: "test_input_required_result_prompt" });
  check("input_required prompt", p.messages?.[0]?.content?.text === "Answer using this context: from the SDK", p);
});

await step("close", async () => {
  await client.close();
});
clearTimeout(deadline);
console.log(`${passes} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
