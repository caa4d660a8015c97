#!/usr/bin/env python3
"""Writes a request mix for load benchmarks: one `path?query` per line, for wrk (bench/mix.lua).

    python3 bench/mix.py EVENTS OUT [--lines N] [--seed S] [--spec FILE] [--max-events M]

EVENTS is JSON Lines of Jetstream events (bench/gen_events.py makes them); OUT the mix file
(`-` for stdout). N lines (default 100,000) of the queries before interface 0.13, the
sufficiency check and stats, the same for given events, N and seed as before 0.13's queries
existed; among them, about 1 line in 20 more for 0.13's queries (change proposals, releases,
migration runs, federations; LATER_QUERIES), from a random stream of their own. Deterministic
for given events, N and seed.

What is in it, so a figure measured with it means "a realistic mix", not "one hot key":
- every list query of the specification (spec/queries.json, or --spec), each about as often
  (0.13's seven together a twentieth of the lines), at its REST path and, for a tenth, at its
  XRPC name; plus the sufficiency check and stats;
- parameter values taken from the records, the way the server's filter reads them (so every
  key exists), drawn Zipf-like by how many records share them: hot keys often, a long tail of
  distinct ones too;
- page sizes 10, 25 and 100; mostly the first pages, for a tenth an offset of up to 5,000, and
  for a seventh a cursor: the position of a record the query lists (a cursor is the last uri
  of a page, base64url after `u:`; any uri marks a place to page after).
A summary (lines and distinct keys per route) goes to stderr.
"""

import base64
import bisect
import json
import os
import random
import re
import sys
import urllib.parse

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def enum_values(param):
    """An enum parameter's values: listed, or named with `values_of` (the verification kinds,
    which the record family's lexicon lists as the kinds it knows)."""
    if "values" in param:
        return param["values"]
    if param.get("values_of") == "verification-kinds":
        with open(os.path.join(ROOT, "lexicons", "dev", "svc", "verification.json"), encoding="utf-8") as f:
            return json.load(f)["defs"]["main"]["record"]["properties"]["kind"]["knownValues"]
    sys.exit("mix: parameter %s names values this script does not know" % param["name"])
STEP = re.compile(r"([^.\[\]]+)(?:\[\$type=([^\]]+)\])?(?:\.|$)")
PAGE_SIZES = [(10, 45), (25, 35), (100, 20)]
DEEP_SHARE = 0.1
CURSOR_SHARE = 0.15
SAMPLES_PER_KEY = 4
XRPC_SHARE = 0.1
ZIPF_S = 1.0
# The queries of interface 0.13 (change proposals, releases, migration runs, federations): a
# twentieth of the lines, from a random stream of their own, so that the lines of the queries
# before them are what they were for a given seed.
LATER_QUERIES = {"openChangeProposals", "changeProposalsForCommunity", "communityReleasesForCommunity",
                 "activeMigrationRuns", "migrationRunsForChange", "federationsForCommunity", "federationsForPeer"}
LATER_SHARE = 0.05


def steps(path):
    """`conditions[$type=x#y].schema` -> [("conditions", "x#y"), ("schema", None)]."""
    out, pos = [], 0
    while pos < len(path):
        m = STEP.match(path, pos)
        if not m:
            raise ValueError("cannot read filter path %r at %d" % (path, pos))
        out.append((m.group(1), m.group(2)))
        pos = m.end()
    return out


def values_at(record, path_steps):
    """The values a filter path reaches: an array step applies to each element."""
    current = [record]
    for field, union_type in path_steps:
        reached = []
        for value in current:
            if not isinstance(value, dict) or field not in value:
                continue
            got = value[field]
            for item in got if isinstance(got, list) else [got]:
                if union_type is None or (isinstance(item, dict) and item.get("$type") == union_type):
                    reached.append(item)
        current = reached
    return current


def param_values(condition, record):
    found = values_at(record, steps(condition["path"]))
    if condition["op"] == "ref_uri":
        found = [v.get("uri") for v in found if isinstance(v, dict)]
    return [v for v in found if isinstance(v, str) and v]


