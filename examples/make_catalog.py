#!/usr/bin/env python3
"""Writes examples/catalog.jsonl: a small, coherent catalog of `dev.svc.*` records as Jetstream
commit events (one JSON object per line), covering all 16 record kinds, a few updates and a delete.

    python3 examples/make_catalog.py [OUT]        (default: examples/catalog.jsonl beside this file)

The service's own validator checks it: an import prints `0 invalid` (and the lifecycle test
asserts so).

Deterministic: fixed seed, fixed clock, DIDs and CIDs derived from names and contents, so running
it again reproduces the checked-in file byte for byte.

The records of the interface's 0.13 control plane are written by hand in control-plane.jsonl
and appended as they are; then come the records made after them.

The story: a handful of people (a schema/lens author, a verifier, adapter authors, requesters, a
geo moderator, a did:web verification bot) and four communities. Schemas and lenses live in
`dev.panproto.schema.*` records, referenced by at-uri and published at the end. Bounties ask for lenses
(two of them for the same schema pair), verifications and adapters; verifications of every kind
cover a hot lens; adapters for serde, pydantic, zod, jackson; communities recommend lens paths,
own dialects and vocabularies, deliberate and tally; beliefs are held about records of the file.
"""

import base64
import datetime
import hashlib
import json
import os
import random
import sys

SEED = 20250602
rng = random.Random(SEED)

TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
START = datetime.datetime(2025, 6, 2, 9, 0, 0, tzinfo=datetime.timezone.utc)


def tid(us, clock_id):
    value = (us << 10) | (clock_id & 0x3FF)
    out = []
    for _ in range(13):
        out.append(TID_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def did_plc(name):
    digest = hashlib.sha256(("svc-example:" + name).encode()).digest()
    return "did:plc:" + base64.b32encode(digest).decode().lower()[:24]


def cid_of(obj):
    """A CIDv1 (dag-cbor, sha2-256) shaped string over the canonical JSON of obj."""
    data = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    raw = b"\x01\x71\x12\x20" + hashlib.sha256(data).digest()
    return "b" + base64.b32encode(raw).decode().lower().rstrip("=")


def us_of(dt):
    return int((dt - EPOCH).total_seconds()) * 1_000_000 + dt.microsecond


def iso(us):
    dt = EPOCH + datetime.timedelta(microseconds=us)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)


def clock_of(did):
    return int(hashlib.sha256(did.encode()).hexdigest()[:3], 16) & 0x3FF


# --- actors --------------------------------------------------------------------------------------

AMARA = did_plc("amara")      # schema and lens author
BRAM = did_plc("bram")        # verifier, runs the guild CI
CHEN = did_plc("chen")        # adapter author (serde, zod)
DAGNY = did_plc("dagny")      # health-data engineer, requests bounties
EITAN = did_plc("eitan")      # requester, pydantic adapter author
FATOU = did_plc("fatou")      # geo working group moderator
GUS = "did:web:verify.lensworks.dev"  # a verification bot on did:web

GUILD = did_plc("interop-guild")
HEALTH = did_plc("health-data-commons")
GEO = did_plc("geo-schemas-wg")
SERDE = did_plc("serde-users")


# --- schema and lens records that live outside dev.svc (dev.panproto.schema.*) -------------------

def external(did, nsid, name, when):
    us = us_of(when)
    uri = "at://%s/%s/%s" % (did, nsid, tid(us, clock_of(did)))
    return {"uri": uri, "cid": cid_of({"name": name, "uri": uri})}


D = datetime.datetime
UTC = datetime.timezone.utc
SCHEMA = "dev.panproto.schema.schema"
LENS = "dev.panproto.schema.lens"

S_PERSON_LEX = dict(external(AMARA, SCHEMA, "app.example.person lexicon", D(2025, 4, 3, 10, 12, tzinfo=UTC)), language="atproto-lexicon")
S_PERSON_JS = dict(external(AMARA, SCHEMA, "person.schema.json", D(2025, 4, 3, 10, 40, tzinfo=UTC)), language="json-schema")
S_FHIR_PATIENT = dict(external(HEALTH, SCHEMA, "FHIR R4 Patient", D(2025, 4, 9, 14, 2, tzinfo=UTC)), language="fhir-structuredefinition")
S_CONTACT_V2 = dict(external(DAGNY, SCHEMA, "contact v2 (protobuf)", D(2025, 4, 12, 8, 30, tzinfo=UTC)), language="protobuf")
S_GEOJSON = dict(external(FATOU, SCHEMA, "GeoJSON Feature", D(2025, 4, 20, 16, 5, tzinfo=UTC)), language="json-schema")
S_PLACE = dict(external(FATOU, SCHEMA, "schema.org Place", D(2025, 4, 20, 16, 45, tzinfo=UTC)), language="json-ld")
S_PET = dict(external(EITAN, SCHEMA, "petstore Pet (OpenAPI 3.1)", D(2025, 4, 28, 11, 0, tzinfo=UTC)), language="openapi")
S_USER_PY = dict(external(EITAN, SCHEMA, "app.models.User (pydantic)", D(2025, 4, 28, 11, 20, tzinfo=UTC)), language="pydantic")

L_PERSON = external(AMARA, LENS, "person lexicon -> json schema", D(2025, 4, 4, 9, 0, tzinfo=UTC))
L_FHIR_CONTACT = external(DAGNY, LENS, "fhir patient -> contact v2", D(2025, 4, 14, 13, 0, tzinfo=UTC))
L_GEO_PLACE = external(FATOU, LENS, "geojson feature -> schema.org place", D(2025, 4, 22, 10, 0, tzinfo=UTC))
L_CONTACT_PERSON = external(AMARA, LENS, "contact v2 -> person json", D(2025, 5, 1, 15, 30, tzinfo=UTC))
L_PET_USER = external(EITAN, LENS, "openapi pet -> pydantic", D(2025, 5, 6, 9, 15, tzinfo=UTC))


def sref(s, with_cid=True, language=True):
    out = {"uri": s["uri"]}
    if with_cid:
        out["cid"] = s["cid"]
    if language:
        out["language"] = s["language"]
    return out


def lref(l, direction=None, with_cid=True):
    out = {"uri": l["uri"]}
    if with_cid:
        out["cid"] = {"$link": l["cid"]}
    if direction:
        out["direction"] = direction
    return out


def blob_cid(label):
    return cid_of({"blob": label})


# --- the event stream ----------------------------------------------------------------------------

