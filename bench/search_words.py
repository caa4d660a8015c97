"""The words of generated records' searched fields (spec/kinds.json `search`), as the search
benchmarks draw their queries from: read(EVENTS) -> (words, by_kind, names), where `words`
counts each folded word, `by_kind` the same by kind, and `names` holds the first two words of
up to 100,000 records' names."""
import json, os, re
from collections import Counter, defaultdict


def values(node, path):
    """The strings at a dotted path (split) inside a record, lists walked through."""
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


def read(events):
    here = os.path.dirname(os.path.abspath(__file__))
    kinds = json.load(open(os.path.join(here, "..", "spec", "kinds.json")))["kinds"]
    fields = {k: v["search"] for k, v in kinds.items() if "search" in v}
    words, by_kind, names = Counter(), defaultdict(Counter), []
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
    return words, by_kind, names