class Ranked:
    """Keys ranked by how many records share them; draws rank r with P proportional to 1/(r+1)^s."""

    def __init__(self, counts, rng):
        self.keys = sorted(counts, key=lambda k: (-counts[k], k))
        total, self.cw = 0.0, []
        for r in range(len(self.keys)):
            total += 1.0 / (r + 1) ** ZIPF_S
            self.cw.append(total)
        self.total, self.rng = total, rng

    def __len__(self):
        return len(self.keys)

    def draw(self):
        r = bisect.bisect(self.cw, self.rng.random() * self.total)
        return self.keys[min(r, len(self.keys) - 1)]


def read_records(path, max_events):
    """(collection, uri, record) of each create or update in the file."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if max_events and number > max_events:
                break
            try:
                event = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit("%s:%d: not JSON: %s" % (path, number, e))
            commit = event.get("commit") or {}
            if commit.get("operation") in ("create", "update") and isinstance(commit.get("record"), dict):
                uri = "at://%s/%s/%s" % (event.get("did"), commit.get("collection"), commit.get("rkey"))
                yield commit.get("collection"), uri, commit["record"]


def collect(queries, events, max_events):
    """For each query, how many records match each tuple of its parameter values, and the uris
    of the first few of them (places for cursors; a query without parameters has one tuple, ())."""
    by_kind = {}
    for q in queries:
        by_kind.setdefault(q["kind"], []).append(q)
    keys = {q["name"]: {} for q in queries}
    samples = {q["name"]: {} for q in queries}
    lens_counts = {}

    def sample(name, combination, uri, most=SAMPLES_PER_KEY):
        found = samples[name].setdefault(combination, [])
        if len(found) < most:
            found.append(uri)

    for collection, record_uri, record in read_records(events, max_events):
        if collection == "dev.svc.verification":
            for uri in param_values({"op": "ref_uri", "path": "lens"}, record):
                lens_counts[uri] = lens_counts.get(uri, 0) + 1
        for q in by_kind.get(collection, ()):
            conditions = [c for c in q["filter"] if "param" in c]
            if not conditions:
                sample(q["name"], (), record_uri, most=64)
                continue
            # One value per parameter from the same record, so that a multi-parameter key
            # (a source and a target schema) is one that exists.
            chosen = []
            for c in conditions:
                found = param_values(c, record)
                if not found:
                    break
                chosen.append([(c["param"], v) for v in found])
            else:
                counts = keys[q["name"]]
                for combination in zip(*chosen):
                    counts[combination] = counts.get(combination, 0) + 1
                    sample(q["name"], combination, record_uri)
    return keys, samples, lens_counts


def cursor_at(uri):
    return base64.urlsafe_b64encode(("u:" + uri).encode()).decode().rstrip("=")


def page(rng, places):
    limit = rng.choices([s for s, _ in PAGE_SIZES], [w for _, w in PAGE_SIZES])[0]
    if places and rng.random() < CURSOR_SHARE:
        return [("limit", limit), ("cursor", cursor_at(rng.choice(places)))]
    if rng.random() < DEEP_SHARE:
        offset = rng.randrange(100, 5001)
    else:
        # Mostly the first page, then the next few.
        offset = limit * min(int(rng.expovariate(1.5)), 4)
    return [("limit", limit)] + ([("offset", offset)] if offset else [])


def encode(path, params):
    query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote, safe=":/@")
    return path + ("?" + query if query else "")


def query_route(q, keys, samples, rng):
    """The route of one query, drawing from `rng`: [] when no record gives it its parameters."""
    params = q.get("params", [])
    required = [p for p in params if p.get("required")]
    ranked = Ranked(keys[q["name"]], rng) if keys[q["name"]] else None
    enums = {p["name"]: enum_values(p) for p in params if p.get("type") == "enum"}
    if required and ranked is None and not all(p["name"] in enums for p in required):
        print("mix: no records give %s its parameters; left out" % q["name"], file=sys.stderr)
        return []
    optional = bool(params) and not required
    places = samples[q["name"]]

    def make():
        if ranked is not None and (not optional or rng.random() < 0.7):
            chosen = list(ranked.draw())
        elif required:
            chosen = [(p["name"], rng.choice(enums[p["name"]])) for p in required]
        else:
            chosen = []  # every record the query lists
        path = q["path"] if rng.random() >= XRPC_SHARE else "/xrpc/dev.svc.query." + q["name"]
        return path, chosen + page(rng, places.get(tuple(chosen), ())), chosen

    return [(q["path"], make, 1.0)]


def main(argv):
    args, opts = [], {"--lines": "100000", "--seed": "1", "--spec": os.path.join(ROOT, "spec", "queries.json"),
                      "--max-events": "0"}
    it = iter(argv[1:])
    for a in it:
        if a in ("-h", "--help"):
            print(__doc__)
            return 0
        if a in opts:
            opts[a] = next(it, None)
            if opts[a] is None:
                sys.exit("error: %s needs a value" % a)
        elif a.startswith("--"):
            sys.exit("error: unknown flag %s" % a)
        else:
            args.append(a)
    if len(args) != 2:
        sys.exit("usage: mix.py EVENTS OUT [--lines N] [--seed S] [--spec FILE] [--max-events M]")
    events, out_path = args
    n_lines, seed = int(opts["--lines"]), int(opts["--seed"])
    with open(opts["--spec"], encoding="utf-8") as f:
        spec = json.load(f)
    queries = [q for q in spec["queries"] if not q.get("internal")]
    keys, samples, lens_counts = collect(queries, events, int(opts["--max-events"]))

    rng = random.Random(seed)
    # A route: (label, function returning a path and its parameters, weight). The queries that
    # came later draw from a stream of their own (and come on top of the N lines), so that what
    # the mix asks of the others stays the same for a given seed.
    routes = [r for q in queries if q["name"] not in LATER_QUERIES for r in query_route(q, keys, samples, rng)]
    later_rng = random.Random("mix.py later queries %d" % seed)
    later = [r for q in queries if q["name"] in LATER_QUERIES for r in query_route(q, keys, samples, later_rng)]

    verification_kinds = next((enum_values(p) for q in queries if q["name"] == "verificationsByKind"
                               for p in q["params"] if p["name"] == "kind"), [])
    if lens_counts and verification_kinds:
        lenses = Ranked(lens_counts, rng)

        def sufficiency():
            lens = lenses.draw()
            kinds = rng.sample(verification_kinds, rng.randint(1, 3))
            chosen = [("lens_uri", lens), ("kinds", ",".join(kinds))]
            hold = rng.choice([None, "true", "false"])
            return "/v1/verifications/sufficient", chosen + ([("hold", hold)] if hold else []), chosen

        routes.append(("/v1/verifications/sufficient", sufficiency, 1.0))
    routes.append(("/v1/stats", lambda: ("/v1/stats", [], []), 0.2))

    weights = [w for _, _, w in routes]
    later_weights = [w for _, _, w in later]
    lines_per, distinct = {}, {}
    written = 0
    out = sys.stdout if out_path == "-" else open(out_path, "w", encoding="utf-8")

    def emit(route):
        label, make, _ = route
        path, params, key = make()
        out.write(encode(path, params) + "\n")
        lines_per[label] = lines_per.get(label, 0) + 1
        distinct.setdefault(label, set()).add(tuple(key))

    for _ in range(n_lines):
        # Before each line, later queries' lines with probability LATER_SHARE each: their
        # share of all the lines.
        while later and later_rng.random() < LATER_SHARE:
            emit(later_rng.choices(later, later_weights)[0])
            written += 1
        emit(rng.choices(routes, weights)[0])
        written += 1
    if out is not sys.stdout:
        out.close()
    print("mix: %d requests over %d routes, %d distinct keys" % (
        written, len(routes) + len(later), sum(len(v) for v in distinct.values())), file=sys.stderr)
    for label, _, _ in routes + later:
        print("  %-40s %7d requests %7d keys" % (label, lines_per.get(label, 0), len(distinct.get(label, ()))),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
