// Starts the reference PLC directory (in memory), a labeler (skyware's LabelerServer with its own
// did:plc on that PLC, plus a control server that makes it emit labels) and the reference PDS
// (fresh temporary data directory), all on 127.0.0.1; prints one JSON line to stdout when all
// answer their health checks, and runs until SIGTERM or SIGINT, then shuts them down and removes
// the data directory (which also holds the labeler's database).
// Everything else (diagnostics, server logs when LOG_ENABLED=true) goes to stderr.
//
// The labeler: a new secp256k1 key per start, a did:plc registered on the PLC by a genesis
// operation signed with that key (rotation key, #atproto_label verification method, and the
// #atproto_labeler service at http://localhost:<port>), skyware's server with its
// com.atproto.label.subscribeLabels, queryLabels and _health on that port, and a control server
// (JSON in and out) on another:
//   POST /label   {uri, val, neg?, exp?, cid?, cts?}  a label signed with the labeler's key,
//                 stored and emitted through skyware; answers it as stored, with its seq
//   POST /forged  {uri, val, neg?, exp?, cid?, cts?}  the same, but one byte of its signature
//                 is flipped before it is stored: emitted and replayed like any other label
//   GET /subscribers  {subscribers: n}, the open subscribeLabels connections (skyware adds a
//                 connection only after replaying from its cursor, so wait for it before
//                 emitting labels that a live subscriber must see)
//
// Usually started by `scripts/peers start` (or `scripts/peers run`), which provides Node 22 and
// SVC_PEERS_NODE_MODULES. Environment:
//   SVC_PEERS_NODE_MODULES   node_modules holding the packages (default: ./node_modules beside this file)
//   SVC_PEERS_PLC_PORT       PLC port (default 0: a free port)
//   SVC_PEERS_PDS_PORT       PDS port (default 0: a free port)
//   SVC_PEERS_LABELER_PORT   labeler port (default 0: a free port)
//   SVC_PEERS_LABELER_CONTROL_PORT  labeler control port (default 0: a free port)
//   SVC_PEERS_ADMIN_PASSWORD PDS admin password (default: random)
//   SVC_PEERS_EXIT_ON_STDIN_EOF=1  also shut down (as on SIGTERM) when stdin reaches its end or
//                            fails: a parent that holds the write end of a pipe as our stdin
//                            ends us by exiting, however it exits (the kernel closes the pipe)
//   SVC_PEERS_RESTART_PAUSE_MS  how long the PDS stays down on SIGUSR2 (default 1000)
//   other PDS_* variables    passed to the PDS, except those set here (see pdsEnv below)
// SIGUSR2 restarts the PDS on the same data directory and port (the PLC and the labeler stay up).
import { createRequire } from 'node:module'
import crypto from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const HOST = '127.0.0.1'
const here = path.dirname(fileURLToPath(import.meta.url))

function fail(msg) {
  process.stderr.write(`svc-peers: error: ${msg}\n`)
}
function info(msg) {
  process.stderr.write(`svc-peers: ${msg}\n`)
}

function portFromEnv(name) {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return 0
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${name}=${raw} is not a port`)
  return n
}

// A free port on HOST, for the PDS and the labeler, whose public URLs must carry their ports
// before they start.
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, HOST, () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

// Both apps call express's app.listen(port), i.e. on every interface: pin the host.
function bindLoopback(app) {
  const listen = app.listen.bind(app)
  app.listen = (port, ...rest) => listen(port, HOST, ...rest)
}

async function waitHealthy(url, timeoutMs) {
  const deadline = Date.now() + timeoutMs
  let last = 'no answer'
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) })
      if (res.ok) return await res.text()
      last = `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`
    } catch (err) {
      last = String(err?.cause ?? err)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${url} not healthy after ${timeoutMs} ms (${last})`)
}

// --- The labeler.

class BadRequest extends Error {}

const SUBSCRIBE_LABELS = 'com.atproto.label.subscribeLabels'

