#!/usr/bin/env python3
"""Writes a search request mix for wrk (bench/mix.lua reads it): one path?query per line.

Usage: search_mix.py EVENTS OUT [--lines N]

The words are those of the generated records' searched fields (spec/kinds.json `search`),
drawn with Zipf-like skew over their frequency ranks: 40% one word as typed (the last word is
also a prefix), 30% two words, 15% a word's first four letters, 15% a quoted phrase of a
record's name's first two words; a fifth of them with a kind filter (their words then drawn
from that kind's). Prints a summary line to stderr."""
import random, sys, urllib.parse
from collections import Counter

import search_words
from mix import Ranked

def main(argv):
    events, out = argv[1], argv[2]
    lines = int(argv[argv.index("--lines") + 1]) if "--lines" in argv else 4000
    words, by_kind, names = search_words.read(events)
    rnd = random.Random(7)

    def zipf_over(counts):
        return Ranked(dict(counts.most_common(5000)), rnd).draw

    anywhere = zipf_over(words)
    of_kind = {kind: zipf_over(counts) for kind, counts in by_kind.items()}
    out_lines, shapes = [], Counter()
    for _ in range(lines):
        shape = rnd.choices(["word", "two", "prefix", "phrase"], [40, 30, 15, 15])[0]
        params = {}
        zipf = anywhere
        if rnd.random() < 0.2:
            params["kind"] = rnd.choice(sorted(by_kind))
            zipf = of_kind[params["kind"]]
            shapes["with a kind"] += 1
        if shape == "word":
            params["q"] = zipf()
        elif shape == "two":
            params["q"] = "%s %s" % (zipf(), zipf())
        elif shape == "prefix":
            params["q"] = zipf()[:4]
        else:
            params["q"] = '"%s"' % rnd.choice(names)
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
