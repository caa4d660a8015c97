#!/usr/bin/env python3
"""Writes a search request mix for wrk (bench/mix.lua reads it): one path?query per line.

Usage: search_mix.py EVENTS OUT [--lines N]

The words are those of the generated records' searched fields (spec/kinds.json `search`),
drawn with Zipf-like skew over their frequency ranks: one word as typed (the last word is
also a prefix), two words, a word's start, a phrase of a record's name, and one word with a
kind filter. Prints a summary line to stderr."""
import json, os, random, re, sys, urllib.parse
from collections import Counter, defaultdict

def main(argv):
    events, out = argv[1], argv[2]
    lines = int(argv[argv.index("--lines") + 1]) if "--lines" in argv else 4000
    here = os.path.dirname(os.path.abspath(__file__))
    kinds = json.load(open(os.path.join(here, "..", "spec", "kinds.json")))["kinds"]
    fields = {k: v["search"] for k, v in kinds.items() if "search" in v}
    words, by_kind, names = Counter(), defaultdict(Counter), []

    def values(node, path):
        if not path:
            if isinstance(node, str):
                yield node
            elif isinstance(node, list):
                for item in node:
                    yield from values(item, path)
            return
        if isinstance(node, list):
            for item in node:
                yield from values(item, path)
        elif isinstance(node, dict) and path[0] in node:
            yield from values(node[path[0]], path[1:])

    for line in open(events):
        event = json.loads(line)
        commit = event.get("commit") or {}
        kind, record = commit.get("collection"), commit.get("record")
        if kind not in fields or not isinstance(record, dict):
            continue
        for group in ("name", "text"):
            for path in fields[kind].get(group, []):
                for text in values(record, path.split(".")):
                    found = re.findall(r"\w+", text.lower())
                    words.update(found)
                    by_kind[kind].update(found)
                    if group == "name" and len(found) >= 2 and len(names) < 100000:
                        names.append(" ".join(found[:2]))
    ranked = [w for w, _ in words.most_common(5000)]
    rnd = random.Random(7)
    weights = [1 / (rank + 1) for rank in range(len(ranked))]

    def zipf():
        return rnd.choices(ranked, weights)[0]

    out_lines, shapes = [], Counter()
    for _ in range(lines):
        shape = rnd.choices(["word", "two", "prefix", "phrase", "kind"], [40, 20, 15, 10, 15])[0]
        params = {}
        if shape == "word":
            params["q"] = zipf()
        elif shape == "two":
            params["q"] = "%s %s" % (zipf(), zipf())
        elif shape == "prefix":
            word = zipf()
            params["q"] = word[: max(3, len(word) // 2)]
        elif shape == "phrase" and names:
            params["q"] = '"%s"' % rnd.choice(names)
        else:
            kind = rnd.choice(sorted(by_kind))
            common = [w for w, _ in by_kind[kind].most_common(50)]
            params["q"] = rnd.choice(common) if common else zipf()
            params["kind"] = kind
        params["limit"] = rnd.choice([10, 25, 25, 100])
        shapes[shape] += 1
        out_lines.append("/v1/search?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote))
    with open(out, "w") as f:
        f.write("\n".join(out_lines) + "\n")
    print("search mix: %d requests over %d distinct words (%s)" % (
        len(out_lines), len(words), ", ".join("%s %d" % kv for kv in sorted(shapes.items()))),
        file=sys.stderr)

if __name__ == "__main__":
    main(sys.argv)