// The label fields the control server takes: uri and val (non-empty strings), neg (boolean),
// exp and cts (datetimes, passed on as written), cid (non-empty string). An empty cid would be
// signed as "" but stored as NULL, so the replayed label would not match its signature.
function labelInput(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequest('the body must be a JSON object')
  }
  const known = ['uri', 'val', 'neg', 'exp', 'cid', 'cts']
  const unknown = Object.keys(body).filter((k) => !known.includes(k))
  if (unknown.length) throw new BadRequest(`unknown field(s) ${unknown.join(', ')}; known: ${known.join(', ')}`)
  const label = {}
  for (const k of ['uri', 'val']) {
    if (typeof body[k] !== 'string' || body[k] === '') throw new BadRequest(`${k} must be a non-empty string`)
    label[k] = body[k]
  }
  if (body.neg !== undefined && body.neg !== null) {
    if (typeof body.neg !== 'boolean') throw new BadRequest('neg must be a boolean')
    label.neg = body.neg
  }
  for (const k of ['exp', 'cts']) {
    if (body[k] === undefined || body[k] === null) continue
    if (typeof body[k] !== 'string' || Number.isNaN(Date.parse(body[k]))) {
      throw new BadRequest(`${k} must be a datetime string`)
    }
    label[k] = body[k]
  }
  if (body.cid !== undefined && body.cid !== null) {
    if (typeof body.cid !== 'string' || body.cid === '') throw new BadRequest('cid must be a non-empty string')
    label.cid = body.cid
  }
  return label
}

// A label as skyware returns it from saveLabel ({id, ...signed}, sig a Uint8Array) to JSON:
// id becomes seq, sig the atproto JSON form of bytes, {"$bytes": base64 without padding}.
function labelJson({ id, sig, ...rest }) {
  return { seq: id, ...rest, sig: { $bytes: Buffer.from(sig).toString('base64').replace(/=+$/, '') } }
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    req.on('data', (chunk) => {
      size += chunk.length
      if (size > 1 << 20) {
        reject(new BadRequest('body larger than 1 MiB'))
        req.destroy()
      } else {
        chunks.push(chunk)
      }
    })
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      try {
        resolve(text.trim() === '' ? {} : JSON.parse(text))
      } catch (err) {
        reject(new BadRequest(`the body is not JSON: ${err.message}`))
      }
    })
    req.on('error', reject)
  })
}

function listenOn(server, port) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, HOST, () => {
      server.off('error', reject)
      resolve(server.address().port)
    })
  })
}

// The control server: JSON in and out, see the comment at the top.
function controlServer({ server, signLabel, privateKey }) {
  const routes = {
    'POST /label': async (body) => labelJson(await server.createLabel(labelInput(body))),
    'POST /forged': async (body) => {
      // Signed as skyware signs (src and cts as createLabel fills them in), then one byte of r
      // flipped: still 64 bytes, low-S and well-formed, but it verifies against no message.
      const signed = signLabel({ src: server.did, cts: new Date().toISOString(), ...labelInput(body) }, privateKey)
      const sig = Uint8Array.from(signed.sig)
      sig[31] ^= 0x01
      // saveLabel stores a label that already has a sig as it is (no re-signing), then emits it.
      return labelJson(await server.saveLabel({ ...signed, sig }))
    },
    'GET /subscribers': async () => ({ subscribers: server.connections.get(SUBSCRIBE_LABELS)?.size ?? 0 }),
  }
  return http.createServer(async (req, res) => {
    const reply = (status, body) => {
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end(JSON.stringify(body) + '\n')
    }
    const pathname = new URL(req.url ?? '/', 'http://control').pathname
    const route = routes[`${req.method} ${pathname}`]
    if (!route) {
      const known = Object.keys(routes).join(', ')
      const status = Object.keys(routes).some((r) => r.endsWith(` ${pathname}`)) ? 405 : 404
      const error = status === 405 ? 'MethodNotAllowed' : 'NotFound'
      return reply(status, { error, message: `no ${req.method} ${pathname}; this serves ${known}` })
    }
    try {
      const body = req.method === 'POST' ? await readJson(req) : null
      reply(200, await route(body))
    } catch (err) {
      if (err instanceof BadRequest) return reply(400, { error: 'InvalidRequest', message: err.message })
      fail(`labeler control ${req.method} ${pathname}: ${err?.stack ?? err}`)
      reply(500, { error: 'InternalServerError', message: String(err?.message ?? err) })
    }
  })
}

