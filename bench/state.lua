-- wrk requests for bench/shared-state.sh, one kind per run (STATE_KIND in the environment):
--   browser   a browser on an allowed page (never touches the state store)
--   admitted  a crawler robots.txt allows, under a Crawl-delay, from a new address each request
--             (each request opens a budget: one store round trip)
--   violation a crawler on a disallowed path, from a new address each request (the violation
--             script: the robots.txt read check and a strike)
local kind = os.getenv("STATE_KIND") or "browser"
local n = 0
local thread_id = 0

setup = function(thread)
  thread:set("thread_id", thread_id)
  thread_id = thread_id + 1
end

-- A distinct address per request (and per wrk thread), behind the trusted loopback peer.
local function next_client()
  n = n + 1
  local v = thread_id * 4000000 + n
  return string.format("10.%d.%d.%d", math.floor(v / 65536) % 256, math.floor(v / 256) % 256, v % 256)
end

request = function()
  if kind == "browser" then
    return wrk.format("GET", "/products/42", {
      ["Host"] = "bench.example",
      ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
      ["X-Forwarded-For"] = next_client(),
    })
  end
  local path = kind == "admitted" and "/products/42" or "/private/42"
  return wrk.format("GET", path, {
    ["Host"] = "bench.example",
    ["User-Agent"] = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    ["X-Forwarded-For"] = next_client(),
  })
end