class Stream:
    def __init__(self):
        self.now = us_of(START)
        self.lines = []
        self.cids = {}

    def tick(self):
        self.now += rng.randint(7, 95) * 60_000_000 + rng.randint(0, 999_999)
        return self.now

    def at(self, back_seconds=None):
        """A datetime a little before the current event (the record's own time)."""
        back = rng.randint(2, 240) if back_seconds is None else back_seconds
        return iso(self.now - back * 1_000_000 - rng.randint(0, 999) * 1000)

    def _emit(self, did, coll, rkey, op, record=None):
        ev = {
            "did": did,
            "time_us": self.now,
            "kind": "commit",
            "commit": {"rev": tid(self.now, clock_of(did)), "operation": op, "collection": coll, "rkey": rkey},
        }
        if record is not None:
            cid = cid_of(record)
            ev["commit"]["record"] = record
            ev["commit"]["cid"] = cid
        self.lines.append(json.dumps(ev, separators=(",", ":"), ensure_ascii=False))
        return ev

    def create(self, did, kind, build):
        """build(created_at_iso) -> record body without $type. Returns {"uri", "cid"}."""
        self.tick()
        created_us = self.now - rng.randint(1, 30) * 1_000_000
        rkey = tid(created_us, clock_of(did))
        coll = "dev.svc." + kind
        record = build(iso(created_us))
        record["$type"] = coll
        ev = self._emit(did, coll, rkey, "create", record)
        uri = "at://%s/%s/%s" % (did, coll, rkey)
        self.cids[uri] = ev["commit"]["cid"]
        return {"uri": uri, "cid": ev["commit"]["cid"], "record": record}

    def update(self, ref, change):
        self.tick()
        did, coll, rkey = ref["uri"][5:].split("/")
        record = json.loads(json.dumps(ref["record"]))
        change(record)
        ev = self._emit(did, coll, rkey, "update", record)
        ref = {"uri": ref["uri"], "cid": ev["commit"]["cid"], "record": record}
        self.cids[ref["uri"]] = ref["cid"]
        return ref

    def delete(self, ref):
        self.tick()
        did, coll, rkey = ref["uri"][5:].split("/")
        self._emit(did, coll, rkey, "delete")


def strong(ref):
    return {"uri": ref["uri"], "cid": ref["cid"]}


def vref(v):
    return {"uri": v["uri"], "cid": v["cid"]}


