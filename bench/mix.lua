-- wrk request mix for bench/proxy-compare.sh: of every 10 requests, 7 come from browsers, 2 from
-- crawlers robots.txt allows, 1 from a crawler it blocks. Keep-alive throughout.
local mix = {
  {"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", "/products/42"},
  {"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "/blog/2026/robots"},
  {"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "/search?q=shoes"},
  {"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "/cart"},
  {"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", "/news/today"},
  {"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "/account/settings"},
  {"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0", "/static/app.js"},
  {"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "/unlisted/page.html"},
  {"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "/unlisted/other.html"},
  {"CCBot/2.0 (https://commoncrawl.org/faq/)", "/articles/1"},
}
local i = 0
request = function()
  i = i % #mix + 1
  return wrk.format("GET", mix[i][2], {["Host"] = "bench.example", ["User-Agent"] = mix[i][1]})
end
