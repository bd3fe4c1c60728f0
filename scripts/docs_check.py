#!/usr/bin/env python3
"""Checks the documentation users read, without building anything:

- no internal vocabulary in README.md, docs/, src/, relay/src and tests/
  (no rounds, issue numbers or "the review");
- every relative link of README.md, relay/README.md and the book points at a
  file that exists (and no page of the book is a README.md), and every `#anchor` into a book page at one of its
  headings (or an explicit `<a id>`);
- every alert rule in dashboards/alerts.yml has its section in the runbook,
  and its `runbook` annotation points there;
- the README stays short (at most 200 lines).

Exit 1 with every finding listed.
"""
import functools
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = re.compile(r"round (one|two|three|four)|issue [0-9]+|the review", re.I)
LINK = re.compile(r"\]\(([^)\s]+)\)")
problems = []


def files(*tops, exts=(".md", ".rs", ".svg", ".js", ".css", ".html", ".toml")):
    for top in tops:
        path = os.path.join(ROOT, top)
        if os.path.isfile(path):
            yield path
            continue
        for base, _, names in os.walk(path):
            for name in names:
                if name.endswith(exts):
                    yield os.path.join(base, name)


def rel(path):
    return os.path.relpath(path, ROOT)


for path in files("README.md", "docs", "src", "relay/src", "tests", "relay/README.md"):
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = WORDS.search(line)
            if m:
                problems.append(f"{rel(path)}:{n}: internal word {m.group(0)!r}")


def slug(heading):
    text = re.sub(r"`|\*|_(?=\w)|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    found = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            m = re.match(r"#+ (.*)", line)
            if m:
                found.add(slug(m.group(1)))
            found.update(re.findall(r'<a id="([^"]+)"', line))
    return found


def links(path):
    in_code = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("```"):
                in_code = not in_code
            if not in_code:
                for target in LINK.findall(line):
                    yield n, target


for path in files("README.md", "relay/README.md", "docs/src", exts=(".md",)):
    for n, target in links(path):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            problems.append(f"{rel(path)}:{n}: link to {target}: no such file")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            problems.append(f"{rel(path)}:{n}: link to {target}: no such heading")

# mdBook renders a README.md as index.html but leaves links to it as
# README.html: a broken link in the built book.
for path in files("docs/src", exts=("README.md",)):
    problems.append(f"{rel(path)}: name it index.md (mdBook breaks links to a README.md)")

runbook = os.path.join(ROOT, "docs/src/operating/runbook.md")
with open(os.path.join(ROOT, "dashboards/alerts.yml"), encoding="utf-8") as f:
    rules = f.read()
for alert in re.findall(r"alert: (\w+)", rules):
    if alert.lower() not in anchors(runbook):
        problems.append(f"dashboards/alerts.yml: {alert} has no section in {rel(runbook)}")
    if f"runbook.md#{alert.lower()}" not in rules:
        problems.append(f"dashboards/alerts.yml: {alert}'s runbook annotation does not point at its section")

with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    lines = sum(1 for _ in f)
if lines > 200:
    problems.append(f"README.md: {lines} lines (at most 200: move detail into the book)")

for p in problems:
    print(p)
print(f"docs check: {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
