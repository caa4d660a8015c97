// Writes COUNT JSON lines {"collection", "record", "mutation"} for scripts/lexdiff/run: the records
// of examples/catalog.jsonl, each copied and (mostly) damaged along its lexicon, so that both
// validators meet every rule near its edge. Same COUNT and SEED, same output.
//
//   node generate.mjs COUNT SEED
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

const ROOT = new URL('../../', import.meta.url).pathname
const [count = 1000, seed = 1] = process.argv.slice(2).map(Number)

// mulberry32: tiny, and its stream depends on nothing but the seed.
let state = seed >>> 0
const random = () => {
  state = (state + 0x6d2b79f5) >>> 0
  let t = state
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
}
const int = (n) => Math.floor(random() * n)
const pick = (list) => list[int(list.length)]
const clone = (v) => structuredClone(v)

// Definitions by absolute id ("nsid" for main, "nsid#name" otherwise), as the validators see them.
const defs = new Map()
// The record documents, of the family and of the lens and schema records; the service's own
// methods (query/, sync/) describe no record.
for (const dir of ['lexicons/dev/svc', 'lexicons/dev/panproto/schema'].map((d) => join(ROOT, d))) {
  for (const file of readdirSync(dir).sort().filter((f) => f.endsWith('.json'))) {
    const doc = JSON.parse(readFileSync(join(dir, file), 'utf8'))
    for (const [name, def] of Object.entries(doc.defs)) {
      defs.set(name === 'main' ? doc.id : `${doc.id}#${name}`, { doc: doc.id, def })
    }
  }
}
const absolute = (doc, ref) => (ref.startsWith('#') ? doc + ref : ref).replace(/#main$/, '')
// Follows refs and record wrappers to the definition that describes a value.
function concrete(doc, def) {
  while (def.type === 'ref' || def.type === 'record') {
    if (def.type === 'record') def = def.record
    else ({ doc, def } = defs.get(absolute(doc, def.ref)))
  }
  return { doc, def }
}

const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
// Near misses of every string format atproto defines; a format field gets any of them, since a
// value valid in one format is the likeliest to slip through another's check.
const FORMATS = {
  datetime: ['2026-01-02T03:04:05Z', '2026-01-02T03:04:05.123456+01:00', '1985-04-12T23:20:50.1235678912345Z',
    '1985-04-12T23:20:50.123+01:45', '0001-01-01T00:00:00Z', '0000-01-01T00:00:00Z', '2026-01-02', '2026-01-02T03:04:05',
    '2026-01-02 03:04:05Z', '2026-01-02t03:04:05z', '2026-01-02T03:04:05-00:00', '2026-01-02T03:04:05+0100',
    '2026-13-02T03:04:05Z', '2026-02-30T03:04:05Z', '2026-01-02T24:00:00Z', '2026-01-02T03:04:60Z', '2026-01-02T03:04:05.Z',
    '+002026-01-02T03:04:05Z', '2026-01-02T03:04Z', '20260102T030405Z', '2026-01-02T03:04:05+24:00', ' 2026-01-02T03:04:05Z',
    '2026-01-02T03:04:05.123456789012345678901234567890Z', '1970-01-01T00:00:00+00:00', '2026-1-2T3:4:5Z'],
  did: ['did:plc:abc', 'did:web:example.com', 'did:web:localhost%3A8080', 'did:PLC:abc', 'did:plc:', 'did:plc:abc:',
    'did:plc:abc%', 'did:plc:ab/c', 'did:plc:ab?c', 'did:plc:ab#c', 'DID:plc:abc', 'did:plc', 'did:pl-c:abc', 'did:plc:ab c',
    'did:plc:aé', 'did:x:' + 'a'.repeat(2100), 'did:a:b', 'did:plc:%41', 'did:plc:a_b.c-d', 'did:1:a'],
  handle: ['alice.test', 'alice', 'Alice.Test', 'alice..test', '-alice.test', 'alice.123', 'xn--ls8h.test', 'a.b-.c', 'a'.repeat(64) + '.test'],
  nsid: ['dev.svc.bounty', 'dev.svc', 'dev.svc.bounty-x', 'dev.svc.Bounty', 'dev.svc.1bounty', 'com.example.fooBar', 'dev..svc.x', 'Dev.svc.x'],
  tid: ['3kaaaaaaaaaa2', '3jzfcijpj2z2a', '3jzfcijpj2z2', 'zzzzzzzzzzzzz', '3JZFCIJPJ2Z2A'],
  'record-key': ['self', '3k', '.', '..', 'a b', 'a~b:c_d-e.f', 'a'.repeat(513), 'é'],
  uri: ['https://example.com', 'https://example.com/a b', 'mailto:a@b.c', 'urn:isbn:123', 'http:', 'example.com', '1http://x',
    'https://', 'https:/', 'a:b', 'x+y:z', 'ht_tp://x', 'https:example.com', 'https://exämple.com', 'https:///x', ':x'],
  cid: [CID, 'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku', 'QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG',
    CID.slice(0, -1), 'abcdefgh', CID.toUpperCase(), 'zQmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG', 'bafy', 'b' + 'a'.repeat(60),
    'kbafyreie5737', 'Qm' + 'a'.repeat(44), 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm1'],
  language: ['en', 'en-US', 'english', 'zh-Hant-TW', 'x-private', 'i-klingon', 'e', 'en_US', 'en--US', '123'],
}
const AT_URIS = () => {
  const authority = pick([...FORMATS.did, ...FORMATS.handle])
  return pick([`at://${authority}`, `at://${authority}/${pick(FORMATS.nsid)}`,
    `at://${authority}/${pick(FORMATS.nsid)}/${pick([...FORMATS.tid, ...FORMATS['record-key']])}`,
    `at://did:plc:a/dev.svc.bounty/1${pick(['?x=1', '#frag', '/', '/extra', ''])}`, 'at://did:plc:a//1', 'at:/did:plc:a'])
}
const formatValue = (format) =>
  format === 'at-uri' && random() < 0.6 ? AT_URIS() : pick(Object.values(FORMATS).flat())

// A value the schema allows, for optional fields the seeds leave out.
function valid(doc, def, depth = 0) {
  ;({ doc, def } = concrete(doc, def))
  switch (def.type) {
    case 'string':
      if (def.enum) return pick(def.enum)
      if (def.knownValues && random() < 0.7) return pick(def.knownValues)
      return { did: 'did:plc:abc', 'at-uri': 'at://did:plc:abc/dev.svc.bounty/3kaaaaaaaaaa2',
        datetime: '2026-01-02T03:04:05.678Z', uri: 'https://example.com/x' }[def.format] ?? pick(['x', 'naïve', 'a b c', ''])
    case 'integer':
      return (def.minimum ?? 0) + int(Math.min((def.maximum ?? 100) - (def.minimum ?? 0) + 1, 1000))
    case 'boolean': return random() < 0.5
    case 'cid-link': return { $link: CID }
    case 'unknown': return { note: 'x', n: 1 }
    case 'array': return depth > 3 ? [] : Array.from({ length: int(3) }, () => valid(doc, def.items, depth + 1))
    case 'union': {
      const ref = absolute(doc, pick(def.refs))
      return { $type: ref, ...valid(defs.get(ref).doc, defs.get(ref).def, depth + 1) }
    }
    case 'object': {
      const out = {}
      for (const [name, prop] of Object.entries(def.properties ?? {})) {
        if (def.required?.includes(name) || (depth < 3 && random() < 0.3)) out[name] = valid(doc, prop, depth + 1)
      }
      return out
    }
  }
  return null
}

// Every place a mutation can touch: present values and the declared fields that are absent.
function sites(doc, def, value, parent, key, out) {
  ;({ doc, def } = concrete(doc, def))
  out.push({ doc, def, value, parent, key })
  if (def.type === 'object' && value && typeof value === 'object' && !Array.isArray(value)) {
    for (const [name, prop] of Object.entries(def.properties ?? {})) {
      if (name in value) sites(doc, prop, value[name], value, name, out)
      else out.push({ ...concrete(doc, prop), value: undefined, parent: value, key: name, absent: true })
    }
  } else if (def.type === 'array' && Array.isArray(value)) {
    value.forEach((item, i) => sites(doc, def.items, item, value, i, out))
  } else if (def.type === 'union' && value && typeof value.$type === 'string') {
    const ref = absolute(doc, value.$type)
    if (def.refs.some((r) => absolute(doc, r) === ref) && defs.has(ref)) {
      sites(defs.get(ref).doc, defs.get(ref).def, value, parent, key, out)
    }
  }
  return out
}

// Seeds carry cid-links in both forms; the standard one keeps the plain-string difference (which
// is accepted) out of every record but those the `cid-link:plain` mutation makes.
function standardize(collection, record) {
  for (const site of sites(collection, defs.get(collection).def, record, null, null, [])) {
    if (site.def.type === 'cid-link' && typeof site.value === 'string') site.parent[site.key] = { $link: site.value }
  }
  return record
}
const seeds = new Map()
for (const line of readFileSync(join(ROOT, 'examples/catalog.jsonl'), 'utf8').split('\n')) {
  const commit = line && JSON.parse(line).commit
  if (!commit?.record) continue
  const record = { $type: commit.collection, ...commit.record }
  seeds.set(commit.collection, [...(seeds.get(commit.collection) ?? []), standardize(commit.collection, record)])
}
const collections = [...seeds.keys()].sort()

const graphemes = ['a', 'é', 'e\u0301', '👨‍👩‍👧‍👦', '🇫🇷', '한', 'क्षि', '\u0000', ' ', '\n']
// A string near a length limit: at it, one past it, or far past it, in characters of 1-25 bytes.
function longString(limit) {
  const unit = pick(graphemes)
  const n = Math.max(0, limit + pick([-1, 0, 1, 2, limit]))
  return random() < 0.5 ? unit.repeat(n) : 'a'.repeat(Math.max(0, n - 1)) + unit
}
const nested = (depth) => (depth === 0 ? pick([1, 'x', null, 1.5, {}]) : random() < 0.5 ? [nested(depth - 1)] : { k: nested(depth - 1) })
const ANY = () => pick([null, true, 0, -1, 1.5, -0.5, 1e21, 2 ** 53 + 2, 2 ** 63, -(2 ** 63), 2 ** 64, 'x', '', [], [1, 'a'], {},
  { a: 1 }, { a: 2.5 }, { $link: CID }, { $link: 'nope' }, { $link: CID, x: 1 }, { $bytes: 'aGVsbG8=' }, { $bytes: '!!' },
  { $type: 'blob', ref: { $link: CID }, mimeType: 'text/plain', size: 3 }, { $type: 'dev.example.thing', a: 1 }, nested(1 + int(5))])
// What ANY() gave, for the class name: the validators differ on links, bytes and floats, not on
// the field they sit in.
function kind(v) {
  if (Array.isArray(v)) return 'array'
  if (v === null) return 'null'
  if (typeof v === 'number') return Number.isSafeInteger(v) ? 'int' : Number.isInteger(v) ? 'bigint' : 'float'
  if (typeof v !== 'object') return typeof v
  return v.$link !== undefined ? 'link' : v.$bytes !== undefined ? 'bytes' : v.$type !== undefined ? 'typed' : 'object'
}
const INTEGERS = [1.5, -0.5, 0.1, 1e21, 2 ** 53, 2 ** 53 + 2, 2 ** 63, -(2 ** 63), 2 ** 64, -(2 ** 64), 1e300, -1, 0]

// Each mutation returns its class name; the comparison groups disagreements by it.
function mutate(site) {
  const { def, parent, key } = site
  const set = (v) => (parent === null ? null : (parent[key] = v))
  const setAny = (name) => {
    const v = ANY()
    set(v)
    return `${name}:${kind(v)}`
  }
  const options = []
  if (site.absent) {
    options.push(() => (set(valid(site.doc, def)), 'fill'))
    options.push(() => setAny('fill'))
  } else {
    if (parent !== null) options.push(() => (Array.isArray(parent) ? parent.splice(key, 1) : delete parent[key], 'drop'))
    if (parent !== null) options.push(() => setAny(`retype:${def.type}`))
  }
  const value = site.value
  if (def.type === 'string') {
    if (def.format) options.push(() => (set(formatValue(def.format)), `format:${def.format}`))
    const limit = def.maxLength ?? def.maxGraphemes
    if (limit) options.push(() => (set(longString(limit)), def.maxLength ? 'maxLength' : 'maxGraphemes'))
    if (def.enum) options.push(() => (set(pick([...def.enum.map((v) => v.toUpperCase()), '', pick(def.enum) + ' '])), 'enum'))
  }
  if (def.type === 'integer') {
    options.push(() => (set(pick(INTEGERS)), 'integer:odd'))
    if (def.minimum !== undefined || def.maximum !== undefined) {
      options.push(() => (set(pick([def.minimum - 1, def.minimum, def.maximum, def.maximum + 1].filter(Number.isFinite))), 'integer:range'))
    }
  }
  if (def.type === 'array') {
    const items = Array.isArray(value) ? value : []
    const grow = (n) => set(Array.from({ length: n }, (_, i) => clone(items[i % Math.max(1, items.length)] ?? valid(site.doc, def.items))))
    if (def.maxLength) options.push(() => (grow(def.maxLength + pick([0, 1])), 'array:maxLength'))
    if (def.minLength) options.push(() => (set([]), 'array:minLength'))
    options.push(() => {
      const v = ANY()
      set([...items, v])
      return `array:item:${kind(v)}`
    })
  }
  if (def.type === 'cid-link' && !site.absent) {
    options.push(() => (set(value?.$link ?? CID), 'cid-link:plain'))
    options.push(() => (set(pick([{ $link: pick(FORMATS.cid) }, { $link: CID, extra: 1 }, { $link: 5 }, { link: CID }, {}])), 'cid-link:bad'))
  }
  if (def.type === 'union' && value && typeof value === 'object') {
    options.push(() => (value.$type = pick(['dev.example.other#thing', 'dev.svc.bounty', 'dev.svc.defs#main', 'dev.svc.defs#tool',
      '#wantLens', 'dev.svc.bounty#wantLens#main', 'lex:dev.svc.bounty#wantLens', '', 5, null,
      ...defs.keys()]), 'union:$type'))
    options.push(() => (delete value.$type, 'union:no-$type'))
  }
  if (def.type === 'object' && value && typeof value === 'object' && !Array.isArray(value)) {
    options.push(() => {
      const v = ANY()
      value[pick(['extra', '$type', '$link', 'x'])] = v
      return `object:extra:${kind(v)}`
    })
    options.push(() => (value.deep = nested(pick([10, 60, 127, 130, 200])), 'object:deep'))
  }
  if (def.type === 'unknown') options.push(() => setAny('unknown'))
  return pick(options)()
}

const out = []
for (let i = 0; i < count; i++) {
  const collection = collections[i % collections.length]
  const record = clone(pick(seeds.get(collection)))
  const applied = []
  // One in eight stays as the seed was (plus valid optional fields): both must accept those.
  const rounds = random() < 0.125 ? 0 : random() < 0.8 ? 1 : 2 + int(3)
  for (let r = 0; r < rounds; r++) {
    const all = sites(collection, defs.get(collection).def, record, null, null, [])
    const site = pick(all.slice(1))
    applied.push(site ? mutate(site) : 'none')
  }
  if (rounds === 0) {
    for (const site of sites(collection, defs.get(collection).def, record, null, null, [])) {
      if (site.absent && random() < 0.2) site.parent[site.key] = valid(site.doc, site.def)
    }
  }
  out.push(JSON.stringify({ collection, record, mutation: applied.join('+') || 'valid' }))
  if (out.length === 1000) process.stdout.write(out.splice(0).join('\n') + '\n')
}
if (out.length) process.stdout.write(out.join('\n') + '\n')
