#!/usr/bin/env python3
"""Writes a request mix of distinct costly pages, one path a line, shuffled: maps of every
hops and nodes, and searches of pairs of words the records hold, through the API and the
explorer. Every line misses the answer cache, as a client varying its parameters does.

    python3 bench/costly_paths.py EVENTS.jsonl OUT.txt [--lines N]
"""

import json
import random
import re
import sys
import urllib.parse


def words_of(events_path, wanted=3000):
    """Words of the records' strings, the commonest first."""
    counts = {}
    with open(events_path, encoding="utf-8") as events:
        for n, line in enumerate(events):
            if n >= 50_000:
                break
            for word in re.findall(r"[a-z]{4,12}", line.lower()):
                counts[word] = counts.get(word, 0) + 1
    ranked = sorted(counts, key=counts.get, reverse=True)
    # The JSON's own keys and collection names are in every line: past them.
    return ranked[40 : 40 + wanted]


def main(argv):
    events, out = argv[1], argv[2]
    lines = int(argv[argv.index("--lines") + 1]) if "--lines" in argv else 20_000
    rng = random.Random(20261202)
    words = words_of(events)
    paths = [f"/map?hops={hops}&nodes={nodes}" for hops in range(1, 5) for nodes in range(2, 301)]
    while len(paths) < lines:
        q = urllib.parse.quote(f"{rng.choice(words)} {rng.choice(words)}")
        limit = rng.randint(1, 100)
        paths.append(rng.choice([f"/v1/search?q={q}&limit={limit}", f"/search?q={q}"]))
    rng.shuffle(paths)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(paths[:lines]) + "\n")


if __name__ == "__main__":
    main(sys.argv)
