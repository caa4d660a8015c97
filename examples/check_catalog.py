#!/usr/bin/env python3
"""Checks Jetstream commit events of `dev.svc.*` records against the lexicon documents.

Usage:
    python3 examples/check_catalog.py [options] FILE [FILE...]      (FILE may be - for stdin)

Options:
    --lexicons DIR   lexicon folder (default: <repo>/lexicons)
    --limit N        check only the first N lines of each file
    --every K        check only every K-th line (implies --no-refs)
    --no-refs        skip the checks that need the whole file (references, ordering of slots)
    --quiet          print only errors and the summary line

What is checked, for every line:
  * the event envelope: `did`, `time_us`, `kind: "commit"`, `commit.{rev, operation, collection,
    rkey, record, cid}` (no `record`/`cid` on a delete), DID/TID/CID syntax, the collection is a
    `dev.svc.*` record kind, `time_us` and `rev` strictly increase down the file;
  * the record against the lexicon JSON: `$type`, required fields, types (integers only, never a
    float anywhere), string formats (did, at-uri, datetime, cid, uri, language, nsid, tid),
    `maxLength`/`minLength` in UTF-8 bytes, `maxGraphemes` (counted as code points, an upper bound
    of graphemes), closed `enum`s, array lengths, integer bounds, `cid-link` in both forms, union
    members resolved by their `$type`, refs across documents;
  * stricter than the service (this data is ours, so it must be clean): undeclared fields are
    errors, `knownValues` fields must use a known value, union `$type`s must be one of the refs,
    datetimes end in `Z`, `did:plc` identifiers are 24 base32 characters, record keys in at-uris
    are TIDs, CIDs look like `bafyrei` + 52 base32 characters;
  * coherence: lensRef uris point at `dev.panproto.schema.lens` records and schemaRef uris at
    `dev.panproto.schema.schema` ones; a verification's `property` variant matches its `kind`;
    the author fields (`requester`, `author`, `verifier`, `observer`) equal the event DID;
    community-typed at-uris point at `dev.svc.community` records;
  * whole file (unless --no-refs): a create never hits a live slot, an update/delete always does;
    every at-uri into `dev.svc.*` names a record created earlier in the file, and a strong ref's
    `cid` is a cid that record had.

Exit status 0 when clean, 1 when any error was found.
"""

import base64
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LEXICONS = os.path.join(os.path.dirname(HERE), "lexicons")

TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
TID_RE = re.compile(r"^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$")
PLC_RE = re.compile(r"^did:plc:[a-z2-7]{24}$")
STRICT_CID_RE = re.compile(r"^bafyrei[a-z2-7]{52}$")
DATETIME_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
)

PROPERTY_FOR_KIND = {
    "roundtrip-test": "dev.svc.defs#lpRoundtrip",
    "property-test": "dev.svc.defs#lpGenerator",
    "formal-proof": "dev.svc.defs#lpTheorem",
    "conformance-test": "dev.svc.defs#lpConformance",
    "static-check": "dev.svc.defs#lpChecker",
    "convergence-preserving": "dev.svc.defs#lpConvergence",
    "coercion-law": "dev.svc.defs#lpCoercionLaw",
}

# Record field -> the event DID must equal it.
AUTHOR_FIELDS = {
    "dev.svc.bounty": "requester",
    "dev.svc.adapter": "author",
    "dev.svc.verification": "verifier",
    "dev.svc.observation": "observer",
}

# (collection, field) -> the collection the at-uri must point into.
COMMUNITY_FIELDS = {
    ("dev.svc.dialect", "owningCommunity"),
    ("dev.svc.recommendation", "issuingCommunity"),
    ("dev.svc.deliberation", "owningCommunity"),
}


# --- atproto string formats (the same rules as crates/svc-syntax) -------------------------------

def check_did(v):
    if len(v) > 2048 or not v.startswith("did:"):
        return False
    rest = v[4:]
    if ":" not in rest:
        return False
    method, ident = rest.split(":", 1)
    if not method or not all("a" <= c <= "z" for c in method):
        return False
    if not ident or ident[-1] in ":%":
        return False
    return all(c.isascii() and (c.isalnum() or c in "._:%-") for c in ident)


def check_handle(v):
    if len(v) > 253:
        return False
    labels = v.split(".")
    if len(labels) < 2:
        return False
    for label in labels:
        if not label or len(label) > 63 or label[0] == "-" or label[-1] == "-":
            return False
        if not all(c.isascii() and (c.isalnum() or c == "-") for c in label):
            return False
    return labels[-1][0].isascii() and labels[-1][0].isalpha()


