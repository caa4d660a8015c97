-- wrk script: sends the requests of a mix file (bench/mix.py: one path?query per line) in
-- turn, each thread from its own place in the file, and counts answers outside 2xx.
--   MIX_FILE=bench-data/mix.txt wrk -t2 -c64 -d1m --latency -s bench/mix.lua http://127.0.0.1:8787
-- done() prints "mix: N non-2xx answers" (and the last such status and body), since wrk itself
-- reports only "Non-2xx or 3xx responses".

local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  local path = os.getenv("MIX_FILE")
  if path == nil or path == "" then
    error("MIX_FILE must name a request mix file (bench/mix.py writes one)")
  end
  local file, reason = io.open(path, "r")
  if file == nil then
    error("MIX_FILE: " .. reason)
  end
  -- Formatted once here: formatting per request would cost wrk's CPU, which the server shares.
  requests = {}
  for line in file:lines() do
    if line ~= "" then
      requests[#requests + 1] = wrk.format("GET", line)
    end
  end
  file:close()
  if #requests == 0 then
    error("MIX_FILE " .. path .. " holds no requests")
  end
  -- Golden-ratio spacing: any number of threads start far apart without knowing how many.
  local spread = (id * 0.6180339887) % 1
  position = math.floor(#requests * spread)
  failures = 0
  last_failure = ""
end

function request()
  position = position % #requests + 1
  return requests[position]
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    failures = failures + 1
    last_failure = status .. " " .. string.sub(body or "", 1, 200)
  end
end

function done(summary, latency, requests)
  local total, last = 0, ""
  for _, thread in ipairs(threads) do
    total = total + thread:get("failures")
    local failure = thread:get("last_failure")
    if failure ~= nil and failure ~= "" then
      last = failure
    end
  end
  io.write(string.format("mix: %d non-2xx answers\n", total))
  if last ~= "" then
    io.write("mix: last non-2xx answer: " .. last .. "\n")
  end
end
