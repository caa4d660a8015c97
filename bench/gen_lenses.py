#!/usr/bin/env python3
"""Generates lens and schema records (and verifications of some lenses) as JSON Lines of
Jetstream commit events, for the routes benchmark (bench/routes.sh).

    python3 bench/gen_lenses.py [LENSES] [SCHEMAS] OUT [--seed S]

Defaults: 100,000 lenses over 20,000 schemas. Ends are drawn with a skew (an index drawn as
SCHEMAS * u^2 for u uniform): a few hub schemas have hundreds of lenses from and to them, most
have a handful. Classes: iso 40%, projection 25%, retraction 15%, lossy 10%, none given 10%.
One lens in five has a round-trip verification (holds 80%, else falsified). A third of the
schemas name an NSID (an atproto lexicon's schema), the rest their entry vertex. Also writes
the questions the benchmark asks, 2,000 (from, to) schema uri pairs each: `<OUT>.pairs.txt`,
uniform over the schemas, and `<OUT>.hub-pairs.txt`, drawn with the lenses' skew (busy
schemas, where chains are many). Deterministic for given counts and seed.
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_events import cid_of, iso_time, make_did, tid  # noqa: E402

START_US = 1767225600 * 1_000_000  # 2026-01-01T00:00:00Z, after the main generator's events
CLASSES = [("iso", 40), ("projection", 25), ("retraction", 15), ("lossy", 10), (None, 10)]
EVENT = ('{"did":"%s","time_us":%d,"kind":"commit","commit":{"rev":"%s","operation":"create",'
         '"collection":"%s","rkey":"%s","record":%s,"cid":"%s"}}\n')


def weighted(rng, table):
    total = sum(w for _, w in table)
    x = rng.random() * total
    for value, w in table:
        x -= w
        if x < 0:
            return value
    return table[-1][0]


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 7
    lenses, schemas, out = int(args[0]), int(args[1]), args[2]
    rng = random.Random(seed)
    authors = [make_did(rng) for _ in range(500)]
    t = START_US
    schema_uris = []
    with open(out, "w") as f:
        def emit(did, collection, body):
            nonlocal t
            t += 1 + rng.randint(0, 2000)
            rkey = tid(t << 10 | 7)
            record = body.replace("$NOW", iso_time(t - 1_000_000))
            f.write(EVENT % (did, t, tid(t << 10 | 7), collection, rkey, record,
                             cid_of(record.encode())))
            return "at://%s/%s/%s" % (did, collection, rkey)

        for i in range(schemas):
            entry = "area%d.thing%d" % (i % 97, i)
            nsids = '{"%s":"com.example.s%d.record"}' % (entry, i) if i % 3 == 0 else "{}"
            blob = ('{"entries":["%s"],"nsids":%s,"vertices":{"%s":{"id":"%s","kind":"object"}}}'
                    % (entry, nsids, entry, entry))
            body = ('{"$type":"dev.panproto.schema.schema","protocol":"%s","blob":%s,'
                    '"objectHash":"%064x","createdAt":"$NOW"}'
                    % ("atproto" if i % 3 == 0 else "json-schema", blob, i))
            schema_uris.append(emit(authors[i % len(authors)], "dev.panproto.schema.schema", body))
        end = lambda: schema_uris[int(schemas * rng.random() ** 2)]  # noqa: E731
        verify = []
        for i in range(lenses):
            source, target = end(), end()
            while target == source:
                target = end()
            klass = weighted(rng, CLASSES)
            field = ',"roundTripClass":"%s"' % klass if klass else ""
            body = ('{"$type":"dev.panproto.schema.lens","sourceSchema":"%s","targetSchema":"%s"%s,'
                    '"blob":{"steps":[{"name":"step%d"}]},"objectHash":"%064x","createdAt":"$NOW"}'
                    % (source, target, field, i % 50, i))
            uri = emit(authors[(i * 7) % len(authors)], "dev.panproto.schema.lens", body)
            if i % 5 == 0:
                verify.append(uri)
        for i, lens in enumerate(verify):
            result = "holds" if rng.random() < 0.8 else "falsified"
            body = ('{"$type":"dev.svc.verification","lens":{"uri":"%s"},"kind":"roundtrip-test",'
                    '"verifier":"%s","tool":{"name":"svc","version":"1"},'
                    '"property":{"$type":"dev.svc.defs#lpRoundtrip","domain":"all"},'
                    '"result":"%s","occurredAt":"$NOW"}' % (lens, authors[i % 50], result))
            emit(authors[i % 50], "dev.svc.verification", body)
    for name, pick in [("pairs", lambda: rng.choice(schema_uris)), ("hub-pairs", end)]:
        with open("%s.%s.txt" % (out, name), "w") as f:
            for _ in range(2000):
                a, b = pick(), pick()
                if a != b:
                    f.write("%s %s\n" % (a, b))


if __name__ == "__main__":
    main(sys.argv)