def check_nsid(v):
    if len(v) > 317:
        return False
    segs = v.split(".")
    if len(segs) < 3:
        return False
    name, authority = segs[-1], segs[:-1]
    for s in authority:
        if not s or len(s) > 63 or s[0] == "-" or s[-1] == "-":
            return False
        if not all(c.isascii() and (c.isalnum() or c == "-") for c in s):
            return False
    if authority[0][0].isdigit():
        return False
    return (
        0 < len(name) <= 63
        and name[0].isascii()
        and name[0].isalpha()
        and all(c.isascii() and c.isalnum() for c in name)
    )


def check_record_key(v):
    return (
        0 < len(v) <= 512
        and v not in (".", "..")
        and all(c.isascii() and (c.isalnum() or c in "._:~-") for c in v)
    )


def parse_at_uri(v):
    """(authority, collection, rkey) or None."""
    if len(v) > 8192 or not v.startswith("at://"):
        return None
    parts = v[5:].split("/")
    if len(parts) > 3:
        return None
    authority = parts[0]
    if not (check_did(authority) or check_handle(authority)):
        return None
    collection = parts[1] if len(parts) > 1 else None
    rkey = parts[2] if len(parts) > 2 else None
    if collection is not None and not check_nsid(collection):
        return None
    if rkey is not None and not check_record_key(rkey):
        return None
    return authority, collection, rkey


def check_datetime(v):
    if len(v) > 64:
        return False
    m = DATETIME_RE.match(v)
    if not m:
        return False
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if month in (1, 3, 5, 7, 8, 10, 12):
        dim = 31
    elif month in (4, 6, 9, 11):
        dim = 30
    elif month == 2:
        dim = 29 if leap else 28
    else:
        return False
    if year == 0 or day == 0 or day > dim or hour > 23 or minute > 59 or second > 60:
        return False
    tz = m.group(8)
    if tz != "Z":
        h, mi = int(tz[1:3]), int(tz[4:6])
        if h > 23 or mi > 59 or (tz[0] == "-" and h == 0 and mi == 0):
            return False
    return True


def check_cid(v):
    return 8 <= len(v) <= 256 and all(c.isascii() and (c.isalnum() or c in "+=") for c in v)


def check_language(v):
    subtags = v.split("-")
    primary = subtags[0]
    if not (primary in ("i", "x") or (2 <= len(primary) <= 3 and primary.isascii() and primary.isalpha())):
        return False
    return all(0 < len(s) <= 8 and s.isascii() and s.isalnum() for s in subtags[1:])


def check_uri(v):
    if len(v) > 8192 or ":" not in v:
        return False
    scheme, rest = v.split(":", 1)
    if not scheme or not (scheme[0].isascii() and scheme[0].isalpha()):
        return False
    if not all(c.isascii() and (c.isalnum() or c in "+.-") for c in scheme):
        return False
    return bool(rest) and not any(c.isspace() for c in rest)


FORMATS = {
    "did": check_did,
    "handle": check_handle,
    "at-identifier": lambda v: check_did(v) or check_handle(v),
    "nsid": check_nsid,
    "at-uri": lambda v: parse_at_uri(v) is not None,
    "record-key": check_record_key,
    "tid": lambda v: bool(TID_RE.match(v)),
    "datetime": check_datetime,
    "cid": check_cid,
    "language": check_language,
    "uri": check_uri,
}


def strict_format(fmt, v):
    """Our own conventions on top of the atproto syntax; None when fine, else a message."""
    if fmt == "did" and v.startswith("did:plc:") and not PLC_RE.match(v):
        return "did:plc identifier is not 24 base32 characters"
    if fmt == "at-uri":
        authority, collection, rkey = parse_at_uri(v)
        if collection is None or rkey is None:
            return "at-uri without collection and record key"
        if not TID_RE.match(rkey):
            return "record key is not a TID"
        if authority.startswith("did:plc:") and not PLC_RE.match(authority):
            return "at-uri authority did:plc identifier is not 24 base32 characters"
    if fmt == "datetime" and not v.endswith("Z"):
        return "datetime not in UTC (Z)"
    if fmt == "cid" and not STRICT_CID_RE.match(v):
        return "cid is not bafyrei + 52 base32 characters"
    return None


# --- lexicon loading and validation --------------------------------------------------------------

