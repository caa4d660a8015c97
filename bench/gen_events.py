#!/usr/bin/env python3
"""Generates N Jetstream commit events of `dev.svc.*` records as JSON Lines, for benchmarks.

    python3 bench/gen_events.py [N] [OUT] [--seed S]

N defaults to 1,000,000. OUT is a file path; without it (or with -) the events go to stdout.
The hottest query values are written as JSON to `<OUT>.hot.json` (and always to stderr):

    {"requester_did": ..., "framework": ..., "lens_uri": ..., "member_did": ..., ...}

Every event is a `create` of a record that validates against lexicons/dev/svc/*.json (the bench's
import summary says `0 invalid`). URIs are unique: `time_us`
strictly increases and each record key is a TID of it. Deterministic for a given N and seed.

Mix of kinds: 30% bounties, 25% verifications, 15% adapters, 8% recommendations, 5% communities,
4% dialects, 5% beliefs, 3% vocabularies, 5% encounters. Values are skewed Zipf-like: a few
requesters post most bounties, a few frameworks have most adapters, a few lenses get most
verifications, a few people are in most communities, a few schema pairs are wanted most.

After those N events come N/24 more (4% of the file) of the governance kinds of interface 0.13:
change proposals 40%, migration runs 25%, federations 20%, community releases 15%, at later
times and from a random stream of their own, so that the first N lines are the same as before
these kinds existed (and the same for any larger N). They belong to the generated communities
(a few communities get most proposals, a few are most peers), a run carries out a recent
approved or released change with the lens its change derives from, a release lists its
community's approved changes, a federation's mappings are generated lenses. Statuses: proposals
draft 20%, review 25%, approved 15%, rejected 10%, released 20%, superseded 10%; runs planned
15%, running 20%, paused 10%, completed 35%, failed 10%, rolled back 10%.

Speed: records are assembled from precomputed JSON fragments with string formatting (no
json.dumps on the hot path); about 15-25 s per million events in CPython.
"""

import base64
import bisect
import hashlib
import json
import os
import random
import sys
import time

TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
PAIRS = [a + b for a in TID_ALPHABET for b in TID_ALPHABET]  # 10 bits -> 2 characters
START_US = 1748822400 * 1_000_000  # 2025-06-02T00:00:00Z
CID_PREFIX = b"\x01\x71\x12\x20"  # CIDv1, dag-cbor, sha2-256, 32 bytes