// Registers the labeler's did:plc on the PLC, then starts skyware's server and the control
// server. Sets `labeler` as soon as there is something to stop.
async function startLabeler({ load, loadBeside, plcPort, dataDir, portWanted, controlPortWanted }) {
  const { Secp256k1Keypair } = await loadBeside('@atproto/pds', '@atproto/crypto')
  const plcLib = await loadBeside('@did-plc/server', '@did-plc/lib')
  const { signOperation, didForCreateOp } = plcLib.default ?? plcLib
  const { LabelerServer, signLabel } = await load('@skyware/labeler')

  // One secp256k1 key is the rotation key and the label signing key.
  const key = await Secp256k1Keypair.create({ exportable: true })
  const keyDid = key.did()
  const privateKey = await key.export()
  const port = portWanted || (await freePort())
  const endpoint = `http://localhost:${port}`

  const op = await signOperation(
    {
      type: 'plc_operation',
      rotationKeys: [keyDid],
      verificationMethods: { atproto_label: keyDid },
      alsoKnownAs: [],
      services: { atproto_labeler: { type: 'AtprotoLabeler', endpoint } },
      prev: null,
    },
    key,
  )
  const did = await didForCreateOp(op)
  const plcDid = `http://${HOST}:${plcPort}/${did}`
  const posted = await fetch(plcDid, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(op),
  })
  if (!posted.ok) {
    throw new Error(`the PLC refused the labeler's genesis operation: HTTP ${posted.status}: ${await posted.text()}`)
  }
  const got = await fetch(plcDid)
  const doc = got.ok ? await got.json() : null
  const hasId = (x, id) => x?.id === id || x?.id === `${did}${id}`
  if (
    !doc?.verificationMethod?.some((m) => hasId(m, '#atproto_label')) ||
    !doc?.service?.some((s) => hasId(s, '#atproto_labeler') && s.serviceEndpoint === endpoint)
  ) {
    throw new Error(`the PLC's document for the labeler ${did} is not as registered: HTTP ${got.status}: ${JSON.stringify(doc)}`)
  }

  // signingKey: the private key as hex (skyware also takes base64url); dbPath: a libsql file.
  const server = new LabelerServer({
    did,
    signingKey: Buffer.from(privateKey).toString('hex'),
    dbPath: path.join(dataDir, 'labeler.db'),
  })
  labeler = { server, control: null }
  try {
    // Fastify's own default host, "localhost", would also bind ::1.
    await new Promise((resolve, reject) =>
      server.start({ port, host: HOST }, (err) => (err ? reject(err) : resolve())),
    )
  } catch (err) {
    throw new Error(`the labeler could not listen on ${HOST}:${port}: ${err.code ?? ''} ${err.message}`)
  }
  await waitHealthy(`http://${HOST}:${port}/xrpc/_health`, 10_000)

  const control = controlServer({ server, signLabel, privateKey })
  labeler.control = control
  let controlPort
  try {
    controlPort = await listenOn(control, controlPortWanted)
  } catch (err) {
    throw new Error(`the labeler control server could not listen on ${HOST}:${controlPortWanted}: ${err.code ?? ''} ${err.message}`)
  }
  return { did, port, controlPort }
}

async function stopLabeler({ server, control }) {
  if (control) {
    await new Promise((resolve) => {
      control.close(() => resolve())
      control.closeAllConnections()
    })
  }
  // @fastify/websocket closes the subscribeLabels connections before the server closes.
  await server.app.close()
  server.db.close()
}

let plc = null
let pds = null
let labeler = null
// Set once the PDS first starts: starts it again on the same data directory and port.
let startPds = null
let dataDir = null
let stopping = false