class Lexicons:
    def __init__(self, root):
        self.defs = {}  # absolute id -> (doc id, def)
        self.records = set()
        for dirpath, _dirs, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith(".json"):
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    doc = json.load(f)
                doc_id = doc["id"]
                assert doc.get("lexicon") == 1, name
                for def_name, d in doc["defs"].items():
                    key = doc_id if def_name == "main" else doc_id + "#" + def_name
                    self.defs[key] = (doc_id, d)
                    if d.get("type") == "record":
                        assert def_name == "main", name
                        self.records.add(doc_id)
        for key, (doc_id, d) in self.defs.items():
            self._check_refs(doc_id, d, key)

    @staticmethod
    def absolute(ref, doc_id):
        full = doc_id + ref if ref.startswith("#") else ref
        return full[: -len("#main")] if full.endswith("#main") else full

    def _check_refs(self, doc_id, d, where):
        t = d.get("type")
        if t == "record":
            self._check_refs(doc_id, d["record"], where)
        elif t == "object":
            for p in d.get("properties", {}).values():
                self._check_refs(doc_id, p, where)
        elif t == "array":
            self._check_refs(doc_id, d["items"], where)
        elif t == "ref":
            if self.absolute(d["ref"], doc_id) not in self.defs:
                raise ValueError("%s: unresolved ref %s" % (where, d["ref"]))
        elif t == "union":
            for r in d["refs"]:
                if self.absolute(r, doc_id) not in self.defs:
                    raise ValueError("%s: unresolved union ref %s" % (where, r))


