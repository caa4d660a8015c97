// Starts the reference PLC directory (in memory) and the reference PDS (fresh temporary data
// directory) on 127.0.0.1, prints one JSON line to stdout when both answer their health checks,
// and runs until SIGTERM or SIGINT, then shuts both down and removes the data directory.
// Everything else (diagnostics, server logs when LOG_ENABLED=true) goes to stderr.
//
// Usually started by `scripts/peers start` (or `scripts/peers run`), which provides Node 22 and
// SVC_PEERS_NODE_MODULES. Environment:
//   SVC_PEERS_NODE_MODULES   node_modules holding the packages (default: ./node_modules beside this file)
//   SVC_PEERS_PLC_PORT       PLC port (default 0: a free port)
//   SVC_PEERS_PDS_PORT       PDS port (default 0: a free port)
//   SVC_PEERS_ADMIN_PASSWORD PDS admin password (default: random)
//   SVC_PEERS_EXIT_ON_STDIN_EOF=1  also shut down (as on SIGTERM) when stdin reaches its end or
//                            fails: a parent that holds the write end of a pipe as our stdin
//                            ends us by exiting, however it exits (the kernel closes the pipe)
//   SVC_PEERS_RESTART_PAUSE_MS  how long the PDS stays down on SIGUSR2 (default 1000)
//   other PDS_* variables    passed to the PDS, except those set here (see pdsEnv below)
// SIGUSR2 restarts the PDS on the same data directory and port (the PLC stays up).
import { createRequire } from 'node:module'
import crypto from 'node:crypto'
import fs from 'node:fs'
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

// A free port on HOST, for the PDS, whose public URL must carry its port before it starts.
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

let plc = null
let pds = null
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
  for (const [name, server] of [['pds', pds], ['plc', plc]]) {
    if (!server) continue
    const t0 = Date.now()
    try {
      await server.destroy()
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

  // Server logs (pino, off unless LOG_ENABLED=true) go to stdout by default, which carries the
  // JSON line: send them to stderr.
  if (/^(true|t|1)$/i.test(process.env.LOG_ENABLED ?? '') && !process.env.LOG_DESTINATION) {
    process.env.LOG_DESTINATION = '/dev/stderr'
  }

  const plcPortWanted = portFromEnv('SVC_PEERS_PLC_PORT')
  const pdsPortWanted = portFromEnv('SVC_PEERS_PDS_PORT')

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

  // --- PDS, on a fresh data directory (the PLC forgets everything when it stops).
  const pdsPort = pdsPortWanted || (await freePort())
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-peers-pds-'))
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
    dataDir,
    pid: process.pid,
  }
  process.stdout.write(JSON.stringify(line) + '\n')
  info(`ready: PLC ${line.plc}, PDS ${line.pds} (pid ${process.pid})`)
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