function removeDataDir() {
  if (dataDir) {
    try {
      fs.rmSync(dataDir, { recursive: true, force: true })
    } catch (err) {
      fail(`could not remove ${dataDir}: ${err}`)
    }
    dataDir = null
  }
}

async function shutdown(code) {
  if (stopping) return
  stopping = true
  const tStop = Date.now()
  const guard = setTimeout(() => {
    fail('shutdown took more than 15 s; exiting')
    removeDataDir()
    process.exit(code || 1)
  }, 15_000)
  guard.unref()
  const servers = [
    ['pds', pds && (() => pds.destroy())],
    ['labeler', labeler && (() => stopLabeler(labeler))],
    ['plc', plc && (() => plc.destroy())],
  ]
  for (const [name, stop] of servers) {
    if (!stop) continue
    const t0 = Date.now()
    try {
      await stop()
      info(`stopped the ${name} in ${Date.now() - t0} ms`)
    } catch (err) {
      fail(`stopping the ${name}: ${err?.stack ?? err}`)
      code = code || 1
    }
  }
  removeDataDir()
  info(`stopped in ${Date.now() - tStop} ms`)
  process.exit(code)
}

async function main() {
  const major = Number(process.versions.node.split('.')[0])
  if (major < 22) throw new Error(`Node >= 22 is needed (this is ${process.version}); use scripts/peers`)

  const modules = path.resolve(process.env.SVC_PEERS_NODE_MODULES || path.join(here, 'node_modules'))
  if (!fs.existsSync(path.join(modules, '@atproto', 'pds'))) {
    throw new Error(`no @atproto/pds under ${modules}; run scripts/peers install`)
  }
  const require = createRequire(path.join(modules, 'noop.js'))
  const load = (name) => import(pathToFileURL(require.resolve(name)).href)
  // A dependency of a dependency, resolved from where that dependency sits.
  const loadBeside = (parent, name) =>
    import(pathToFileURL(createRequire(require.resolve(parent)).resolve(name)).href)

  // Server logs (pino, off unless LOG_ENABLED=true) go to stdout by default, which carries the
  // JSON line: send them to stderr.
  if (/^(true|t|1)$/i.test(process.env.LOG_ENABLED ?? '') && !process.env.LOG_DESTINATION) {
    process.env.LOG_DESTINATION = '/dev/stderr'
  }

  const plcPortWanted = portFromEnv('SVC_PEERS_PLC_PORT')
  const pdsPortWanted = portFromEnv('SVC_PEERS_PDS_PORT')
  const labelerPortWanted = portFromEnv('SVC_PEERS_LABELER_PORT')
  const labelerControlPortWanted = portFromEnv('SVC_PEERS_LABELER_CONTROL_PORT')

  // --- PLC directory, in memory.
  const plcMod = await load('@did-plc/server')
  const { PlcServer, Database: PlcDatabase } = plcMod.default ?? plcMod
  plc = PlcServer.create({ db: PlcDatabase.mock(), port: plcPortWanted })
  bindLoopback(plc.app)
  try {
    await plc.start()
  } catch (err) {
    plc = null
    throw new Error(`PLC could not listen on ${HOST}:${plcPortWanted}: ${err.code ?? ''} ${err.message}`)
  }
  const plcPort = plc.server.address().port
  await waitHealthy(`http://${HOST}:${plcPort}/_health`, 10_000)

  // A fresh data directory for the labeler's database and the PDS (the PLC forgets everything
  // when it stops).
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-peers-pds-'))

  // --- Labeler: its did:plc on the PLC, skyware's server, the control server.
  const lab = await startLabeler({
    load,
    loadBeside,
    plcPort,
    dataDir,
    portWanted: labelerPortWanted,
    controlPortWanted: labelerControlPortWanted,
  })

  // --- PDS, on the data directory.
  const pdsPort = pdsPortWanted || (await freePort())
  const adminPassword = process.env.SVC_PEERS_ADMIN_PASSWORD || crypto.randomBytes(16).toString('hex')
  const pdsEnv = {
    // Only "localhost" gives the public URL http://localhost:<port>; other names become https.
    PDS_HOSTNAME: 'localhost',
    PDS_PORT: String(pdsPort),
    PDS_DEV_MODE: 'true',
    // A hostname, not 127.0.0.1: DID resolution inside the PDS rejects IP hosts.
    PDS_DID_PLC_URL: `http://localhost:${plcPort}`,
    PDS_DATA_DIRECTORY: dataDir,
    PDS_BLOBSTORE_DISK_LOCATION: path.join(dataDir, 'blobs'),
    PDS_JWT_SECRET: crypto.randomBytes(32).toString('hex'),
    PDS_ADMIN_PASSWORD: adminPassword,
    PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: crypto.randomBytes(32).toString('hex'),
    PDS_INVITE_REQUIRED: 'false',
    PDS_SERVICE_HANDLE_DOMAINS: '.test',
  }
  Object.assign(process.env, pdsEnv)
  const pdsMod = await load('@atproto/pds')
  startPds = async () => {
    const { PDS, readEnv, envToCfg, envToSecrets } = pdsMod
    const env = readEnv()
    pds = await PDS.create(envToCfg(env), envToSecrets(env))
    bindLoopback(pds.app)
    try {
      await pds.start()
    } catch (err) {
      const ctx = pds.ctx
      pds = null
      await ctx.destroy().catch(() => {})
      throw new Error(`PDS could not listen on ${HOST}:${pdsPort}: ${err.code ?? ''} ${err.message}`)
    }
    await waitHealthy(`http://${HOST}:${pdsPort}/xrpc/_health`, 30_000)
  }
  await startPds()

  const line = {
    plc: `http://localhost:${plcPort}`,
    pds: `http://localhost:${pdsPort}`,
    pdsWs: `ws://${HOST}:${pdsPort}`,
    plcPort,
    pdsPort,
    adminPassword,
    handleDomain: '.test',
    labeler_did: lab.did,
    labeler: `http://localhost:${lab.port}`,
    labeler_control: `http://${HOST}:${lab.controlPort}`,
    dataDir,
    pid: process.pid,
  }
  process.stdout.write(JSON.stringify(line) + '\n')
  info(`ready: PLC ${line.plc}, PDS ${line.pds}, labeler ${line.labeler} ${line.labeler_did} (pid ${process.pid})`)
}