class Validator:
    def __init__(self, lexicons, strict=True):
        self.lex = lexicons
        self.strict = strict

    def validate_record(self, collection, record):
        """List of "path: message" strings (empty when valid)."""
        errors = []
        if collection not in self.lex.records:
            return ["record: unknown record kind %s" % collection]
        if not isinstance(record, dict):
            return ["record: must be an object"]
        if record.get("$type") != collection:
            errors.append("$type: must be %s, not %r" % (collection, record.get("$type")))
        doc_id, d = self.lex.defs[collection]
        self._object(doc_id, d["record"], record, "", errors, collection, allow_type=True)
        if self.strict:
            self._coherence(collection, record, errors)
        return errors

    # path helpers
    @staticmethod
    def _join(path, name):
        return name if not path else path + "." + name

    def _fail(self, errors, path, msg):
        errors.append("%s: %s" % (path or "record", msg))

    def _value(self, doc_id, d, v, path, errors, def_id=None):
        t = d.get("type")
        if t in ("object", "record"):
            if t == "record":
                d = d["record"]
            if not isinstance(v, dict):
                return self._fail(errors, path, "must be an object")
            self._object(doc_id, d, v, path, errors, def_id)
        elif t == "string":
            if not isinstance(v, str):
                return self._fail(errors, path, "must be a string")
            self._string(d, v, path, errors)
        elif t == "integer":
            if isinstance(v, bool) or not isinstance(v, int):
                return self._fail(errors, path, "must be an integer" + (" (no floats)" if isinstance(v, float) else ""))
            if "minimum" in d and v < d["minimum"]:
                self._fail(errors, path, "must be at least %d" % d["minimum"])
            if "maximum" in d and v > d["maximum"]:
                self._fail(errors, path, "must be at most %d" % d["maximum"])
            if "enum" in d and v not in d["enum"]:
                self._fail(errors, path, "not one of the allowed values")
            if "const" in d and v != d["const"]:
                self._fail(errors, path, "must be %r" % d["const"])
            if -(2 ** 63) > v or v >= 2 ** 63:
                self._fail(errors, path, "integer out of 64-bit range")
        elif t == "boolean":
            if not isinstance(v, bool):
                return self._fail(errors, path, "must be a boolean")
            if "const" in d and v != d["const"]:
                self._fail(errors, path, "must be %r" % d["const"])
        elif t == "array":
            if not isinstance(v, list):
                return self._fail(errors, path, "must be an array")
            if "maxLength" in d and len(v) > d["maxLength"]:
                self._fail(errors, path, "must not have more than %d elements" % d["maxLength"])
            if "minLength" in d and len(v) < d["minLength"]:
                self._fail(errors, path, "must have at least %d elements" % d["minLength"])
            for i, item in enumerate(v):
                self._value(doc_id, d["items"], item, "%s[%d]" % (path, i), errors)
        elif t == "ref":
            target = Lexicons.absolute(d["ref"], doc_id)
            tdoc, tdef = self.lex.defs[target]
            self._value(tdoc, tdef, v, path, errors, def_id=target)
        elif t == "union":
            if not isinstance(v, dict):
                return self._fail(errors, path, "must be an object with a $type")
            declared = v.get("$type")
            if not isinstance(declared, str):
                return self._fail(errors, self._join(path, "$type"), "required field missing")
            norm = declared[: -len("#main")] if declared.endswith("#main") else declared
            refs = [Lexicons.absolute(r, doc_id) for r in d["refs"]]
            if norm in refs:
                tdoc, tdef = self.lex.defs[norm]
                if tdef.get("type") != "object":
                    return self._fail(errors, path, "union member %s is not an object" % norm)
                self._object(tdoc, tdef, v, path, errors, norm, allow_type=True)
            elif d.get("closed") or self.strict:
                self._fail(errors, self._join(path, "$type"), "must be one of %s" % ", ".join(refs))
            else:
                self._no_floats(v, path, errors)
        elif t == "unknown":
            self._no_floats(v, path, errors)
        elif t == "cid-link":
            if isinstance(v, str):
                text = v
            elif isinstance(v, dict) and len(v) == 1 and isinstance(v.get("$link"), str):
                text = v["$link"]
            else:
                return self._fail(errors, path, "must be a cid-link")
            if not check_cid(text):
                self._fail(errors, path, "not a cid")
            elif self.strict and not STRICT_CID_RE.match(text):
                self._fail(errors, path, "cid is not bafyrei + 52 base32 characters")
        elif t == "bytes":
            if not (isinstance(v, dict) and len(v) == 1 and isinstance(v.get("$bytes"), str)):
                self._fail(errors, path, "must be bytes")
        elif t == "blob":
            if not (isinstance(v, dict) and isinstance(v.get("mimeType"), str)):
                self._fail(errors, path, "must be a blob")
        elif t == "token":
            if not isinstance(v, str):
                self._fail(errors, path, "must be a string")
        elif t == "null":
            if v is not None:
                self._fail(errors, path, "must be null")
        else:
            self._fail(errors, path, "unsupported lexicon type %s" % t)

    def _object(self, doc_id, d, v, path, errors, def_id, allow_type=False):
        props = d.get("properties", {})
        nullable = set(d.get("nullable", []))
        for name in d.get("required", []):
            if name not in v:
                self._fail(errors, self._join(path, name), "required field missing")
        for name, item in v.items():
            p = self._join(path, name)
            if name in props:
                if item is None:
                    if name not in nullable:
                        self._fail(errors, p, "must not be null")
                    continue
                self._value(doc_id, props[name], item, p, errors)
            elif name == "$type":
                if self.strict and not allow_type:
                    if def_id is None or item != def_id:
                        self._fail(errors, p, "unexpected $type %r here" % (item,))
            else:
                if self.strict:
                    self._fail(errors, p, "field not declared in the lexicon")
                self._no_floats(item, p, errors)
        if self.strict and def_id in ("dev.svc.defs#lensRef", "dev.svc.defs#schemaRef"):
            uri = v.get("uri")
            if isinstance(uri, str) and parse_at_uri(uri):
                want = "dev.panproto.schema.lens" if def_id.endswith("lensRef") else "dev.panproto.schema.schema"
                if parse_at_uri(uri)[1] != want:
                    self._fail(errors, self._join(path, "uri"), "should point at a %s record" % want)

    def _string(self, d, v, path, errors):
        if "const" in d and v != d["const"]:
            self._fail(errors, path, "must be %r" % d["const"])
        if "enum" in d and v not in d["enum"]:
            self._fail(errors, path, "must be one of %s" % ", ".join(d["enum"]))
        if self.strict and "knownValues" in d and v not in d["knownValues"]:
            self._fail(errors, path, "%r is not a known value (%s)" % (v, ", ".join(d["knownValues"])))
        n = len(v.encode("utf-8"))
        if "maxLength" in d and n > d["maxLength"]:
            self._fail(errors, path, "longer than %d bytes" % d["maxLength"])
        if "minLength" in d and n < d["minLength"]:
            self._fail(errors, path, "shorter than %d bytes" % d["minLength"])
        # Code points are an upper bound of grapheme clusters: conservative for maxGraphemes.
        if "maxGraphemes" in d and len(v) > d["maxGraphemes"]:
            self._fail(errors, path, "longer than %d graphemes" % d["maxGraphemes"])
        fmt = d.get("format")
        if fmt:
            check = FORMATS.get(fmt)
            if check is not None and not check(v):
                self._fail(errors, path, "not a%s %s (%r)" % ("n" if fmt in ("at-uri", "nsid", "at-identifier") else "", fmt, v))
            elif self.strict:
                msg = strict_format(fmt, v)
                if msg:
                    self._fail(errors, path, "%s (%r)" % (msg, v))

    def _no_floats(self, v, path, errors):
        if isinstance(v, float):
            self._fail(errors, path, "floating-point numbers are not allowed")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                self._no_floats(x, "%s[%d]" % (path, i), errors)
        elif isinstance(v, dict):
            for k, x in v.items():
                self._no_floats(x, self._join(path, k), errors)

    def _coherence(self, collection, record, errors):
        if collection == "dev.svc.verification":
            kind = record.get("kind")
            prop = record.get("property")
            want = PROPERTY_FOR_KIND.get(kind)
            if want and isinstance(prop, dict) and prop.get("$type") != want:
                errors.append("property.$type: %s does not match kind %s (want %s)" % (prop.get("$type"), kind, want))
        if collection == "dev.svc.adapter" and isinstance(record.get("verification"), str):
            p = parse_at_uri(record["verification"])
            if p and p[1] != "dev.svc.verification":
                errors.append("verification: should point at a dev.svc.verification record")
        for (c, field) in COMMUNITY_FIELDS:
            if c == collection and isinstance(record.get(field), str):
                p = parse_at_uri(record[field])
                if p and p[1] != "dev.svc.community":
                    errors.append("%s: should point at a dev.svc.community record" % field)
        if collection == "dev.svc.bounty" and record.get("status") == "fulfilled" and "fulfillment" not in record:
            errors.append("fulfillment: a fulfilled bounty should name its fulfillment")