def bench_mix(mix):
    """(kind, share) of one mix, in the order of the kinds table (spec/kinds.json)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spec", "kinds.json")
    with open(path) as f:
        kinds = json.load(f)["kinds"]
    return [(nsid.rsplit(".", 1)[1], entry["bench"]["share"]) for nsid, entry in kinds.items()
            if entry.get("bench", {}).get("mix") == mix]


MIX = bench_mix("catalog")

FRAMEWORKS = [
    "serde", "pydantic", "zod", "jackson", "protobuf", "avro", "io-ts", "marshmallow", "attrs",
    "kotlinx-serialization", "circe", "aeson", "json-iterator", "encoding-json", "msgspec",
    "valibot", "yup", "ajv", "typebox", "effect-schema", "cattrs", "dataclasses-json", "gson",
    "moshi", "system-text-json", "newtonsoft-json", "swift-codable", "dart-json-serializable",
    "elixir-ecto", "rails-activemodel", "django-rest-framework", "graphql-codegen", "capnproto",
    "flatbuffers", "thrift", "borsh", "bincode", "rkyv", "prost", "schemars",
]
LANGUAGES = ["json-schema", "atproto-lexicon", "protobuf", "openapi", "avro", "fhir-structuredefinition",
             "json-ld", "pydantic", "typescript", "graphql"]
VERIFY_KINDS = [
    # kind, weight, property $type, property body (after $type), tool
    ("roundtrip-test", 30, "lpRoundtrip", '"domain":"corpus of %d valid records","generator":"https://corpora.example.org/gen/%d"'),
    ("property-test", 25, "lpGenerator", '"spec":"arbitrary source records, %d cases","runner":"proptest","seed":%d'),
    ("formal-proof", 8, "lpTheorem", '"statement":"GetPut and PutGet hold for lens family %d","system":"lean4","freeVariables":["s","v%d"]'),
    ("conformance-test", 12, "lpConformance", '"standard":"JSON Schema","version":"2020-12","clauses":["section-%d","section-%d"]'),
    ("static-check", 12, "lpChecker", '"checker":"panproto-lint","ruleset":"strict-%d","version":"0.8.%d"'),
    ("convergence-preserving", 6, "lpConvergence", '"property":"concurrent edits converge within %d steps (trial %d)","boundSteps":12'),
    ("coercion-law", 7, "lpCoercionLaw", '"standard":"ISO 8601","version":"2019.%d","violationThreshold":%d'),
]
TOOLS = ['{"name":"svc","version":"0.1.0","commit":"f75610a"}', '{"name":"lensworks-ci","version":"2.3.1"}',
         '{"name":"lean","version":"4.9.0"}', '{"name":"hypothesis","version":"6.100.1"}']
WANT_VERIFY_KINDS = ["roundtrip-test", "property-test", "formal-proof", "conformance-test", "static-check",
                     "convergence-preserving"]
VISIBILITIES = ["public-detailed", "public-minimal", "public-aggregate-only", "community-scoped", "private"]
ENC_KINDS = ["invocation-log", "curated", "roundtrip-verified", "production", "adversarial"]
ENC_RESULTS = ["success", "corrected", "rejected", "unknown"]
ACTIONS = ["read", "transform", "migrate", "aggregate", "publish", "index", "display", "archive"]
PURPOSES = ["care", "research", "directory listing", "analytics", "backup", "search indexing"]
COMMUNITY_WORDS = ["Interop", "Schema", "Lens", "Health", "Geo", "Rust", "Python", "TypeScript", "Archive",
                   "Open Data", "Civic", "Research", "Protocol", "Fediverse", "Library", "Museum", "Climate",
                   "Transit", "Finance", "Education"]
COMMUNITY_KINDS = ["Guild", "Commons", "Working Group", "Collective", "Users", "Circle", "Council", "Lab"]
VOCAB_NAMES = ["svc-actions", "data-purposes", "encounter-outcomes", "geo-feature-types", "consent-scopes",
               "record-kinds", "clinical-roles", "license-families", "access-levels", "retention-classes",
               "media-types", "org-units", "skill-levels", "risk-classes", "sensitivity-labels"]


class Zipf:
    """Samples indexes 0..n-1 with P(i) proportional to 1/(i+1)^s."""

    def __init__(self, n, s, rnd):
        total, cw = 0.0, []
        for i in range(n):
            total += 1.0 / (i + 1) ** s
            cw.append(total)
        self.cw, self.total, self.rnd, self.n = cw, total, rnd, n

    def __call__(self):
        i = bisect.bisect(self.cw, self.rnd() * self.total)
        return i if i < self.n else self.n - 1


def make_did(rng):
    return "did:plc:" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(24))


def tid(value):
    """13-character base32-sortable encoding of a 63-bit value."""
    return (TID_ALPHABET[value >> 60] + PAIRS[(value >> 50) & 1023] + PAIRS[(value >> 40) & 1023]
            + PAIRS[(value >> 30) & 1023] + PAIRS[(value >> 20) & 1023] + PAIRS[(value >> 10) & 1023]
            + PAIRS[value & 1023])


def cid_of(data, _sha=hashlib.sha256, _b32=base64.b32encode):
    return "b" + _b32(CID_PREFIX + _sha(data).digest()).decode("ascii").lower().rstrip("=")


GOV_MIX = bench_mix("governance")
CHANGE_STATUSES = [("draft", 20), ("review", 25), ("approved", 15), ("rejected", 10), ("released", 20),
                   ("superseded", 10)]
RUN_STATUSES = [("planned", 15), ("running", 20), ("paused", 10), ("completed", 35), ("failed", 10),
                ("rolled-back", 10)]
COMPATIBILITIES = [("fully-compatible", 25), ("backward-compatible", 45), ("breaking", 30)]
OPTIC_KINDS = ["iso", "lens", "lens", "prism", "affine", "traversal"]
RELATIONS = [("follows", 35), ("extends", 20), ("bridges", 35), ("forked-from", 10)]
UPDATE_POLICIES = ["review", "follow-compatible", "pinned"]
SCHEMA_AREAS = ["contact", "place", "patient", "event", "organization", "dataset", "observation", "license",
                "transit-stop", "artwork", "grant", "course"]
FIELDS = ["email", "geometry", "birthDate", "handle", "telecom", "address", "identifier", "startsAt", "license",
          "keywords", "photo", "extensions"]
CHANGES = [  # title, summary, consequence code, severity, headline
    ("add optional %s", "Records need %s and have nowhere to put it; add it as an optional field.",
     "new-optional-field", "information", "An optional %s field is added"),
    ("rename %s", "The name %s collides with the vocabulary's term; rename it and keep the old name readable.",
     "field-renamed", "review", "%s is renamed"),
    ("drop %s", "No application reads %s and it is the largest field in most exports; drop it.",
     "field-removed", "blocking", "%s is removed"),
    ("make %s required", "Every producer already writes %s; make it required so readers can rely on it.",
     "field-required", "review", "%s becomes required"),
    ("tighten %s to an enum", "Free text in %s defeats aggregation; restrict it to the community vocabulary.",
     "values-restricted", "blocking", "%s accepts only the vocabulary's values"),
]
AFFECTED = ["intake app", "export job", "search index", "public directory", "analytics pipeline",
            "mobile client", "partner feed", "archive snapshot"]
FAILURE_REASONS = ["the source record is invalid under the source schema",
                   "a required target field has no source value and no default",
                   "the value does not fit the target's enum; the lens has no mapping for it",
                   "the record changed during the run; retried at the next checkpoint"]
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
MEDIA_TYPES = ["application/schema+json", "application/json", "application/vnd.panproto.lens+json"]


def iso_time(us):
    return "%s.%03dZ" % (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(us // 1_000_000)), (us // 1000) % 1000)


def governance(count, seed, t, clock, communities, community_members, lens_uris, lens_src, lens_tgt, schema_uris,
               recent_verifications, write):
    """`count` records of the governance kinds (change proposals, migration runs, federations,
    community releases), each a create after time `t`, linked to the communities, lenses, schemas
    and verifications generated before them and to one another (a run carries out a change, a
    release lists changes). Draws from a random stream of its own. Returns what hot.json tells."""
    rng = random.Random("gen_events governance %d" % seed)
    rnd, ri = rng.random, rng.randrange
    z_lens = Zipf(len(lens_uris), 1.1, rnd)
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    ev_fmt = ('{"did":"%s","time_us":%d,"kind":"commit","commit":{"rev":"%s","operation":"create",'
              '"collection":"dev.svc.%s","rkey":"%s","record":%s,"cid":"%s"}}\n')

    def weighted(pairs):
        r = rnd() * sum(w for _, w in pairs)
        for value, w in pairs:
            r -= w
            if r < 0:
                return value
        return pairs[-1][0]

    def digest(*parts):
        return "sha256:" + hashlib.sha256(("%r" % (parts,)).encode()).hexdigest()

    def community_at(skew):
        return min(int(len(communities) * rnd() ** skew), len(communities) - 1)

    def member_of(ci):
        members = community_members[ci]
        return members[int(len(members) * rnd() ** 1.5)]

    proposals = []        # (uri, community index, lens index, status, title)
    by_community = {}     # community index -> indexes into proposals
    releasable = []       # indexes of approved or released proposals
    release_counts = {}
    found = {"change_community": {}, "change": {}, "release_community": {}, "federation_community": {},
             "peer": {}, "kinds": {}, "open_changes": 0, "active_runs": 0}
    buf = []
    for i in range(count):
        t += 1 + int(rnd() * 6000)
        when_us = t - 1_500_000 - (t % 997) * 1000
        when = iso_time(when_us)
        kind = "changeProposal" if i < 10 or not proposals else weighted(GOV_MIX)
        if kind == "changeProposal":
            ci = community_at(2)
            cu = communities[ci]
            li = z_lens()
            src, tgt = lens_src[li], lens_tgt[li]
            area = SCHEMA_AREAS[src % len(SCHEMA_AREAS)]
            field = FIELDS[ri(len(FIELDS))]
            title, summary, code, severity, headline = CHANGES[ri(len(CHANGES))]
            status = weighted(CHANGE_STATUSES)
            version = "%d.%d" % (2025, 1 + ri(12))
            created_us = when_us - ri(60, 7200) * 1_000_000
            rec = {
                "community": cu,
                "title": "%s: %s" % (area, title % field),
                "summary": summary % field,
                "author": member_of(ci),
                "status": status,
                "source": {"protocol": LANGUAGES[src % len(LANGUAGES)], "location": schema_uris[src],
                           "digest": digest(schema_uris[src])},
                "target": {"protocol": LANGUAGES[src % len(LANGUAGES)],
                           "location": "schemas/%s/%s.json" % (area, version), "digest": digest(schema_uris[tgt], i)},
                "compatibility": weighted(COMPATIBILITIES),
            }
            if rnd() < 0.8:
                rec["opticKind"] = OPTIC_KINDS[ri(len(OPTIC_KINDS))]
            if rnd() < 0.7:
                rec["consequences"] = [{"code": code, "severity": severity, "headline": headline % field,
                                        "detail": "%s Readers of %s records should check their use of %s."
                                                  % (summary % field, area, field)}]
            if rnd() < 0.5:
                rec["affected"] = rng.sample(AFFECTED, 1 + ri(3))
            if rnd() < 0.6:
                rec["rollback"] = "Restore the previous %s schema; the migration keeps %s in its complement." % (
                    area, field)
            if status != "draft":
                reviewers = []
                for _ in range(1 + ri(3)):
                    m = member_of(ci)
                    if m not in reviewers:
                        reviewers.append(m)
                stances = {"approved": ["approve"], "released": ["approve"], "rejected": ["reject", "reject", "abstain"]}
                rec["reviews"] = [
                    dict({"reviewer": m, "role": "moderator" if k == 0 else "member",
                          "stance": rng.choice(stances.get(status, ["approve", "reject", "abstain"])),
                          "reviewedAt": iso_time(created_us + (when_us - created_us) * (k + 1) // (len(reviewers) + 1))},
                         **({"comment": "Checked against our %s records." % area} if rnd() < 0.5 else {}))
                    for k, m in enumerate(reviewers)]
            rec["verificationStatus"] = {"draft": "not-run", "rejected": "refuted"}.get(
                status, "verified" if status in ("approved", "released") else ["incomplete", "verified", "refuted"][ri(3)])
            if recent_verifications and rnd() < 0.5:
                rec["verifications"] = [recent_verifications[ri(len(recent_verifications))] for _ in range(1 + ri(3))]
            rec["createdAt"] = iso_time(created_us)
            rec["updatedAt"] = when
            found["change_community"][cu] = found["change_community"].get(cu, 0) + 1
            found["open_changes"] += status in ("draft", "review")
        elif kind == "migrationRun":
            # Mostly a recently approved change; now and then a retry, or a dry run of an open one.
            if releasable and rnd() < 0.85:
                pi = releasable[-1 - int(min(len(releasable), 20) * rnd() ** 2)]
            else:
                pi = len(proposals) - 1 - int(min(len(proposals), 50) * rnd())
            change, ci, li, _, _ = proposals[pi]
            cu = communities[ci]
            status = weighted(RUN_STATUSES)
            total = int(10 ** (2 + 3 * rnd()))
            done = {"planned": 0, "completed": total}.get(status, ri(total))
            failed = 0 if status == "planned" else (ri(1, 50) if status in ("failed", "rolled-back") else ri(3))
            started = when_us - ri(300, 7200) * 1_000_000
            rec = {"community": cu, "change": change}
            if rnd() < 0.9:
                rec["lens"] = lens_uris[li]
            rec.update({"status": status, "total": total, "processed": done, "failed": failed})
            steps = min(done // max(total // 4, 1), 4)
            if steps:
                rec["checkpoints"] = [{"cursor": "%s/%08x" % (SCHEMA_AREAS[ci % len(SCHEMA_AREAS)], ri(1 << 32)),
                                       "processed": done * (k + 1) // steps,
                                       "recordedAt": iso_time(started + (k + 1) * 60_000_000)} for k in range(steps)]
            if failed:
                rec["failures"] = [{"record": "at://%s/app.example.%s/%s" % (
                    member_of(ci), SCHEMA_AREAS[ci % len(SCHEMA_AREAS)], tid((t - ri(10 ** 12)) << 10)),
                                    "reason": FAILURE_REASONS[ri(len(FAILURE_REASONS))]} for _ in range(min(failed, 3))]
            rec["createdAt"] = iso_time(started)
            rec["updatedAt"] = when
            found["change"][change] = found["change"].get(change, 0) + 1
            found["active_runs"] += status in ("planned", "running", "paused")
        elif kind == "communityRelease":
            # The community of a recent proposal: one that is active.
            ci = proposals[min(int(len(proposals) * rnd() ** 0.5), len(proposals) - 1)][1]
            cu = communities[ci]
            mine = by_community[ci]
            ready = [p for p in mine if proposals[p][3] in ("approved", "released")] or mine[-1:]
            n_rel = release_counts.get(ci, 0)
            release_counts[ci] = n_rel + 1
            version = "2025.%d.%d" % (1 + n_rel // 4, n_rel % 4)
            area = SCHEMA_AREAS[ci % len(SCHEMA_AREAS)]
            rec = {"community": cu, "version": version, "manifestDigest": digest(cu, version, "manifest"),
                   "digest": digest(cu, version), "changes": [proposals[p][0] for p in ready[-4:]]}
            rec["artifacts"] = [{"location": loc, "digest": digest(cu, version, loc), "mediaType": mt}
                                for loc, mt in [("schemas/%s/%s.json" % (area, version), MEDIA_TYPES[0]),
                                                ("lenses/%s.lens" % area, MEDIA_TYPES[2]),
                                                ("MANIFEST.json", MEDIA_TYPES[1])][:1 + ri(3)]]
            if len(communities) > 1 and rnd() < 0.4:
                other = community_at(3)
                if other == ci:
                    other = (ci + 1) % len(communities)
                rec["dependencies"] = [{"community": communities[other], "relation": weighted(RELATIONS),
                                        "release": "2025.%d" % (1 + ri(6)), "updatePolicy": UPDATE_POLICIES[ri(3)]}]
            rec["signatures"] = [{"signer": member_of(ci), "algorithm": "ES256",
                                  "publicKey": "zDnae" + "".join(rng.choice(BASE58) for _ in range(44)),
                                  "signature": "".join(rng.choice(B64URL) for _ in range(86)),
                                  "signedAt": iso_time(t - (k + 1) * 120_000_000)} for k in range(1 + ri(2))]
            rec["createdAt"] = when
            found["release_community"][cu] = found["release_community"].get(cu, 0) + 1
        else:  # federation
            ci = community_at(2)
            cu = communities[ci]
            pi = community_at(3)
            if pi == ci:
                pi = (ci + 1) % len(communities)
            peer = communities[pi]
            relation = weighted(RELATIONS)
            rec = {"community": cu, "peer": peer, "relation": relation}
            if rnd() < 0.7:
                rec["release"] = (">=2025.%d" if rnd() < 0.5 else "2025.%d") % (1 + ri(6))
            rec["updatePolicy"] = UPDATE_POLICIES[ri(3)]
            if relation in ("bridges", "extends") and rnd() < 0.8:
                rec["mappings"] = [lens_uris[z_lens()] for _ in range(1 + ri(3))]
            if rnd() < 0.5:
                rec["notes"] = "We %s their %s schemas%s." % (
                    {"follows": "take", "extends": "extend", "bridges": "map to", "forked-from": "forked"}[relation],
                    SCHEMA_AREAS[pi % len(SCHEMA_AREAS)],
                    " through the listed lenses" if "mappings" in rec else "; no mapping is claimed")
            rec["createdAt"] = when
            found["federation_community"][cu] = found["federation_community"].get(cu, 0) + 1
            found["peer"][peer] = found["peer"].get(peer, 0) + 1
        rec["$type"] = "dev.svc." + kind
        found["kinds"][kind] = found["kinds"].get(kind, 0) + 1
        cu = rec["community"]
        did = cu[5:cu.index("/", 5)]
        ck = clock[did]
        rkey = tid(((t - 137) << 10) | ck)
        body = dumps(rec)
        cid = cid_of(body.encode())
        if kind == "changeProposal":
            by_community.setdefault(ci, []).append(len(proposals))
            if rec["status"] in ("approved", "released"):
                releasable.append(len(proposals))
            proposals.append(("at://%s/dev.svc.changeProposal/%s" % (did, rkey), ci, li, rec["status"], rec["title"]))
        buf.append(ev_fmt % (did, t, tid((t << 10) | ck), kind, rkey, body, cid))
        if len(buf) >= 8192:
            write("".join(buf))
            buf.clear()
    write("".join(buf))
    return found


def generate(n, out, seed=1):
    rng = random.Random(seed)
    rnd = rng.random
    ri = rng.randrange

    # ---- populations ----------------------------------------------------------------------------
    people = [make_did(rng) for _ in range(20000)]
    orgs = [make_did(rng) for _ in range(2000)]  # community accounts
    clock = {}
    for d in people + orgs:
        clock[d] = ri(1024)
    requesters = people[:]
    rng.shuffle(requesters)
    members_pool = people[:]
    rng.shuffle(members_pool)
    z_requester = Zipf(len(people), 1.15, rnd)
    z_person = Zipf(len(people), 0.9, rnd)
    z_member = Zipf(len(people), 1.05, rnd)
    z_verifier = Zipf(600, 1.0, rnd)  # verifiers are people[0:600] shuffled below
    verifiers = rng.sample(people, 600)
    z_org = Zipf(len(orgs), 1.0, rnd)
    z_framework = Zipf(len(FRAMEWORKS), 1.2, rnd)

    n_schemas, n_lenses = 5000, 20000
    schema_refs = []   # {uri, cid, language}
    schema_short = []  # {uri, language}
    schema_uris = []
    for i in range(n_schemas):
        author = people[ri(len(people))]
        uri = "at://%s/dev.panproto.schema.schema/%s" % (author, tid(((START_US - ri(10 ** 13)) << 10) | clock[author]))
        schema_uris.append(uri)
        schema_refs.append('{"uri":"%s","cid":"%s","language":"%s"}' % (
            uri, cid_of(uri.encode()), LANGUAGES[i % len(LANGUAGES)]))
        schema_short.append('{"uri":"%s","language":"%s"}' % (uri, LANGUAGES[i % len(LANGUAGES)]))
    z_schema = Zipf(n_schemas, 1.0, rnd)
    lens_uris, lens_refs, lens_short, lens_src, lens_tgt = [], [], [], [], []
    for i in range(n_lenses):
        author = people[z_person()]
        uri = "at://%s/dev.panproto.schema.lens/%s" % (author, tid(((START_US - ri(10 ** 13)) << 10) | clock[author]))
        src = z_schema()
        tgt = z_schema()
        if tgt == src:
            tgt = (src + 1) % n_schemas
        lens_uris.append(uri)
        lens_src.append(src)
        lens_tgt.append(tgt)
        direction = ',"direction":"bidirectional"' if i % 3 == 0 else (',"direction":"unidirectional"' if i % 3 == 1 else "")
        lens_refs.append('{"uri":"%s","cid":{"$link":"%s"}%s}' % (uri, cid_of(uri.encode()), direction))
        lens_short.append('{"uri":"%s"%s}' % (uri, direction))
    z_lens = Zipf(n_lenses, 1.1, rnd)

    kind_names = [k for k, _ in MIX]
    kind_cw, acc = [], 0
    for _, w in MIX:
        acc += w
        kind_cw.append(acc)
    kind_total = acc
    vk_cw, acc = [], 0
    for v in VERIFY_KINDS:
        acc += v[1]
        vk_cw.append(acc)
    vk_total = acc

    # ---- rings of records already emitted, for references -------------------------------------
    communities = []          # community uris (all of them)
    recent = []               # (uri, cid) of recent records of any kind, ring buffer
    RING = 4096
    recent_verifications = []  # verification uris, ring buffer
    recent_adapters = []
    community_members = []    # the members of each community, as `communities`

    counts = {
        "requester": {}, "framework": {}, "lens": {}, "member": {}, "community": {}, "pair": {},
        "subject": {}, "holder": {}, "community_name": {}, "vocab_name": {}, "kinds": {},
    }
    c_req, c_fw, c_lens, c_mem = counts["requester"], counts["framework"], counts["lens"], counts["member"]
    c_comm, c_pair, c_subj, c_hold = counts["community"], counts["pair"], counts["subject"], counts["holder"]
    c_cname, c_vname, c_kinds = counts["community_name"], counts["vocab_name"], counts["kinds"]

    t = START_US
    sec_cache = {}
    buf = []
    write = out.write
    gmtime, strftime = time.gmtime, time.strftime
    ev_fmt = ('{"did":"%s","time_us":%d,"kind":"commit","commit":{"rev":"%s","operation":"create",'
              '"collection":"dev.svc.%s","rkey":"%s","record":%s,"cid":"%s"}}\n')

    for i in range(n):
        t += 1 + int(rnd() * 6000)
        created = t - 1_500_000 - (t % 997) * 1000  # the record's own time, a little earlier
        csec = created // 1_000_000
        cprefix = sec_cache.get(csec)
        if cprefix is None:
            if len(sec_cache) > 4096:
                sec_cache.clear()
            cprefix = sec_cache[csec] = strftime("%Y-%m-%dT%H:%M:%S", gmtime(csec))
        when = "%s.%03dZ" % (cprefix, (created // 1000) % 1000)

        if i < 25:
            kind = "community"
        else:
            kind = kind_names[bisect.bisect(kind_cw, rnd() * kind_total)]
        c_kinds[kind] = c_kinds.get(kind, 0) + 1

        if kind == "bounty":
            did = requesters[z_requester()]
            c_req[did] = c_req.get(did, 0) + 1
            r = rnd()
            # status: open 40%, absent 20%, claimed 15%, fulfilled 20%, withdrawn 5%
            s = rnd()
            if r < 0.6:
                li = z_lens()
                src, tgt = lens_src[li], lens_tgt[li]
                wants = '{"$type":"dev.svc.bounty#wantLens","source":%s,"target":%s%s}' % (
                    schema_short[src], schema_short[tgt], ',"bidirectional":true' if s < 0.3 else "")
                ful = lens_uris[li]
                if s < 0.75:
                    key = (schema_uris[src], schema_uris[tgt])
                    c_pair[key] = c_pair.get(key, 0) + 1
            elif r < 0.85:
                li = z_lens()
                wants = '{"$type":"dev.svc.bounty#wantVerification","lens":%s,"kind":"%s"}' % (
                    lens_refs[li], WANT_VERIFY_KINDS[ri(6)])
                ful = recent_verifications[ri(len(recent_verifications))] if recent_verifications else None
            else:
                fw = FRAMEWORKS[z_framework()]
                wants = '{"$type":"dev.svc.bounty#wantAdapter","framework":"%s","versionRange":">=%d.%d <%d"}' % (
                    fw, 1 + ri(4), ri(20), 5 + ri(3))
                ful = recent_adapters[ri(len(recent_adapters))] if recent_adapters else None
            if s < 0.4:
                status = ',"status":"open"'
            elif s < 0.6:
                status = ""
            elif s < 0.75:
                status = ',"status":"claimed"'
            elif s < 0.95 and ful is not None:
                status = ',"status":"fulfilled","fulfillment":"%s"' % ful
            else:
                status = ',"status":"withdrawn"'
            c = rnd()
            if c < 0.35:
                cons = (',"constraints":[{"$type":"dev.svc.bounty#constraintPerformance","metric":"p99-latency-us",'
                        '"threshold":%d,"cmp":"le","sampleSize":%d}]' % (50 + ri(950), 1000 * (1 + ri(50))))
            elif c < 0.55:
                cons = (',"constraints":[{"$type":"dev.svc.bounty#constraintDeadline","deadline":"2025-%02d-%02dT23:59:59Z",'
                        '"graceSeconds":86400},{"$type":"dev.svc.bounty#constraintLicense","spdx":"Apache-2.0"}]'
                        % (7 + ri(5), 1 + ri(28)))
            else:
                cons = ""
            reward = (',"reward":{"summary":"Bounty #%d: paid review and a public thank-you",'
                      '"externalRef":"https://opencollective.com/svc-bounties"}' % i
                      if r >= 0.85 or rnd() < 0.4 else "")
            rec = '{"requester":"%s","wants":%s%s%s%s,"occurredAt":"%s","$type":"dev.svc.bounty"}' % (
                did, wants, cons, reward, status, when)

        elif kind == "verification":
            li = z_lens()
            lu = lens_uris[li]
            c_lens[lu] = c_lens.get(lu, 0) + 1
            did = verifiers[z_verifier()]
            vk = VERIFY_KINDS[bisect.bisect(vk_cw, rnd() * vk_total)]
            prop = '{"$type":"dev.svc.defs#%s",%s}' % (vk[2], vk[3] % (100 + ri(5000), ri(1000)))
            r = rnd()
            if r < 0.7:
                result = '"holds"'
                extra = ""
            elif r < 0.9:
                result = '"falsified"'
                extra = ',"counterexample":"%s"' % cid_of(b"cx%d" % i)
            else:
                result = '"inconclusive"'
                extra = ""
            rec = ('{"lens":%s,"kind":"%s","verifier":"%s","tool":%s,"property":%s,"result":%s%s,'
                   '"occurredAt":"%s","$type":"dev.svc.verification"}') % (
                lens_refs[li], vk[0], did, TOOLS[ri(4)], prop, result, extra, when)

        elif kind == "adapter":
            did = people[z_person()]
            fw = FRAMEWORKS[z_framework()]
            c_fw[fw] = c_fw.get(fw, 0) + 1
            if rnd() < 0.05:
                fw = fw.capitalize()  # the framework query is ASCII case-insensitive
            r = rnd()
            if r < 0.5:
                proto = ('{"kind":"subprocess","entryPoint":"svc-%s-adapter --stdio","inputSchema":%s}'
                         % (fw.lower(), schema_refs[z_schema()]))
                iso = ('{"kind":"process","networkPolicy":"none","filesystemPolicy":"scratch",'
                       '"resourceLimits":{"maxMemoryBytes":%d,"maxCpuSeconds":%d,"maxWallSeconds":%d}}'
                       % (1 << (26 + ri(5)), 1 + ri(60), 30 + ri(90)))
            elif r < 0.8:
                proto = ('{"kind":"http","entryPoint":"https://adapters.example.net/%s/v%d/apply","outputSchema":%s}'
                         % (fw.lower(), 1 + ri(3), schema_refs[z_schema()]))
                iso = '{"kind":"container","networkPolicy":"egress-allowlist","filesystemPolicy":"readonly"}'
            else:
                proto = '{"kind":"wasm","entryPoint":"%s_adapter.wasm#apply_lens"}' % fw.lower().replace("-", "_")
                iso = ('{"kind":"wasm-sandbox","networkPolicy":"none","resourceLimits":{"maxMemoryBytes":%d}}'
                       % (1 << (24 + ri(4))))
            ver = (',"verification":"%s"' % recent_verifications[ri(len(recent_verifications))]
                   if recent_verifications and rnd() < 0.4 else "")
            rec = ('{"framework":"%s","versionRange":">=%d.%d, <%d","invocationProtocol":%s,"isolation":%s,'
                   '"author":"%s"%s,"occurredAt":"%s","$type":"dev.svc.adapter"}') % (
                fw, ri(4), ri(30), 4 + ri(3), proto, iso, did, ver, when)

        elif kind == "recommendation":
            ci = int(len(communities) * rnd() ** 2)
            cu = communities[ci]
            did = cu[5:cu.index("/", 5)]
            li = z_lens()
            if rnd() < 0.75:
                conds = ('[{"$type":"dev.svc.recommendation#conditionSourceIs","schema":%s},'
                         '{"$type":"dev.svc.recommendation#conditionTargetIs","schema":%s},'
                         '{"$type":"dev.svc.recommendation#conditionAnd"}]' % (
                             schema_short[lens_src[li]], schema_short[lens_tgt[li]]))
            else:
                conds = ('[{"$type":"dev.svc.recommendation#conditionDataHas","property":"%s"},'
                         '{"$type":"dev.svc.recommendation#conditionActionSubsumedBy","action":"%s"},'
                         '{"$type":"dev.svc.recommendation#conditionAnd"}]' % (
                             ["email", "geometry", "birthDate", "handle"][ri(4)], ACTIONS[ri(len(ACTIONS))]))
            if rnd() < 0.7:
                path = lens_short[li]
                req = (',"requiredVerifications":[{"$type":"dev.svc.defs#lpRoundtrip","domain":"%s records"}]'
                       % LANGUAGES[ri(len(LANGUAGES))] if rnd() < 0.5 else "")
            else:
                path = lens_short[li] + "," + lens_short[z_lens()]
                req = ""
            rec = ('{"issuingCommunity":"%s","conditions":%s,"lensPath":[%s]%s,"occurredAt":"%s",'
                   '"$type":"dev.svc.recommendation"}') % (cu, conds, path, req, when)

        elif kind == "community":
            did = orgs[z_org()]
            name = "%s %s" % (COMMUNITY_WORDS[ri(len(COMMUNITY_WORDS))], COMMUNITY_KINDS[ri(len(COMMUNITY_KINDS))])
            c_cname[name] = c_cname.get(name, 0) + 1
            k = 3 + ri(8)
            members = []
            for _ in range(k):
                m = members_pool[z_member()]
                if m not in members:
                    members.append(m)
            for m in members:
                c_mem[m] = c_mem.get(m, 0) + 1
            roles = ',"roleAssignments":[{"did":"%s","role":"moderator"}]' % members[0] if rnd() < 0.5 else ""
            rec = ('{"name":"%s","description":"%s: people who maintain lenses and verifications for %s schemas.",'
                   '"members":["%s"]%s,"recordHosting":"%s","createdAt":"%s","$type":"dev.svc.community"}') % (
                name, name, LANGUAGES[ri(len(LANGUAGES))], '","'.join(members), roles,
                ["member-hosted", "community-hosted", "hybrid"][ri(3)], when)

        elif kind == "dialect":
            ci = int(len(communities) * rnd() ** 3)
            cu = communities[ci]
            c_comm[cu] = c_comm.get(cu, 0) + 1
            did = cu[5:cu.index("/", 5)]
            rec = ('{"owningCommunity":"%s","name":"dialect-%d","description":"House style for %s records.",'
                   '"idiolects":[%s,%s],"preferredLenses":[%s],"version":"%d.%d.0","createdAt":"%s",'
                   '"$type":"dev.svc.dialect"}') % (
                cu, ri(500), LANGUAGES[ri(len(LANGUAGES))], schema_short[z_schema()], schema_short[z_schema()],
                lens_short[z_lens()], ri(3), ri(20), when)

        elif kind == "belief":
            did = people[z_person()]
            su, sc = recent[ri(len(recent))]
            c_subj[su] = c_subj.get(su, 0) + 1
            r = rnd()
            if r < 0.7:
                holder = ',"holder":"%s"' % did
                c_hold[did] = c_hold.get(did, 0) + 1
            else:
                holder = ""
            b = rnd()
            if b < 0.4:
                basis = ',"basis":{"$type":"dev.svc.defs#basisSelfAsserted"}'
            elif b < 0.7:
                basis = (',"basis":{"$type":"dev.svc.defs#basisExternalSignal","url":"https://ci.example.org/runs/%d",'
                         '"signalType":"ci-run"}' % i)
            else:
                basis = ',"basis":{"$type":"dev.svc.defs#basisCommunityPolicy","community":"%s"}' % (
                    communities[ri(len(communities))])
            rec = ('{"subject":{"uri":"%s","cid":"%s"}%s%s,"annotations":"Seen in %d downstream runs; '
                   'holds for the data we send.","visibility":"%s","occurredAt":"%s","$type":"dev.svc.belief"}') % (
                su, sc, holder, basis, 1 + ri(500), VISIBILITIES[ri(5)], when)

        elif kind == "vocab":
            did = orgs[z_org()]
            name = VOCAB_NAMES[int(len(VOCAB_NAMES) * rnd() ** 2)]
            c_vname[name] = c_vname.get(name, 0) + 1
            w = rnd()
            if w < 0.4:
                world = "closed-with-default"
                body = ('"top":"use","actions":[{"id":"use","parents":[]},{"id":"read","parents":["use"]},'
                        '{"id":"%s","parents":["read"],"class":"processing"}]' % ["transform", "migrate", "aggregate", "publish", "index"][ri(5)])
            elif w < 0.8:
                world = "open"
                body = ('"nodes":[{"id":"care","kind":"concept","label":"Direct care"},'
                        '{"id":"research","kind":"concept","label":"Research","status":"established"}],'
                        '"edges":[{"source":"research","target":"care","relationSlug":"related_to","weight":%d}]'
                        % ri(1001))
            else:
                world = "hierarchy-closed"
                body = ('"top":"outcome","nodes":[{"id":"outcome","kind":"type"},{"id":"accepted","kind":"concept"}],'
                        '"edges":[{"source":"accepted","target":"outcome","relationSlug":"subsumed_by"}]')
            rec = ('{"name":"%s","description":"Version %d of the %s vocabulary.","world":"%s",%s,'
                   '"occurredAt":"%s","$type":"dev.svc.vocab"}') % (name, 1 + ri(9), name, world, body, when)

        else:  # encounter
            did = people[z_person()]
            li = z_lens()
            rec = ('{"lens":%s,"sourceSchema":%s,"targetSchema":%s,"use":{"action":"%s","purpose":"%s"},'
                   '"kind":"%s","downstreamResult":"%s","visibility":"%s","occurredAt":"%s",'
                   '"$type":"dev.svc.encounter"}') % (
                lens_refs[li], schema_short[lens_src[li]], schema_short[lens_tgt[li]], ACTIONS[ri(len(ACTIONS))],
                PURPOSES[ri(len(PURPOSES))], ENC_KINDS[ri(5)], ENC_RESULTS[ri(4)], VISIBILITIES[ri(5)], when)

        ck = clock[did]
        rkey = tid(((t - 137) << 10) | ck)
        rev = tid((t << 10) | ck)
        cid = cid_of(rec.encode())
        uri = "at://%s/dev.svc.%s/%s" % (did, kind, rkey)
        if kind == "community":
            communities.append(uri)
            community_members.append(members)
        elif kind == "verification":
            if len(recent_verifications) < RING:
                recent_verifications.append(uri)
            else:
                recent_verifications[i % RING] = uri
        elif kind == "adapter":
            if len(recent_adapters) < RING:
                recent_adapters.append(uri)
            else:
                recent_adapters[i % RING] = uri
        if len(recent) < RING:
            recent.append((uri, cid))
        else:
            recent[i % RING] = (uri, cid)
        buf.append(ev_fmt % (did, t, rev, kind, rkey, rec, cid))
        if len(buf) >= 8192:
            write("".join(buf))
            buf.clear()
    write("".join(buf))
    buf.clear()

    # ---- the governance kinds of interface 0.13, after the others ----------------------------
    # From a random stream of their own and at later times, so that the lines above are the same
    # for a given N and seed as before these kinds existed.
    extra = (n + 12) // 24
    gov = governance(extra, seed, t, clock, communities, community_members, lens_uris, lens_src, lens_tgt,
                     schema_uris, recent_verifications, write)
    for kind, c in gov["kinds"].items():
        c_kinds[kind] = c

    def top(d):
        return max(d.items(), key=lambda kv: (kv[1], kv[0]))[0] if d else None

    pair = top(c_pair)
    hot = {
        "requester_did": top(c_req),
        "framework": top(c_fw),
        "lens_uri": top(c_lens),
        "member_did": top(c_mem),
        "source_uri": pair[0] if pair else None,
        "target_uri": pair[1] if pair else None,
        "community_uri": top(c_comm),
        "subject_uri": top(c_subj),
        "holder_did": top(c_hold),
        "community_name": top(c_cname),
        "vocab_name": top(c_vname),
        "change_community_uri": top(gov["change_community"]),
        "change_uri": top(gov["change"]),
        "release_community_uri": top(gov["release_community"]),
        "federation_community_uri": top(gov["federation_community"]),
        "peer_uri": top(gov["peer"]),
        "counts": {
            "events": n + extra,
            "kinds": dict(sorted(c_kinds.items())),
            "requester_did": c_req.get(top(c_req), 0),
            "framework": c_fw.get(top(c_fw), 0),
            "lens_uri": c_lens.get(top(c_lens), 0),
            "member_did": c_mem.get(top(c_mem), 0),
            "source_target_pair_open": c_pair.get(pair, 0),
            "community_uri_dialects": c_comm.get(top(c_comm), 0),
            "open_change_proposals": gov["open_changes"],
            "active_migration_runs": gov["active_runs"],
            "change_uri_migration_runs": gov["change"].get(top(gov["change"]), 0),
            "peer_uri_federations": gov["peer"].get(top(gov["peer"]), 0),
        },
    }
    return hot


def main(argv):
    args = argv[1:]
    seed, pos = 1, []
    while args:
        a = args.pop(0)
        if a == "--seed":
            seed = int(args.pop(0))
        elif a.startswith("--seed="):
            seed = int(a.split("=", 1)[1])
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("--"):
            print("error: unknown flag %s" % a, file=sys.stderr)
            return 2
        else:
            pos.append(a)
    n = int(pos[0].replace("_", "")) if pos else 1_000_000
    path = pos[1] if len(pos) > 1 and pos[1] != "-" else None
    started = time.time()
    if path:
        with open(path, "w", encoding="utf-8", buffering=1 << 20) as f:
            hot = generate(n, f, seed)
        with open(path + ".hot.json", "w", encoding="utf-8") as f:
            json.dump(hot, f, indent=2)
            f.write("\n")
    else:
        hot = generate(n, sys.stdout, seed)
        sys.stdout.flush()
    print(json.dumps(hot), file=sys.stderr)
    print("generated %d events in %.1f s" % (n, time.time() - started), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
