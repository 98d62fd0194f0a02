// The MCP TypeScript SDK's client driving `acp mcp serve --everything`.
//
//   node sdk_client.mjs stdio CMD [ARGS...]   (spawns the server)
//   node sdk_client.mjs http URL              (Streamable HTTP)
//   node sdk_client.mjs sse URL               (legacy HTTP+SSE, GET URL)
//
// Exercises every family of the fixture set and checks the answers. Prints
// one line per check; exit 0 when all passed, 1 otherwise.
// Resolves the SDK from MCP_SDK_DIR (the installed node_modules).
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.MCP_SDK_DIR;
if (!sdkDir) {
  console.error("sdk_client: MCP_SDK_DIR is not set");
  process.exit(2);
}
const sdk = (p) =>
  import(pathToFileURL(path.join(sdkDir, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { SSEClientTransport } = await sdk("client/sse.js");
const types = await sdk("types.js");

const [mode, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(rest[0]));
} else if (mode === "sse") {
  transport = new SSEClientTransport(new URL(rest[0]));
} else {
  console.error("usage: sdk_client.mjs stdio CMD ARGS... | http URL | sse URL");
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
  { name: "libacp-interop-sdk-client", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
);
const logs = [];
client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => logs.push(n.params));
client.setRequestHandler(types.CreateMessageRequestSchema, async (req) => ({
  role: "assistant",
  content: { type: "text", text: `sdk says: ${req.params.messages[0].content.text}` },
  model: "sdk-model",
  stopReason: "endTurn",
}));
client.setRequestHandler(types.ElicitRequestSchema, async () => ({
  action: "accept",
  content: { username: "sdk", email: "sdk@example.com" },
}));
client.setRequestHandler(types.ListRootsRequestSchema, async () => ({ roots: [] }));

const deadline = setTimeout(() => {
  console.log(`FAIL ${mode} timeout after 30 s`);
  process.exit(1);
}, 30000);

await step("connect", async () => {
  await client.connect(transport);
  const caps = client.getServerCapabilities();
  check("initialize", !!caps?.tools && !!caps?.resources && !!caps?.prompts && !!caps?.logging, caps);
  check("serverInfo", typeof client.getServerVersion()?.name === "string", client.getServerVersion());
});
await step("ping", async () => check("ping", JSON.stringify(await client.ping()) === "{}"));
await step("tools/list", async () => {
  const r = await client.listTools();
  const names = r.tools.map((t) => t.name);
  check("tools/list", names.includes("test_simple_text") && names.includes("echo") && names.length >= 15, names);
});
await step("tools/call echo", async () => {
  const r = await client.callTool({ name: "echo", arguments: { message: "héllo \"sdk\"" } });
  check("tools/call echo", text(r) === 'Echo: héllo "sdk"', r);
});
await step("tools/call error", async () => {
  const r = await client.callTool({ name: "test_error_handling", arguments: {} });
  check("tools/call isError", r.isError === true && text(r).includes("intentionally"), r);
});
await step("tools/call image", async () => {
  const r = await client.callTool({ name: "test_multiple_content_types", arguments: {} });
  check("tools/call mixed content", r.content.map((c) => c.type).join(",") === "text,image,resource", r);
});
await step("tools/call progress", async () => {
  const seen = [];
  const r = await client.callTool({ name: "test_tool_with_progress", arguments: {} }, undefined, {
    onprogress: (p) => seen.push(p.progress),
  });
  check("tools/call progress", seen.join(",") === "0,50,100" && text(r).length > 0, { seen, r });
});
await step("logging", async () => {
  await client.setLoggingLevel("debug");
  await client.callTool({ name: "test_tool_with_logging", arguments: {} });
  await new Promise((res) => setTimeout(res, 100));
  check("logging notifications", logs.length >= 3 && logs[0].data === "Tool execution started", logs);
});
await step("sampling", async () => {
  const r = await client.callTool({ name: "test_sampling", arguments: { prompt: "2+2?" } });
  check("sampling round trip", text(r) === "LLM response: sdk says: 2+2?", r);
});
await step("elicitation", async () => {
  const r = await client.callTool({ name: "test_elicitation", arguments: { message: "who?" } });
  check("elicitation round trip", text(r).startsWith("User response: action=accept") && text(r).includes("sdk@example.com"), r);
});
await step("unknown tool", async () => {
  let code;
  try {
    const r = await client.callTool({ name: "no_such_tool", arguments: {} });
    code = r.isError ? "isError" : "ok";
  } catch (e) {
    code = e.code;
  }
  check("unknown tool is an error", code === -32602 || code === "isError", code);
});
await step("resources", async () => {
  const l = await client.listResources();
  check("resources/list", l.resources.some((r) => r.uri === "test://static-text"), l);
  const t = await client.listResourceTemplates();
  check("resources/templates/list", t.resourceTemplates.some((r) => r.uriTemplate === "test://template/{id}/data"), t);
  const r = await client.readResource({ uri: "test://static-text" });
  check("resources/read text", r.contents[0].text === "This is the content of the static text resource.", r);
  const b = await client.readResource({ uri: "test://static-binary" });
  check("resources/read blob", b.contents[0].mimeType === "image/png" && b.contents[0].blob.length > 0, b);
  const d = await client.readResource({ uri: "test://template/77/data" });
  check("resources/read template", JSON.parse(d.contents[0].text).id === "77", d);
  let code;
  try {
    await client.readResource({ uri: "test://missing" });
  } catch (e) {
    code = e.code;
  }
  check("resources/read unknown is -32002", code === -32002, code);
  check("resources/subscribe", JSON.stringify(await client.subscribeResource({ uri: "test://watched-resource" })) === "{}");
  check("resources/unsubscribe", JSON.stringify(await client.unsubscribeResource({ uri: "test://watched-resource" })) === "{}");
});
await step("prompts", async () => {
  const l = await client.listPrompts();
  check("prompts/list", l.prompts.length === 5, l);
  const p = await client.getPrompt({ name: "test_prompt_with_arguments", arguments: { arg1: "a", arg2: "b" } });
  check("prompts/get", p.messages[0].content.text === "Prompt with arguments: arg1='a', arg2='b'", p);
  const i = await client.getPrompt({ name: "test_prompt_with_image" });
  check("prompts/get image", i.messages[0].content.type === "image", i);
});
await step("completion", async () => {
  const c = await client.complete({
    ref: { type: "ref/prompt", name: "test_prompt_with_arguments" },
    argument: { name: "arg1", value: "pa" },
  });
  check("completion/complete", c.completion.values.join(",") === "paris,park,party", c);
});
await step("close", async () => {
  await client.close();
});
clearTimeout(deadline);
console.log(`sdk_client ${mode}: ${passes} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
