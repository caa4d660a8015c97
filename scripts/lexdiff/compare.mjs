// Compares the verdicts of svc-lexicon and @atproto/lexicon on the lines of generate.mjs and
// prints a summary; exits 1 when a disagreement matches no line of accepted.txt.
//
//   node compare.mjs records.jsonl ours.txt theirs.txt accepted.txt
import { readFileSync } from 'node:fs'

const [recordsFile, oursFile, theirsFile, acceptedFile] = process.argv.slice(2)
const lines = (file) => readFileSync(file, 'utf8').split('\n').slice(0, -1)
const records = lines(recordsFile)
const ours = lines(oursFile)
const theirs = lines(theirsFile)
if (ours.length !== records.length || theirs.length !== records.length) {
  console.error(`lexdiff: ${records.length} records but ${ours.length} and ${theirs.length} verdicts`)
  process.exit(2)
}

// "direction | mutation class (regex) | message of the side that refuses (regex) | reason"
const accepted = lines(acceptedFile)
  .filter((l) => l.trim() && !l.startsWith('#'))
  .map((l) => {
    const [direction, kind, message, reason] = l.split(' | ').map((s) => s.trim())
    return { direction, kind: new RegExp(kind), message: new RegExp(message), reason, used: 0 }
  })

const verdict = (line) => line.split('\t')[0] // ok, invalid or error: error refuses too
let agree = 0
let bothAccept = 0
const groups = new Map()
records.forEach((line, i) => {
  const ok = [verdict(ours[i]) === 'ok', verdict(theirs[i]) === 'ok']
  if (ok[0] === ok[1]) return (agree++, ok[0] && bothAccept++)
  const { collection, mutation } = JSON.parse(line)
  const direction = ok[0] ? 'we-accept' : 'we-reject'
  const message = (ok[0] ? theirs[i] : ours[i]).split('\t').slice(1).join(' ')
  const rule = accepted.find((a) => a.direction === direction && a.kind.test(mutation) && a.message.test(message))
  if (rule) rule.used++
  const key = `${collection}  ${direction}  ${mutation}`
  const group = groups.get(key) ?? { count: 0, unexplained: 0 }
  group.count++
  // A group is accepted only if every one of its records is; show the first that is not.
  if (!rule && !group.unexplained++) Object.assign(group, { line: i + 1, message })
  groups.set(key, group)
})

const disagree = records.length - agree
console.log(`lexdiff: ${records.length} records, ${agree} agreements (${bothAccept} both accept, ${agree - bothAccept} both refuse), ${disagree} disagreements`)
let unexplained = 0
for (const [key, g] of [...groups].sort((a, b) => b[1].count - a[1].count)) {
  unexplained += g.unexplained
  const tag = g.unexplained ? `UNEXPLAINED ${g.unexplained} (line ${g.line}: ${g.message.slice(0, 160)})` : 'accepted'
  console.log(`  ${String(g.count).padStart(6)}  ${key}  ${tag}`)
}
console.log('by accepted difference:')
for (const a of accepted) console.log(`  ${String(a.used).padStart(6)}  ${a.direction} ${a.kind.source}: ${a.reason}`)
if (unexplained) {
  console.log(`lexdiff: ${unexplained} disagreements match no line of ${acceptedFile}`)
  process.exit(1)
}