def build(s):
    # ---- communities ----------------------------------------------------------------------------
    guild = s.create(GUILD, "community", lambda t: {
        "name": "Interop Guild",
        "description": "People who write and review lenses between the everyday schemas of the "
                       "ATmosphere: profiles, contacts, posts. We keep a public list of the lenses "
                       "we trust and why.",
        "members": [AMARA, BRAM, CHEN, EITAN, GUS],
        "roleAssignments": [
            {"did": AMARA, "role": "author"},
            {"did": BRAM, "role": "moderator"},
            {"did": GUS, "role": "delegate"},
        ],
        "recordHosting": "member-hosted",
        "appviewEndpoint": "https://guild.interop.example/xrpc",
        "coreSchemas": [sref(S_PERSON_LEX), sref(S_PERSON_JS)],
        "coreLenses": [lref(L_PERSON, "bidirectional")],
        "conventions": [
            {"$type": "dev.svc.community#conventionReviewCadence", "maxDays": 90, "scope": "core lenses"},
            {"$type": "dev.svc.community#conventionVerificationReq", "kind": "roundtrip-test",
             "property": {"$type": "dev.svc.defs#lpRoundtrip", "domain": "all valid app.example.person records"}},
            {"$type": "dev.svc.community#conventionDeprecationPolicy", "noticePeriodDays": 30, "replacementRequired": True},
        ],
        "conventionsText": "Core lenses are re-reviewed every quarter. A lens enters the core list "
                           "only with a passing roundtrip test.",
        "createdAt": t,
    })
    health = s.create(HEALTH, "community", lambda t: {
        "name": "Health Data Commons",
        "description": "Clinical and research data engineers mapping FHIR resources to the "
                       "lighter schemas our apps use. Records about patients never leave "
                       "community-scoped visibility.",
        "members": [DAGNY, BRAM, EITAN, FATOU],
        "roleAssignments": [{"did": DAGNY, "role": "moderator"}, {"did": EITAN, "role": "member"}],
        "recordHosting": "community-hosted",
        "coreSchemas": [sref(S_FHIR_PATIENT), sref(S_CONTACT_V2)],
        "coreLenses": [lref(L_FHIR_CONTACT, "unidirectional")],
        "endorsedCommunities": [guild["uri"]],
        "conventions": [
            {"$type": "dev.svc.community#conventionVerificationReq", "kind": "formal-proof"},
            {"$type": "dev.svc.community#conventionReviewCadence", "maxDays": 30},
        ],
        "createdAt": t,
    })
    geo = s.create(GEO, "community", lambda t: {
        "name": "Geo Schemas WG",
        "description": "A working group for geographic feature schemas: GeoJSON, schema.org "
                       "Place, OSM tags.",
        "members": [FATOU, AMARA, BRAM],
        "roleAssignments": [{"did": FATOU, "role": "moderator"}],
        "recordHosting": "hybrid",
        "coreSchemas": [sref(S_GEOJSON), sref(S_PLACE)],
        "coreLenses": [lref(L_GEO_PLACE)],
        "endorsedCommunities": [guild["uri"]],
        "createdAt": t,
    })
    serde = s.create(SERDE, "community", lambda t: {
        "name": "serde users",
        "description": "Rust developers who ship adapters that run lenses over serde types.",
        "members": [CHEN, AMARA, EITAN],
        "recordHosting": "member-hosted",
        "createdAt": t,
    })

    # ---- vocabularies (one of each world) -------------------------------------------------------
    v_actions = s.create(GUILD, "vocab", lambda t: {
        "name": "svc-actions",
        "description": "What a consumer does with data that went through a lens.",
        "world": "closed-with-default",
        "top": "use",
        "actions": [
            {"id": "use", "parents": [], "description": "Any use."},
            {"id": "read", "parents": ["use"], "class": "access"},
            {"id": "transform", "parents": ["use"], "class": "processing"},
            {"id": "migrate", "parents": ["transform"], "class": "processing",
             "description": "One-way move of records to a new schema."},
            {"id": "aggregate", "parents": ["read"], "class": "analytics"},
            {"id": "publish", "parents": ["use"], "class": "disclosure"},
        ],
        "occurredAt": t,
    })
    v_purposes = s.create(HEALTH, "vocab", lambda t: {
        "name": "data-purposes",
        "description": "Purposes of processing, loosely following DPV.",
        "world": "open",
        "nodes": [
            {"id": "care", "kind": "concept", "label": "Direct care", "status": "established"},
            {"id": "research", "kind": "concept", "label": "Research", "alternateLabels": ["study"],
             "externalIds": [{"system": "wikidata", "identifier": "Q42240", "matchType": "close",
                              "uri": "https://www.wikidata.org/wiki/Q42240"}],
             "status": "established"},
            {"id": "quality-improvement", "kind": "concept", "label": "Quality improvement",
             "status": "provisional", "scopeNote": "Audits and service evaluation, not research."},
        ],
        "edges": [
            {"source": "quality-improvement", "target": "care", "relationSlug": "related_to", "weight": 600,
             "metadata": {"confidence": 700, "source": "HDC review 2025-05"}},
            {"source": "research", "target": "care", "relationSlug": "polar_opposite_of", "weight": 200},
        ],
        "occurredAt": t,
    })
    v_outcomes = s.create(BRAM, "vocab", lambda t: {
        "name": "encounter-outcomes",
        "description": "Downstream results of an encounter, as a closed hierarchy.",
        "world": "hierarchy-closed",
        "top": "outcome",
        "nodes": [
            {"id": "outcome", "kind": "type", "label": "Outcome"},
            {"id": "accepted", "kind": "concept", "label": "Accepted as is"},
            {"id": "accepted-with-edits", "kind": "concept", "label": "Accepted after edits"},
            {"id": "refused", "kind": "concept", "label": "Refused"},
            {"id": "narrower", "kind": "relation", "label": "narrower",
             "relationMetadata": {"transitive": True, "asymmetric": True, "inverseOf": "broader",
                                  "world": "hierarchy-closed"}},
        ],
        "edges": [
            {"source": "accepted", "target": "outcome", "relationSlug": "subsumed_by"},
            {"source": "accepted-with-edits", "target": "accepted", "relationSlug": "subsumed_by"},
            {"source": "refused", "target": "outcome", "relationSlug": "subsumed_by"},
        ],
        "occurredAt": t,
    })
    v_geo = s.create(GEO, "vocab", lambda t: {
        "name": "geo-feature-types",
        "world": "open",
        "nodes": [
            {"id": "place", "kind": "type", "label": "Place",
             "externalIds": [{"system": "schema-org", "identifier": "Place", "matchType": "exact",
                              "uri": "https://schema.org/Place"}]},
            {"id": "building", "kind": "type", "label": "Building"},
        ],
        "edges": [{"source": "building", "target": "place", "relationSlug": "subsumed_by", "weight": 1000}],
        "occurredAt": t,
    })

    # ---- dialects -------------------------------------------------------------------------------
    d_guild = s.create(GUILD, "dialect", lambda t: {
        "owningCommunity": guild["uri"],
        "name": "guild-core",
        "description": "The person and contact shapes the guild treats as canonical.",
        "idiolects": [sref(S_PERSON_LEX), sref(S_PERSON_JS, language=False)],
        "preferredLenses": [lref(L_PERSON, "bidirectional")],
        "version": "2025.1",
        "createdAt": t,
    })
    s.create(HEALTH, "dialect", lambda t: {
        "owningCommunity": health["uri"],
        "name": "fhir-lite",
        "description": "FHIR R4 Patient with the extensions we actually use; everything else is dropped.",
        "idiolects": [sref(S_FHIR_PATIENT), sref(S_CONTACT_V2)],
        "preferredLenses": [lref(L_FHIR_CONTACT, "unidirectional")],
        "version": "0.3.0",
        "createdAt": t,
    })
    s.create(GEO, "dialect", lambda t: {
        "owningCommunity": geo["uri"],
        "name": "geojson-strict",
        "idiolects": [sref(S_GEOJSON)],
        "preferredLenses": [lref(L_GEO_PLACE)],
        "createdAt": t,
    })
    s.create(GUILD, "dialect", lambda t: {
        "owningCommunity": guild["uri"],
        "name": "guild-core",
        "description": "2025.2: the contact shape joins the core.",
        "idiolects": [sref(S_PERSON_LEX), sref(S_PERSON_JS), sref(S_CONTACT_V2)],
        "preferredLenses": [lref(L_PERSON, "bidirectional"), lref(L_CONTACT_PERSON, "unidirectional")],
        "deprecations": [{"ref": L_PET_USER["uri"], "deprecatedAt": s.at(3600),
                          "reason": "Out of scope for the guild; moved to the serde users' list."}],
        "version": "2025.2",
        "previousVersion": d_guild["uri"],
        "createdAt": t,
    })

    # ---- bounties, first wave -------------------------------------------------------------------
    b_fhir_1 = s.create(DAGNY, "bounty", lambda t: {
        "requester": DAGNY,
        "wants": {"$type": "dev.svc.bounty#wantLens", "source": sref(S_FHIR_PATIENT), "target": sref(S_PERSON_JS)},
        "constraints": [
            {"$type": "dev.svc.bounty#constraintPerformance", "metric": "p99-latency-us", "threshold": 250,
             "cmp": "le", "sampleSize": 10000},
            {"$type": "dev.svc.bounty#constraintLicense", "spdx": "Apache-2.0", "allow": ["MIT", "Apache-2.0"], "deny": ["GPL-3.0-only"]},
            {"$type": "dev.svc.bounty#constraintDeadline", "deadline": "2025-07-31T23:59:59Z", "graceSeconds": 86400},
        ],
        "reward": {"summary": "Two weeks of on-call cover and a public thank-you.",
                   "externalRef": "https://opencollective.com/health-data-commons"},
        "eligibility": [
            {"$type": "dev.svc.bounty#eligibilityMember", "community": health["uri"]},
            {"$type": "dev.svc.bounty#eligibilityDid", "did": BRAM},
            {"$type": "dev.svc.bounty#eligibilityOr"},
        ],
        "status": "open",
        "basis": {"$type": "dev.svc.defs#basisCommunityPolicy", "community": health["uri"]},
        "occurredAt": t,
    })
    s.create(EITAN, "bounty", lambda t: {
        "requester": EITAN,
        "wants": {"$type": "dev.svc.bounty#wantLens", "source": sref(S_FHIR_PATIENT, language=False),
                  "target": sref(S_PERSON_JS, language=False), "bidirectional": True},
        "reward": {"summary": "Beer at the next meetup."},
        "occurredAt": t,
    })
    s.create(FATOU, "bounty", lambda t: {
        "requester": FATOU,
        "wants": {"$type": "dev.svc.bounty#wantLens", "source": sref(S_GEOJSON), "target": sref(S_PLACE), "bidirectional": True},
        "constraints": [{"$type": "dev.svc.bounty#constraintConformance", "kind": "conformance-test",
                         "property": {"$type": "dev.svc.defs#lpConformance", "standard": "RFC 7946", "version": "2016",
                                      "clauses": ["3.1.1", "3.2"]}}],
        "status": "claimed",
        "occurredAt": t,
    })
    s.create(EITAN, "bounty", lambda t: {
        "requester": EITAN,
        "wants": {"$type": "dev.svc.bounty#wantVerification", "lens": lref(L_FHIR_CONTACT), "kind": "formal-proof"},
        "constraints": [{"$type": "dev.svc.bounty#constraintConformance", "kind": "formal-proof",
                         "property": {"$type": "dev.svc.defs#lpTheorem",
                                      "statement": "forall p : Patient, get (put p (get p)) = get p", "system": "lean4"}}],
        "eligibility": [{"$type": "dev.svc.bounty#eligibilityVerificationFor",
                         "property": {"$type": "dev.svc.defs#lpTheorem", "statement": "lens laws", "system": "lean4"}}],
        "status": "open",
        "occurredAt": t,
    })
    b_zod = s.create(DAGNY, "bounty", lambda t: {
        "requester": DAGNY,
        "wants": {"$type": "dev.svc.bounty#wantAdapter", "framework": "zod", "versionRange": ">=3.22 <4"},
        "constraints": [{"$type": "dev.svc.bounty#constraintLicense", "spdx": "MIT"}],
        "status": "claimed",
        "occurredAt": t,
    })
    b_pydantic = s.create(FATOU, "bounty", lambda t: {
        "requester": FATOU,
        "wants": {"$type": "dev.svc.bounty#wantAdapter", "framework": "pydantic", "versionRange": "^2.6"},
        "status": "withdrawn",
        "occurredAt": t,
    })

    # ---- verifications: every kind on the hot person lens, a few on others ----------------------
    def verification(did, lens, kind, prop, result, tool, **extra):
        def body(t):
            r = {"lens": lref(lens, "bidirectional" if lens is L_PERSON else None), "kind": kind, "verifier": did,
                 "tool": tool, "property": prop, "result": result}
            r.update(extra)
            r["occurredAt"] = t
            return r
        return s.create(did, "verification", body)

    panproto = {"name": "svc", "version": "0.1.0", "commit": "f75610a"}
    ver_rt = verification(BRAM, L_PERSON, "roundtrip-test",
                          {"$type": "dev.svc.defs#lpRoundtrip", "domain": "app.example.person corpus (1,204 records)",
                           "generator": "https://github.com/interop-guild/corpora/tree/main/person"},
                          "holds", panproto)
    ver_pt = verification(BRAM, L_PERSON, "property-test",
                          {"$type": "dev.svc.defs#lpGenerator", "spec": "arbitrary Person with unicode names up to 64 graphemes",
                           "runner": "proptest", "seed": 424242},
                          "holds", panproto, dependencies=[ver_rt["uri"]])
    ver_proof = verification(AMARA, L_PERSON, "formal-proof",
                             {"$type": "dev.svc.defs#lpTheorem", "statement": "PutGet and GetPut hold for the person lens",
                              "system": "lean4", "freeVariables": ["p", "j"]},
                             "holds", {"name": "lean", "version": "4.9.0"}, proofArtifact=blob_cid("person-lens.olean"))
    ver_conf = verification(GUS, L_PERSON, "conformance-test",
                            {"$type": "dev.svc.defs#lpConformance", "standard": "JSON Schema", "version": "2020-12",
                             "clauses": ["format-assertion", "unevaluatedProperties"]},
                            "falsified", {"name": "lensworks-ci", "version": "2.3.1"},
                            counterexample=blob_cid("person-unevaluated-props"),
                            basis={"$type": "dev.svc.defs#basisExternalSignal",
                                   "url": "https://ci.lensworks.dev/runs/88213", "signalType": "ci-run"})
    ver_static = verification(GUS, L_PERSON, "static-check",
                              {"$type": "dev.svc.defs#lpChecker", "checker": "panproto-lint", "ruleset": "strict", "version": "0.8.2"},
                              "holds", {"name": "lensworks-ci", "version": "2.3.1"})
    ver_conv = verification(BRAM, L_PERSON, "convergence-preserving",
                            {"$type": "dev.svc.defs#lpConvergence", "property": "concurrent edits to name and handle merge identically on both sides",
                             "boundSteps": 12},
                            "inconclusive", panproto)
    ver_coerce = verification(GUS, L_PERSON, "coercion-law",
                              {"$type": "dev.svc.defs#lpCoercionLaw", "standard": "ISO 8601", "version": "2019",
                               "violationThreshold": 0},
                              "holds", {"name": "lensworks-ci", "version": "2.3.1"})
    ver_fhir_rt = verification(BRAM, L_FHIR_CONTACT, "roundtrip-test",
                               {"$type": "dev.svc.defs#lpRoundtrip", "domain": "synthea patients, 500 records"},
                               "falsified", panproto, counterexample=blob_cid("patient-with-two-names"))
    ver_fhir_pt = verification(DAGNY, L_FHIR_CONTACT, "property-test",
                               {"$type": "dev.svc.defs#lpGenerator", "spec": "Patient with 0..3 telecom entries", "runner": "hypothesis", "seed": 7},
                               "holds", {"name": "svc", "version": "0.1.0"})
    ver_geo = verification(FATOU, L_GEO_PLACE, "conformance-test",
                           {"$type": "dev.svc.defs#lpConformance", "standard": "RFC 7946", "version": "2016"},
                           "holds", {"name": "geojson-validator", "version": "1.4.0"},
                           basis={"$type": "dev.svc.defs#basisSelfAsserted"})

    # ---- adapters -------------------------------------------------------------------------------
    a_serde = s.create(CHEN, "adapter", lambda t: {
        "framework": "serde",
        "versionRange": ">=1.0.190, <2",
        "invocationProtocol": {"kind": "subprocess", "entryPoint": "svc-serde-adapter --stdio",
                               "inputSchema": sref(S_PERSON_LEX), "outputSchema": sref(S_PERSON_JS)},
        "isolation": {"kind": "process", "networkPolicy": "none", "filesystemPolicy": "scratch",
                      "resourceLimits": {"maxMemoryBytes": 268435456, "maxCpuSeconds": 10, "maxWallSeconds": 30}},
        "author": CHEN,
        "verification": ver_rt["uri"],
        "occurredAt": t,
    })
    a_pydantic = s.create(EITAN, "adapter", lambda t: {
        "framework": "pydantic",
        "versionRange": ">=2.6,<3",
        "invocationProtocol": {"kind": "http", "entryPoint": "https://adapters.eitan.dev/pydantic/v1/apply",
                               "inputSchema": sref(S_PET), "outputSchema": sref(S_USER_PY)},
        "isolation": {"kind": "container", "networkPolicy": "egress-allowlist", "filesystemPolicy": "readonly",
                      "resourceLimits": {"maxMemoryBytes": 536870912, "maxWallSeconds": 15}},
        "author": EITAN,
        "occurredAt": t,
    })
    a_zod = s.create(CHEN, "adapter", lambda t: {
        "framework": "zod",
        "versionRange": ">=3.22 <4",
        "invocationProtocol": {"kind": "wasm", "entryPoint": "zod_adapter.wasm#apply_lens"},
        "isolation": {"kind": "wasm-sandbox", "networkPolicy": "none", "filesystemPolicy": "readonly",
                      "resourceLimits": {"maxMemoryBytes": 67108864, "maxCpuSeconds": 2}},
        "author": CHEN,
        "verification": ver_static["uri"],
        "occurredAt": t,
    })
    s.create(AMARA, "adapter", lambda t: {
        "framework": "Serde",
        "versionRange": "1.x",
        "invocationProtocol": {"kind": "wasm", "entryPoint": "serde_lens.wasm#run"},
        "isolation": {"kind": "wasm-sandbox", "networkPolicy": "none"},
        "author": AMARA,
        "verification": ver_proof["uri"],
        "occurredAt": t,
    })
    s.create(BRAM, "adapter", lambda t: {
        "framework": "jackson",
        "versionRange": "[2.15,3.0)",
        "invocationProtocol": {"kind": "subprocess", "entryPoint": "java -jar svc-jackson-adapter.jar"},
        "isolation": {"kind": "vm", "networkPolicy": "egress-denylist", "filesystemPolicy": "writable-subtree",
                      "resourceLimits": {"maxMemoryBytes": 1073741824, "maxCpuSeconds": 60, "maxWallSeconds": 120}},
        "author": BRAM,
        "occurredAt": t,
    })

    # ---- bounties, second wave ------------------------------------------------------------------
    s.create(GUILD, "bounty", lambda t: {
        "requester": GUILD,
        "wants": {"$type": "dev.svc.bounty#wantVerification", "lens": lref(L_PERSON, "bidirectional"), "kind": "roundtrip-test"},
        "status": "fulfilled",
        "fulfillment": ver_rt["uri"],
        "occurredAt": t,
    })
    s.create(GUILD, "bounty", lambda t: {
        "requester": GUILD,
        "wants": {"$type": "dev.svc.bounty#wantLens", "source": sref(S_CONTACT_V2), "target": sref(S_PERSON_JS)},
        "constraints": [{"$type": "dev.svc.bounty#constraintDependency", "bounty": b_fhir_1["uri"]}],
        "eligibility": [
            {"$type": "dev.svc.bounty#eligibilityMember", "community": guild["uri"]},
            {"$type": "dev.svc.bounty#eligibilityMember", "community": serde["uri"]},
            {"$type": "dev.svc.bounty#eligibilityOr"},
            {"$type": "dev.svc.bounty#eligibilityDid", "did": EITAN},
            {"$type": "dev.svc.bounty#eligibilityNot"},
            {"$type": "dev.svc.bounty#eligibilityAnd"},
        ],
        "status": "open",
        "basis": {"$type": "dev.svc.defs#basisCommunityPolicy", "community": guild["uri"],
                  "policyUri": "https://guild.interop.example/policy/bounties"},
        "occurredAt": t,
    })
    s.create(BRAM, "bounty", lambda t: {
        "requester": BRAM,
        "wants": {"$type": "dev.svc.bounty#wantVerification", "lens": lref(L_PERSON, "bidirectional"),
                  "kind": "convergence-preserving"},
        "constraints": [{"$type": "dev.svc.bounty#constraintPerformance", "metric": "merge-steps", "threshold": 20, "cmp": "lt"}],
        "occurredAt": t,
    })

    # ---- recommendations ------------------------------------------------------------------------
    r_person = s.create(GUILD, "recommendation", lambda t: {
        "issuingCommunity": guild["uri"],
        "conditions": [
            {"$type": "dev.svc.recommendation#conditionSourceIs", "schema": sref(S_PERSON_LEX)},
            {"$type": "dev.svc.recommendation#conditionTargetIs", "schema": sref(S_PERSON_JS)},
            {"$type": "dev.svc.recommendation#conditionAnd"},
        ],
        "lensPath": [lref(L_PERSON, "bidirectional")],
        "requiredVerifications": [
            {"$type": "dev.svc.defs#lpRoundtrip", "domain": "app.example.person corpus"},
            {"$type": "dev.svc.defs#lpTheorem", "statement": "PutGet and GetPut hold for the person lens"},
        ],
        "caveats": [{"mode": "lossy-field", "affects": ["pronouns"], "severity": "warn"}],
        "caveatsText": "Pronouns are flattened to a single string on the JSON side.",
        "basis": {"$type": "dev.svc.defs#basisDerivedFromRecord", "source": strong(ver_rt), "inferenceRule": "roundtrip-holds"},
        "occurredAt": t,
    })
    s.create(HEALTH, "recommendation", lambda t: {
        "issuingCommunity": health["uri"],
        "conditions": [
            {"$type": "dev.svc.recommendation#conditionSourceIs", "schema": sref(S_FHIR_PATIENT)},
            {"$type": "dev.svc.recommendation#conditionActionSubsumedBy", "action": "migrate", "vocabulary": vref(v_actions)},
            {"$type": "dev.svc.recommendation#conditionAnd"},
            {"$type": "dev.svc.recommendation#conditionPurposeSubsumedBy", "purpose": "care", "vocabulary": vref(v_purposes)},
            {"$type": "dev.svc.recommendation#conditionAnd"},
        ],
        "lensPath": [lref(L_FHIR_CONTACT, "unidirectional"), lref(L_CONTACT_PERSON, "unidirectional")],
        "requiredVerifications": [{"$type": "dev.svc.defs#lpGenerator", "spec": "Patient with 0..3 telecom entries"}],
        "caveats": [{"mode": "drops-extensions", "affects": ["extension", "modifierExtension"], "severity": "error"},
                    {"mode": "roundtrip-falsified", "severity": "info"}],
        "annotations": "Only for migrating care records; research exports must keep the FHIR shape.",
        "occurredAt": t,
    })
    s.create(GEO, "recommendation", lambda t: {
        "issuingCommunity": geo["uri"],
        "conditions": [{"$type": "dev.svc.recommendation#conditionSourceIs", "schema": sref(S_GEOJSON, with_cid=False)}],
        "preconditions": [{"$type": "dev.svc.recommendation#conditionDataHas", "property": "geometry.coordinates"}],
        "lensPath": [lref(L_GEO_PLACE)],
        "requiredVerifications": [{"$type": "dev.svc.defs#lpConformance", "standard": "RFC 7946", "version": "2016"}],
        "occurredAt": t,
    })
    s.create(GUILD, "recommendation", lambda t: {
        "issuingCommunity": guild["uri"],
        "conditions": [
            {"$type": "dev.svc.recommendation#conditionDataHas", "property": "email"},
            {"$type": "dev.svc.recommendation#conditionNot"},
        ],
        "lensPath": [lref(L_PERSON, "bidirectional")],
        "requiredVerifications": [{"$type": "dev.svc.defs#lpCoercionLaw", "standard": "ISO 8601", "version": "2019"}],
        "supersedes": r_person["uri"],
        "occurredAt": t,
    })

    # ---- encounters, corrections, retrospections, observations ----------------------------------
    e1 = s.create(DAGNY, "encounter", lambda t: {
        "lens": lref(L_FHIR_CONTACT, "unidirectional"),
        "sourceSchema": sref(S_FHIR_PATIENT),
        "targetSchema": sref(S_CONTACT_V2),
        "sourceInstance": blob_cid("patient-0193"),
        "producedOutput": {"$link": blob_cid("contact-0193")},
        "use": {"action": "migrate", "material": {"scope": "outpatient contacts, clinic B",
                                                   "uri": "https://data.hdc.example/sets/clinic-b"},
                "purpose": "care", "actor": "nightly migration job",
                "actionVocabulary": vref(v_actions), "purposeVocabulary": vref(v_purposes)},
        "kind": "production",
        "downstreamResult": "corrected",
        "holder": DAGNY,
        "visibility": "community-scoped",
        "occurredAt": t,
    })
    e2 = s.create(EITAN, "encounter", lambda t: {
        "lens": lref(L_PERSON, "bidirectional"),
        "sourceSchema": sref(S_PERSON_LEX),
        "targetSchema": sref(S_PERSON_JS),
        "use": {"action": "read", "purpose": "directory listing"},
        "kind": "invocation-log",
        "downstreamResult": "success",
        "visibility": "public-detailed",
        "occurredAt": t,
    })
    e3 = s.create(FATOU, "encounter", lambda t: {
        "lens": lref(L_GEO_PLACE),
        "sourceSchema": sref(S_GEOJSON),
        "use": {"action": "publish", "material": {"scope": "city parks layer"}},
        "kind": "adversarial",
        "downstreamResult": "rejected",
        "annotations": "Polygons with holes come out as a single outer ring.",
        "visibility": "public-minimal",
        "basis": {"$type": "dev.svc.defs#basisSelfAsserted"},
        "occurredAt": t,
    })
    s.create(BRAM, "encounter", lambda t: {
        "lens": lref(L_PERSON, "bidirectional"),
        "sourceSchema": {"language": "atproto-lexicon", "cid": S_PERSON_LEX["cid"]},
        "use": {"action": "transform"},
        "kind": "roundtrip-verified",
        "downstreamResult": "unknown",
        "visibility": "public-aggregate-only",
        "occurredAt": t,
    })
    s.create(DAGNY, "correction", lambda t: {
        "encounter": {"uri": e1["uri"], "cid": e1["cid"]},
        "path": "/name/0/given",
        "originalValue": {"given": ["Mary Ann"]},
        "correctedValue": {"given": ["Mary", "Ann"]},
        "reason": "lens-error",
        "rationale": "The lens joins given names with a space; contact v2 keeps them as a list.",
        "holder": DAGNY,
        "visibility": "community-scoped",
        "occurredAt": t,
    })
    s.create(EITAN, "correction", lambda t: {
        "encounter": {"uri": e2["uri"]},
        "path": "/handle",
        "reason": "user-mistake",
        "visibility": "public-detailed",
        "occurredAt": t,
    })
    s.create(FATOU, "correction", lambda t: {
        "encounter": {"uri": e3["uri"], "cid": e3["cid"]},
        "path": "/geometry/coordinates/1",
        "originalValue": {"rings": 1},
        "correctedValue": {"rings": 2},
        "reason": "domain-difference",
        "rationale": "schema.org Place has no polygon holes; we publish the hole as a separate feature.",
        "basis": {"$type": "dev.svc.defs#basisCommunityPolicy", "community": geo["uri"]},
        "visibility": "public-minimal",
        "occurredAt": t,
    })
    s.create(BRAM, "retrospection", lambda t: {
        "encounter": {"uri": e1["uri"], "cid": e1["cid"]},
        "finding": {"kind": "merge-divergence",
                    "detail": "Going through contact v2 and then to person JSON disagrees with a direct FHIR import on given names.",
                    "evidence": {"$type": "dev.svc.defs#evidenceDivergence",
                                 "pathA": [lref(L_FHIR_CONTACT), lref(L_CONTACT_PERSON)],
                                 "pathB": [lref(L_PERSON)],
                                 "witnessInput": blob_cid("patient-0193")}},
        "latency": 86400,
        "detectingParty": BRAM,
        "confidence": 850,
        "detectedAt": s.at(600),
        "occurredAt": t,
    })
    s.create(DAGNY, "retrospection", lambda t: {
        "encounter": {"uri": e1["uri"]},
        "finding": {"kind": "data-loss", "detail": "telecom[].period is dropped.",
                    "evidence": {"$type": "dev.svc.defs#evidenceLoss", "sourceField": "telecom.period",
                                 "targetSchema": sref(S_CONTACT_V2)}},
        "detectingParty": DAGNY,
        "confidence": 1000,
        "disputedAttribution": False,
        "detectedAt": s.at(1200),
        "occurredAt": t,
    })
    s.create(FATOU, "retrospection", lambda t: {
        "encounter": {"uri": e3["uri"], "cid": e3["cid"]},
        "finding": {"kind": "reconciliation-mismatch", "detail": "Published park areas differ from the source layer by 2%.",
                    "evidence": {"$type": "dev.svc.defs#evidenceMismatch", "leftRecord": blob_cid("parks-src"),
                                 "rightRecord": blob_cid("parks-pub"), "expectedEqualityOn": "properties.area_m2"}},
        "latency": 3600,
        "detectingParty": FATOU,
        "confidence": 600,
        "disputedAttribution": True,
        "detectedAt": s.at(300),
        "occurredAt": t,
    })
    s.create(BRAM, "observation", lambda t: {
        "observer": BRAM,
        "method": {"name": "encounter-success-rate", "description": "Share of encounters whose downstream result is success, per lens.",
                   "parameters": {"minEncounters": 3}},
        "scope": {"lenses": [lref(L_PERSON), lref(L_FHIR_CONTACT)], "communities": [guild["uri"], health["uri"]],
                  "encounterKinds": ["production", "invocation-log"],
                  "window": {"from": "2025-05-01T00:00:00Z", "until": "2025-06-01T00:00:00Z"}},
        "output": {"perMille": {"person": 970, "fhirContact": 610}, "encounters": 214},
        "version": "1.0.0",
        "visibility": "public-aggregate-only",
        "occurredAt": t,
    })
    s.create(GUS, "observation", lambda t: {
        "observer": GUS,
        "method": {"name": "ci-flakiness", "parameters": {"runs": 50}},
        "scope": {"lenses": [lref(L_PERSON)]},
        "output": {"flakyRuns": 1, "runs": 50},
        "version": "2.3.1",
        "visibility": "public-detailed",
        "basis": {"$type": "dev.svc.defs#basisExternalSignal", "url": "https://ci.lensworks.dev/reports/flaky", "signalType": "ci-report"},
        "occurredAt": t,
    })
    s.create(FATOU, "observation", lambda t: {
        "observer": FATOU,
        "method": {"name": "precision-audit", "description": "Coordinate precision after the lens, in decimal digits."},
        "scope": {"communities": [geo["uri"]], "encounterKinds": ["adversarial"]},
        "output": {"medianDigits": 7, "minDigits": 5},
        "version": "0.1",
        "visibility": "community-scoped",
        "occurredAt": t,
    })

    # ---- deliberations --------------------------------------------------------------------------
    dl_guild = s.create(GUILD, "deliberation", lambda t: {
        "owningCommunity": guild["uri"],
        "topic": "Make the person lens the guild default",
        "description": "The conformance test is falsified on unevaluatedProperties; do we adopt anyway?",
        "authRequired": True,
        "classification": "proposal",
        "status": "open",
        "createdAt": t,
    })
    dl_health = s.create(HEALTH, "deliberation", lambda t: {
        "owningCommunity": health["uri"],
        "topic": "Are FHIR extensions in scope for fhir-lite?",
        "classification": "question",
        "status": "open",
        "createdAt": t,
    })
    dl_geo = s.create(GEO, "deliberation", lambda t: {
        "owningCommunity": geo["uri"],
        "topic": "Polygon holes lost by the GeoJSON to Place lens",
        "authRequired": False,
        "classification": "grievance",
        "status": "tabled",
        "createdAt": t,
    })
    st1 = s.create(BRAM, "deliberationStatement", lambda t: {
        "deliberation": strong(dl_guild), "text": "Adopt it; the failing clause only affects extra properties we never send.",
        "classification": "proposal", "createdAt": t})
    st2 = s.create(GUS, "deliberationStatement", lambda t: {
        "deliberation": strong(dl_guild), "text": "Wait for a fix of unevaluatedProperties before adopting.",
        "classification": "dissent", "createdAt": t})
    st3 = s.create(DAGNY, "deliberationStatement", lambda t: {
        "deliberation": strong(dl_health), "text": "Only the us-core race and ethnicity extensions.",
        "classification": "claim", "createdAt": t})
    st4 = s.create(EITAN, "deliberationStatement", lambda t: {
        "deliberation": strong(dl_health), "text": "What happens to modifierExtension?",
        "classification": "question", "anonymous": True, "createdAt": t})
    st5 = s.create(FATOU, "deliberationStatement", lambda t: {
        "deliberation": strong(dl_geo), "text": "Publish holes as separate features until the lens is fixed.",
        "classification": "proposal", "createdAt": t})
    votes = [
        (AMARA, st1, "agree", 1000, "Extra properties are out of our data."),
        (CHEN, st1, "agree", 800, None),
        (GUS, st1, "disagree", 1000, "Conformance first."),
        (EITAN, st2, "pass", None, None),
        (BRAM, st3, "agree", 500, None),
        (AMARA, st5, "agree", None, "Fine as a stopgap."),
    ]
    vote_refs = []
    for voter, st, stance, weight, why in votes:
        def body(t, st=st, stance=stance, weight=weight, why=why):
            r = {"subject": strong(st), "stance": stance}
            if weight is not None:
                r["weight"] = weight
            if why:
                r["rationale"] = why
            r["createdAt"] = t
            return r
        vote_refs.append(s.create(voter, "deliberationVote", body))
    tally_tool = {"name": "svc-tally", "version": "0.1.0"}
    o_guild = s.create(GUILD, "deliberationOutcome", lambda t: {
        "deliberation": strong(dl_guild),
        "statementTallies": [
            {"statement": strong(st1), "counts": [{"stance": "agree", "count": 2}, {"stance": "disagree", "count": 1}],
             "weightedCounts": [{"stance": "agree", "count": 1800}, {"stance": "disagree", "count": 1000}]},
            {"statement": strong(st2), "counts": [{"stance": "pass", "count": 1}]},
        ],
        "adopted": [strong(st1)],
        "computedAt": s.at(30),
        "tool": tally_tool,
        "occurredAt": t,
    })
    s.create(HEALTH, "deliberationOutcome", lambda t: {
        "deliberation": strong(dl_health),
        "statementTallies": [
            {"statement": strong(st3), "counts": [{"stance": "agree", "count": 1}]},
            {"statement": strong(st4), "counts": []},
        ],
        "computedAt": s.at(30),
        "tool": tally_tool,
        "occurredAt": t,
    })
    s.create(GEO, "deliberationOutcome", lambda t: {
        "deliberation": strong(dl_geo),
        "statementTallies": [{"statement": strong(st5), "counts": [{"stance": "agree", "count": 1},
                                                                   {"stance": "disagree", "count": 0}]}],
        "adopted": [strong(st5)],
        "computedAt": s.at(30),
        "occurredAt": t,
    })

    # ---- beliefs --------------------------------------------------------------------------------
    s.create(BRAM, "belief", lambda t: {
        "subject": strong(ver_conf),
        "holder": BRAM,
        "basis": {"$type": "dev.svc.defs#basisDerivedFromRecord", "source": strong(ver_static), "inferenceRule": "lint-clean-implies-minor"},
        "annotations": "The falsified clause is real but harmless for profile data.",
        "visibility": "public-detailed",
        "occurredAt": t,
    })
    s.create(DAGNY, "belief", lambda t: {
        "subject": strong(a_zod),
        "holder": DAGNY,
        "basis": {"$type": "dev.svc.defs#basisExternalSignal", "url": "https://github.com/chen/zod-adapter/issues/12",
                  "signalType": "issue", "description": "Works with zod 3.23 in our staging."},
        "visibility": "public-minimal",
        "occurredAt": t,
    })
    s.create(GUILD, "belief", lambda t: {
        "subject": strong(r_person),
        "basis": {"$type": "dev.svc.defs#basisCommunityPolicy", "community": guild["uri"]},
        "visibility": "community-scoped",
        "occurredAt": t,
    })
    s.create(EITAN, "belief", lambda t: {
        "subject": strong(a_serde),
        "occurredAt": t,
    })
    s.create(GUS, "belief", lambda t: {
        "subject": strong(ver_conf),
        "holder": GUS,
        "basis": {"$type": "dev.svc.defs#basisSelfAsserted"},
        "annotations": "Falsified and it matters: unevaluatedProperties is how we reject unknown fields.",
        "occurredAt": t,
    })

    # ---- updates and a delete -------------------------------------------------------------------
    def fulfil(r):
        r["status"] = "fulfilled"
        r["fulfillment"] = a_zod["uri"]
    s.update(b_zod, fulfil)

    def adopt(r):
        r["status"] = "adopted"
        r["closedAt"] = s.at(5)
        r["outcome"] = o_guild["uri"]
    s.update(dl_guild, adopt)

    def join(r):
        r["members"] = r["members"] + [DAGNY]
        r["roleAssignments"] = r.get("roleAssignments", []) + [{"did": DAGNY, "role": "member"}]
    s.update(serde, join)

    s.delete(b_pydantic)
    return s


