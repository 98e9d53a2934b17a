-- wrk script: GET every path of a list in turn, one list per run.
--
--   wrk -t2 -c64 -d10s -s bench/lib/rotate_paths.lua http://127.0.0.1:PORT -- PATHS_FILE
--
-- PATHS_FILE holds one request path per line (e.g. /v1/entries/<key>). Each
-- wrk thread walks the whole list from its own starting point, so all keys
-- are requested about equally often and threads do not move in lockstep.
-- At the end one line "WRK_JSON {...}" gives the figures for bench/run
-- (latencies in microseconds).

local thread_count = 0
local requests = {}
local next_index = 0

function setup(thread)
  thread:set("thread_id", thread_count)
  thread_count = thread_count + 1
end

function init(args)
  local file = args[1]
  if file == nil then error("usage: wrk ... -s rotate_paths.lua URL -- PATHS_FILE") end
  for line in io.lines(file) do
    if #line > 0 then requests[#requests + 1] = wrk.format("GET", line) end
  end
  if #requests == 0 then error("no paths in " .. file) end
  next_index = ((thread_id or 0) * 7919) % #requests
end

function request()
  next_index = next_index % #requests + 1
  return requests[next_index]
end

function done(summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"min":%d,"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f,"stdev":%.1f}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean, latency.stdev))
end