# --- event stream checks -------------------------------------------------------------------------

def iter_dev_svc_uris(v, path=""):
    """Yields (path, uri, cid-or-None) for every at-uri into dev.svc.* inside a record."""
    if isinstance(v, dict):
        uri = v.get("uri")
        cid = v.get("cid")
        if isinstance(cid, dict):
            cid = cid.get("$link")
        for k, x in v.items():
            p = k if not path else path + "." + k
            if isinstance(x, str):
                if x.startswith("at://") and "/dev.svc." in x:
                    yield p, x, (cid if k == "uri" else None)
            else:
                yield from iter_dev_svc_uris(x, p)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from iter_dev_svc_uris(x, "%s[%d]" % (path, i))


class StreamChecker:
    def __init__(self, validator, refs=True):
        self.v = validator
        self.refs = refs
        self.live = {}  # uri -> current cid
        self.seen_cids = {}  # uri -> set of every cid it had
        self.last_time = None
        self.last_rev = None
        self.last_rev_by_did = {}
        self.counts = {}
        self.ops = {}
        self.sizes = []
        self.errors = 0

    def error(self, where, msg):
        self.errors += 1
        print("%s: %s" % (where, msg))

    def line(self, where, text):
        try:
            ev = json.loads(text)
        except ValueError as e:
            return self.error(where, "not JSON: %s" % e)
        if not isinstance(ev, dict):
            return self.error(where, "event is not an object")
        extra = set(ev) - {"did", "time_us", "kind", "commit"}
        if extra:
            self.error(where, "unexpected event keys %s" % sorted(extra))
        did = ev.get("did")
        if not isinstance(did, str) or not check_did(did):
            return self.error(where, "did: not a did (%r)" % (did,))
        if self.v.strict and did.startswith("did:plc:") and not PLC_RE.match(did):
            self.error(where, "did: plc identifier is not 24 base32 characters")
        t = ev.get("time_us")
        if isinstance(t, bool) or not isinstance(t, int):
            return self.error(where, "time_us: must be an integer")
        if self.last_time is not None and t <= self.last_time:
            self.error(where, "time_us does not increase (%d after %d)" % (t, self.last_time))
        self.last_time = t
        if ev.get("kind") != "commit":
            return self.error(where, "kind: must be commit")
        c = ev.get("commit")
        if not isinstance(c, dict):
            return self.error(where, "commit: must be an object")
        op = c.get("operation")
        if op not in ("create", "update", "delete"):
            return self.error(where, "commit.operation: %r" % (op,))
        allowed = {"rev", "operation", "collection", "rkey"} | ({"record", "cid"} if op != "delete" else set())
        if set(c) != allowed:
            self.error(where, "commit keys %s, want %s" % (sorted(c), sorted(allowed)))
        rev, rkey, coll = c.get("rev"), c.get("rkey"), c.get("collection")
        if not isinstance(rev, str) or not TID_RE.match(rev):
            self.error(where, "commit.rev: not a TID (%r)" % (rev,))
        else:
            if self.last_rev is not None and rev <= self.last_rev:
                self.error(where, "commit.rev does not increase (%s after %s)" % (rev, self.last_rev))
            self.last_rev = rev
            prev = self.last_rev_by_did.get(did)
            if prev is not None and rev <= prev:
                self.error(where, "commit.rev does not increase for %s" % did)
            self.last_rev_by_did[did] = rev
        if not isinstance(rkey, str) or not TID_RE.match(rkey):
            self.error(where, "commit.rkey: not a TID (%r)" % (rkey,))
        if coll not in self.v.lex.records:
            return self.error(where, "commit.collection: not a dev.svc record kind (%r)" % (coll,))
        self.counts[coll] = self.counts.get(coll, 0) + 1
        self.ops[op] = self.ops.get(op, 0) + 1
        uri = "at://%s/%s/%s" % (did, coll, rkey)
        if op != "delete":
            cid = c.get("cid")
            if not isinstance(cid, str) or not STRICT_CID_RE.match(cid):
                self.error(where, "commit.cid: not a bafyrei cid (%r)" % (cid,))
            record = c.get("record")
            self.sizes.append(len(json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")))
            for e in self.v.validate_record(coll, record):
                self.error(where, "%s %s: %s" % (op, uri, e))
            field = AUTHOR_FIELDS.get(coll)
            if self.v.strict and field and isinstance(record, dict) and record.get(field) != did:
                self.error(where, "%s: %r is not the event did %s" % (field, record.get(field), did))
        if not self.refs:
            return
        if op == "create" and uri in self.live:
            self.error(where, "create of a live record %s" % uri)
        if op in ("update", "delete") and uri not in self.live:
            self.error(where, "%s of a record that is not live: %s" % (op, uri))
        if op != "delete" and isinstance(c.get("record"), dict):
            for path, ref, ref_cid in iter_dev_svc_uris(c["record"]):
                if ref not in self.seen_cids:
                    self.error(where, "%s: %s is not a record created earlier in the file" % (path, ref))
                elif ref_cid is not None and ref_cid not in self.seen_cids[ref]:
                    self.error(where, "%s: cid %s is not a cid %s had" % (path, ref_cid, ref))
            self.live[uri] = c.get("cid")
            self.seen_cids.setdefault(uri, set()).add(c.get("cid"))
        elif op == "delete":
            self.live.pop(uri, None)


def main(argv):
    args = argv[1:]
    lexdir, limit, every, refs, quiet, files = DEFAULT_LEXICONS, None, 1, True, False, []
    while args:
        a = args.pop(0)
        if a == "--lexicons":
            lexdir = args.pop(0)
        elif a == "--limit":
            limit = int(args.pop(0))
        elif a == "--every":
            every = int(args.pop(0))
            refs = False
        elif a == "--no-refs":
            refs = False
        elif a == "--quiet":
            quiet = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("--"):
            print("error: unknown flag %s" % a, file=sys.stderr)
            return 2
        else:
            files.append(a)
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    validator = Validator(Lexicons(lexdir))
    total_errors = 0
    for name in files:
        checker = StreamChecker(validator, refs=refs)
        f = sys.stdin if name == "-" else open(name, encoding="utf-8")
        n = checked = 0
        for n, text in enumerate(f, 1):
            if limit is not None and n > limit:
                n -= 1
                break
            if (n - 1) % every:
                continue
            checked += 1
            checker.line("%s:%d" % (name, n), text)
        if f is not sys.stdin:
            f.close()
        total_errors += checker.errors
        sizes = sorted(checker.sizes)
        if not quiet:
            for coll in sorted(checker.counts):
                print("  %-34s %d" % (coll, checker.counts[coll]))
            print("  operations: %s" % ", ".join("%s=%d" % kv for kv in sorted(checker.ops.items())))
            if sizes:
                print("  record bytes: min %d, median %d, p95 %d, max %d" % (
                    sizes[0], sizes[len(sizes) // 2], sizes[int(len(sizes) * 0.95)], sizes[-1]))
        missing = sorted(validator.lex.records - set(checker.counts))
        print("%s: %d lines checked, %d kinds, %d errors%s" % (
            name, checked, len(checker.counts), checker.errors,
            "" if not missing or every > 1 else " (kinds absent: %s)" % ", ".join(missing)))
    return 1 if total_errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