HERE = os.path.dirname(os.path.abspath(__file__))


def append_control_plane(s):
    """The interface's 0.13 control plane (change proposals, releases, migration runs,
    federations), written by hand in control-plane.jsonl, appended as it is."""
    with open(os.path.join(HERE, "control-plane.jsonl"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                s.lines.append(line)
                s.now = max(s.now, json.loads(line)["time_us"])


def later(s):
    """What came after: two vocabularies a newcomer's first searches find, and the guild CI's
    weekly runs on the person lens over three months, so a lens's chart has weeks to show."""
    s.create(AMARA, "vocab", lambda t: {
        "name": "Dublin Core metadata terms",
        "description": "The fifteen Dublin Core elements for describing any resource's metadata "
                       "(title, creator, subject, date, rights...), as the guild's person and "
                       "document schemas name them.",
        "world": "open",
        "nodes": [
            {"id": "title", "kind": "concept", "label": "Title",
             "externalIds": [{"system": "dcterms", "identifier": "title", "matchType": "exact",
                              "uri": "http://purl.org/dc/terms/title"}]},
            {"id": "creator", "kind": "concept", "label": "Creator"},
            {"id": "date", "kind": "concept", "label": "Date"},
        ],
        "occurredAt": t,
    })
    s.create(FATOU, "vocab", lambda t: {
        "name": "geo-encodings",
        "description": "Geometry encodings a place record arrives in: GeoJSON, KML, GML and WKT, "
                       "and which of them the GeoJSON to Place lens reads.",
        "world": "closed-with-default",
        "top": "geometry",
        "nodes": [
            {"id": "geometry", "kind": "type", "label": "Geometry"},
            {"id": "geojson", "kind": "concept", "label": "GeoJSON"},
            {"id": "kml", "kind": "concept", "label": "KML"},
        ],
        "edges": [{"source": "geojson", "target": "geometry", "relationSlug": "subsumed_by"},
                  {"source": "kml", "target": "geometry", "relationSlug": "subsumed_by"}],
        "occurredAt": t,
    })
    results = ["holds"] * 9 + ["falsified", "falsified", "inconclusive"]
    rng.shuffle(results)
    for week, result in enumerate(results):
        s.now += 7 * 24 * 3600 * 1_000_000 - rng.randint(0, 20) * 3600 * 1_000_000
        kind, prop = (("roundtrip-test", {"$type": "dev.svc.defs#lpRoundtrip",
                                          "domain": "app.example.person corpus, week %d" % (week + 1)})
                      if week % 2 == 0 else
                      ("property-test", {"$type": "dev.svc.defs#lpGenerator",
                                         "spec": "arbitrary Person, weekly run", "runner": "proptest",
                                         "seed": 1000 + week}))
        s.create(BRAM, "verification", lambda t, kind=kind, prop=prop, result=result: {
            "lens": lref(L_PERSON, "bidirectional"), "kind": kind, "verifier": BRAM,
            "tool": {"name": "svc", "version": "0.1.0", "commit": "f75610a"},
            "property": prop, "result": result, "occurredAt": t})


def schema_blob(entry, fields, nsid=None):
    """A panproto schema's blob, as small as it comes: one object vertex and its string fields."""
    vertices = {entry: {"id": entry, "kind": "object", "nsid": nsid}}
    edges = []
    for field in fields:
        vertices["%s.%s" % (entry, field)] = {"id": "%s.%s" % (entry, field), "kind": "string", "nsid": None}
        edges.append([{"kind": "prop", "name": field, "src": entry, "tgt": "%s.%s" % (entry, field)}, "prop"])
    return {"entries": [entry], "vertices": vertices, "edges": edges,
            "nsids": {entry: nsid} if nsid else {}}


def object_hash(blob):
    return hashlib.sha256(json.dumps(blob, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def published(s):
    """The schema and lens records the rest refer to, published last: each schema by the name its
    blob gives it, each lens with its round-trip class. FHIR Patient reaches person.json in two
    hops (through contact v2), the road a bounty asks for in one."""
    schemas = [
        (S_PERSON_LEX, "atproto", schema_blob("person", ["name", "email"], "app.example.person")),
        (S_PERSON_JS, "json-schema", schema_blob("person.schema.json", ["name", "email"])),
        (S_FHIR_PATIENT, "fhir", schema_blob("fhir.Patient", ["name", "telecom"])),
        (S_CONTACT_V2, "protobuf", schema_blob("contact.v2.Contact", ["display_name", "email"])),
        (S_GEOJSON, "json-schema", schema_blob("geojson.Feature", ["geometry", "properties"])),
        (S_PLACE, "json-ld", schema_blob("schemaorg.Place", ["name", "geo"])),
        (S_PET, "openapi", schema_blob("petstore.Pet", ["name", "tag"])),
        (S_USER_PY, "pydantic", schema_blob("app.models.User", ["name", "tag"])),
    ]
    for ref, protocol, blob in schemas:
        publish(s, ref, lambda t, protocol=protocol, blob=blob: {
            "protocol": protocol, "blob": blob, "vertexCount": len(blob["vertices"]),
            "edgeCount": len(blob["edges"]), "objectHash": object_hash(blob), "createdAt": t})
    lenses = [
        (L_PERSON, S_PERSON_LEX, S_PERSON_JS, "iso", "rename_sort_person"),
        (L_FHIR_CONTACT, S_FHIR_PATIENT, S_CONTACT_V2, "projection", "drop_telecom_use"),
        (L_GEO_PLACE, S_GEOJSON, S_PLACE, "iso", "geometry_to_geo"),
        (L_CONTACT_PERSON, S_CONTACT_V2, S_PERSON_JS, "retraction", "display_name_to_name"),
        (L_PET_USER, S_PET, S_USER_PY, "opaque", "pet_as_user"),
    ]
    for ref, source, target, klass, step in lenses:
        blob = {"steps": [{"name": step, "complement_constructor": "Empty"}]}
        publish(s, ref, lambda t, source=source, target=target, klass=klass, blob=blob: {
            "sourceSchema": source["uri"], "targetSchema": target["uri"], "roundTripClass": klass,
            "blob": blob, "objectHash": object_hash(blob), "createdAt": t})


def publish(s, ref, build):
    """A record at the uri other records already name."""
    s.tick()
    did, coll, rkey = ref["uri"][5:].split("/")
    record = build(s.at())
    record["$type"] = coll
    s._emit(did, coll, rkey, "create", record)


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "catalog.jsonl")
    s = build(Stream())
    append_control_plane(s)
    later(s)
    published(s)
    with open(out, "w", encoding="utf-8") as f:
        for line in s.lines:
            f.write(line + "\n")
    print("wrote %d events to %s" % (len(s.lines), out), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
