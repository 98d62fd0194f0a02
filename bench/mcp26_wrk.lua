-- wrk script for bench/run-mcp-2026.sh: every request is one MCP
-- 2026-07-28 stateless POST of `tools/call echo {"message":"hello"}`: no
-- session, the protocol version and client capabilities in the request's
-- _meta, the MCP-Protocol-Version / Mcp-Method / Mcp-Name headers the
-- revision requires. Request ids are unique per thread. done() prints one
-- line for the script: "WRK_JSON {...}".
local threads = {}
local counter = 0

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = "echo"
  counter = tid * 1000000000
end

function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil,
    '{"jsonrpc":"2.0","id":' .. counter ..
    ',"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},' ..
    '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
    '"io.modelcontextprotocol/clientCapabilities":{}}}}')
end

function done(summary, latency, requests)
  local errs = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"rps":%.1f,"p50_us":%d,"p99_us":%d,' ..
    '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d}\n',
    summary.requests, summary.duration,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99),
    errs.connect, errs.read, errs.write, errs.status, errs.timeout))
end
