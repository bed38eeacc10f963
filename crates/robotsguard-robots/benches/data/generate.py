#!/usr/bin/env python3
"""Writes the benchmark robots.txt files (deterministic: same output on every run).

small.txt  ~10 lines: a typical small site.
medium.txt ~200 lines: several groups, wildcards, anchors, index.html rules.
large.txt  ~5,000 lines, ~150 KB: a large site listing many sections and crawlers.
"""
import random

rng = random.Random(20261122)
WORDS = ["shop", "cart", "checkout", "account", "search", "blog", "news", "api", "admin", "static",
         "media", "images", "products", "category", "tag", "user", "login", "private", "tmp", "draft",
         "archive", "feed", "print", "export", "compare", "wishlist", "help", "docs", "v1", "v2"]
BOTS = ["Googlebot", "Googlebot-Image", "Bingbot", "GPTBot", "ClaudeBot", "CCBot", "Bytespider",
        "AhrefsBot", "SemrushBot", "YandexBot", "Baiduspider", "DuckDuckBot", "Applebot",
        "PerplexityBot", "Amazonbot", "FacebookBot", "MJ12bot", "DotBot", "PetalBot", "Slurp"]


def path(depth):
    return "/" + "/".join(rng.choice(WORDS) + (str(rng.randint(1, 99)) if rng.random() < 0.3 else "")
                          for _ in range(depth))


def rule(wild_ratio, deepest=4):
    kind = rng.choice(["Disallow", "Disallow", "Allow"])
    r = rng.random()
    if r < wild_ratio / 3:
        value = "/*." + rng.choice(["php", "json", "xml", "pdf", "zip", "css", "js"]) + ("$" if rng.random() < 0.5 else "")
    elif r < wild_ratio * 2 / 3:
        value = path(rng.randint(1, 2)) + "/*?" + rng.choice(["sort=", "session=", "q=", "page="])
    elif r < wild_ratio:
        value = "/*" + rng.choice(WORDS) + "*"
    else:
        value = path(rng.randint(1, deepest)) + ("/" if rng.random() < 0.5 else "")
    return f"{kind}: {value}"


small = """# small site
User-agent: *
Disallow: /admin/
Disallow: /cart
Allow: /admin/help
Disallow: /*.pdf$

User-agent: GPTBot
Disallow: /

Sitemap: https://www.example.com/sitemap.xml
"""

medium = ["# medium site: several groups, wildcards and anchors"]
for group in range(8):
    agents = rng.sample(BOTS, rng.randint(1, 3)) if group else ["*"]
    medium += [f"User-agent: {a}" for a in agents]
    medium += [rule(0.35) for _ in range(rng.randint(18, 28))]
    if group % 3 == 0:
        medium.append(f"Allow: {path(2)}/index.html")
    medium.append("")
medium.append("Sitemap: https://www.example.com/sitemap.xml")

large = ["# large site"]
while len(large) < 5000:
    agents = rng.sample(BOTS, rng.randint(1, 2)) if len(large) > 1 else ["*"]
    large += [f"User-agent: {a}" for a in agents]
    large += [rule(0.08, 5) for _ in range(rng.randint(150, 400))]
    large.append("")
large.append("Sitemap: https://www.example.com/sitemap.xml")

with open("small.txt", "w") as f:
    f.write(small)
with open("medium.txt", "w") as f:
    f.write("\n".join(medium) + "\n")
with open("large.txt", "w") as f:
    f.write("\n".join(large) + "\n")
