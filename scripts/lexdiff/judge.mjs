// Judges the lines of generate.mjs with the network's own validator, @atproto/lexicon, the way a
// PDS does on createRecord: jsonToLex (which parses every {"$link"} and {"$bytes"}), then
// assertValidRecord. One line out per line in: ok, invalid\t<why> or error\t<why>.
//
//   scripts/peers node judge.mjs < records.jsonl
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { pathToFileURL } from 'node:url'

const modules = process.env.SVC_PEERS_NODE_MODULES
if (!modules) throw new Error('run me through scripts/peers node, which sets SVC_PEERS_NODE_MODULES')
const { Lexicons, jsonToLex } = await import(pathToFileURL(join(modules, '@atproto/lexicon/dist/index.js')))

const docs = ['dev/svc/', 'dev/panproto/schema/'].flatMap((sub) => {
  const dir = new URL(`../../lexicons/${sub}`, import.meta.url).pathname
  return readdirSync(dir)
    .sort()
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')))
})

// dev.svc.defs names three unions (basis, evidence, lensProperty) that other documents ref. The
// lexicon spec does not allow a union as a named definition and @atproto/lexicon fails every
// value behind such a ref ("Unexpected lexicon type: union"), while indigo and svc-lexicon follow
// it. Inlining each union where it is used means the same thing to both, so the comparison can
// look past it (see docs/decisions/0022-lexicon-differences.md).
const absolute = (doc, ref) => (ref.startsWith('#') ? doc + ref : ref)
const unions = new Map()
for (const doc of docs) {
  for (const [name, def] of Object.entries(doc.defs)) {
    if (def.type === 'union') unions.set(`${doc.id}#${name}`, { ...def, refs: def.refs.map((r) => absolute(doc.id, r)) })
  }
}
function inline(doc, node) {
  if (Array.isArray(node)) return node.forEach((n) => inline(doc, n))
  if (!node || typeof node !== 'object') return
  for (const [key, value] of Object.entries(node)) {
    if (value?.type === 'ref' && unions.has(absolute(doc, value.ref))) node[key] = unions.get(absolute(doc, value.ref))
    else inline(doc, value)
  }
}
docs.forEach((doc) => inline(doc.id, doc.defs))
const lexicons = new Lexicons(docs)

const oneLine = (message) => String(message).replace(/[\n\r\t]/g, ' ')
function judge(line) {
  let input
  try {
    input = JSON.parse(line)
  } catch (e) {
    return `error\t${oneLine(e.message)}`
  }
  if (typeof input?.collection !== 'string' || !('record' in input)) return 'error\tneeds a string collection and a record'
  try {
    lexicons.assertValidRecord(input.collection, jsonToLex(input.record))
    return 'ok'
  } catch (e) {
    return `invalid\t${oneLine(e.message)}`
  }
}

const out = []
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  out.push(judge(line))
  if (out.length === 1000) process.stdout.write(out.splice(0).join('\n') + '\n')
}
if (out.length) process.stdout.write(out.join('\n') + '\n')
