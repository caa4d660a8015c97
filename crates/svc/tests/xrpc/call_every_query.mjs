// Calls svc's list queries with the network's own XRPC client, @atproto/xrpc, which checks the
// parameters it sends and the answer it gets against the query's lexicon. Reads the calls to
// make, one JSON object a line {"nsid", "params"}, on stdin; writes one line a call:
// ok\t<nsid>\t<items> or failed\t<nsid>\t<why>.
//
//   scripts/peers node call_every_query.mjs <svc base URL> <query lexicon directory> < calls.jsonl
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { pathToFileURL } from 'node:url'

const modules = process.env.SVC_PEERS_NODE_MODULES
if (!modules) throw new Error('run me through scripts/peers node, which sets SVC_PEERS_NODE_MODULES')
const load = (name) => import(pathToFileURL(join(modules, name, 'dist/index.js')))
const { XrpcClient } = await load('@atproto/xrpc')

const [service, directory] = process.argv.slice(2)
const documents = readdirSync(directory)
  .filter((file) => file.endsWith('.json'))
  .map((file) => JSON.parse(readFileSync(join(directory, file), 'utf8')))
const client = new XrpcClient({ service }, documents)

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue
  const { nsid, params } = JSON.parse(line)
  try {
    const answer = await client.call(nsid, params)
    console.log(`ok\t${nsid}\t${answer.data.items.length}`)
  } catch (error) {
    console.log(`failed\t${nsid}\t${String(error?.message ?? error).replace(/\s+/g, ' ')}`)
  }
}