process.on('SIGTERM', () => shutdown(0))
// SIGUSR2 restarts the PDS as an operator would (stop, a pause of SVC_PEERS_RESTART_PAUSE_MS,
// default 1000, start on the same data directory and port), for tests of clients that must
// ride it out. The PLC directory, in memory, stays up.
let restarting = false
process.on('SIGUSR2', async () => {
  if (!pds || !startPds || restarting || stopping) return
  restarting = true
  const pause = Number(process.env.SVC_PEERS_RESTART_PAUSE_MS ?? 1000)
  try {
    const old = pds
    pds = null
    await old.destroy()
    info(`pds stopped for a restart; starting again in ${pause} ms`)
    await new Promise((r) => setTimeout(r, pause))
    await startPds()
    info('pds restarted')
  } catch (err) {
    fail(`restarting the pds: ${err?.stack ?? err}`)
  } finally {
    restarting = false
  }
})
if (/^(1|true)$/i.test(process.env.SVC_PEERS_EXIT_ON_STDIN_EOF ?? '')) {
  const onEnd = (why) => {
    if (!stopping) info(`stdin ${why}: shutting down`)
    shutdown(0)
  }
  process.stdin.on('end', () => onEnd('closed'))
  process.stdin.on('error', (err) => onEnd(`failed (${err.code ?? err})`))
  // Discard whatever arrives; only the end matters.
  process.stdin.on('data', () => {})
  process.stdin.resume()
}
process.on('SIGINT', () => shutdown(0))
process.on('uncaughtException', (err) => {
  fail(`uncaught: ${err?.stack ?? err}`)
  shutdown(1)
})
process.on('unhandledRejection', (err) => {
  fail(`unhandled rejection: ${err?.stack ?? err}`)
  shutdown(1)
})

main().catch((err) => {
  fail(err?.stack ?? String(err))
  shutdown(1)
})
