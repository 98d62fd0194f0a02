-- wrk script for bench/run-mcp.sh: every request is one Streamable HTTP
-- POST of `tools/call echo {"message":"hello"}` in the MCP session set up
-- beforehand (MCP_SID, MCP_PV from the environment). Request ids are
-- unique across threads and connections (a session must not see two
-- requests in flight with the same id). done() prints one line for the
-- script: "WRK_JSON {...}".
local sid = os.getenv("MCP_SID") or ""
local pv = os.getenv("MCP_PV") or "2025-06-18"
local auth = os.getenv("MCP_AUTH") -- an Authorization value, if any
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
  wrk.headers["Mcp-Session-Id"] = sid
  wrk.headers["Mcp-Protocol-Version"] = pv
  if auth and auth ~= "" then
    wrk.headers["Authorization"] = auth
  end
  counter = tid * 1000000000
end

function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil,
    '{"jsonrpc":"2.0","id":' .. counter ..
    ',"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}')
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
