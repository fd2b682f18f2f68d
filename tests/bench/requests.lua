-- wrk script of the bench (tests/bench/load.ts): cycles through the requests of a file, one a line,
-- "METHOD<TAB>PATH<TAB>BODY" (BODY may be empty; a body is sent as JSON). Arguments after "--": the
-- file, the number of wrk threads (thread k takes lines k, k+n, k+2n… so no two threads send the
-- same line: signed posts carry one-time nonces), the connections of a thread and how long (ms)
-- each holds back its first request. Prints "WRK {json}" (wrk's summary, as it reports
-- it) and "WRKH v:n,…" (its latency histogram) at the end.

local threads = 0

function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  -- Each connection holds back its first request (delay() below) so that the server accepts every
  -- connection while idle; the load starts once they all are.
  held, hold_ms = tonumber(args[3]) or 0, tonumber(args[4]) or 0
  reqs = {}
  local i = 0
  for line in io.lines(file) do
    if i % nthreads == tid then
      local method, path, body = line:match("^([^\t]+)\t([^\t]+)\t(.*)$")
      local headers = {}
      for name, value in pairs(wrk.headers) do headers[name] = value end
      if body == "" then
        body = nil
      else
        headers["Content-Type"] = "application/json"
      end
      reqs[#reqs + 1] = wrk.format(method, path, headers, body)
    end
    i = i + 1
  end
  if #reqs == 0 then error("no requests for thread " .. tid .. " in " .. file) end
  idx = 0
end

function delay()
  if held > 0 then
    held = held - 1
    return hold_ms
  end
  return 0
end

function request()
  idx = idx % #reqs + 1
  return reqs[idx]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%d,"p99":%d,"max":%d,"mean":%.1f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max, latency.mean))
  -- The whole latency distribution as wrk holds it: a count per microsecond, after wrk's own
  -- correction for coordinated omission (load.ts undoes it). wrk's Lua API reads one value at a
  -- time in O(range), so the counts are read through LuaJIT's FFI from wrk's stats struct
  -- (count, limit, min, max, data[]: uint64), checked against the min and max the API gives.
  local ok, ffi = pcall(require, "ffi")
  if not ok then return end
  local s = ffi.cast("uint64_t**", latency)[0]
  if tonumber(s[2]) ~= latency.min or tonumber(s[3]) ~= latency.max then return end
  local out = {}
  for v = latency.min, latency.max do
    local n = tonumber(s[4 + v])
    if n > 0 then out[#out + 1] = v .. ":" .. n end
  end
  io.write("WRKH " .. table.concat(out, ",") .. "\n")
end
