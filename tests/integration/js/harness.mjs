// harness.mjs — start, stop, kill and restart a real strata-server for the JS client tests.
//
// The JavaScript twin of ../harness.py: free ports, a temp log.dirs, --smp 2 by default,
// stderr captured to a file shown on failure, readiness = the Kafka port accepts TCP
// (bounded, polled), stop = SIGTERM + bounded wait + exit status 0 + no sanitizer report.
// Env: STRATA_SERVER (binary), STRATA_SRC (repo root), STRATA_BOOTSTRAP (test an already
// running broker instead), STRATA_IT_KEEP (keep temp dirs).
//
// Tests use node's own runner (node:test), so `node test_x.mjs` prints its usual summary
// and exits non-zero on failure.

import { spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = path.dirname(fileURLToPath(import.meta.url))
export const SRC = process.env.STRATA_SRC || path.resolve(HERE, '..', '..', '..')
export const READY_TIMEOUT_MS = 20000
export const STOP_TIMEOUT_MS = 20000
export const SANITIZER_RE = /ERROR: (AddressSanitizer|LeakSanitizer|ThreadSanitizer)|runtime error: |SUMMARY: UndefinedBehaviorSanitizer/

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

export function serverBinary () {
  if (process.env.STRATA_SERVER) return process.env.STRATA_SERVER
  for (const b of ['build-test', 'build-it', 'build']) {
    const c = path.join(SRC, b, 'strata-server')
    try { fs.accessSync(c, fs.constants.X_OK); return c } catch {}
  }
  throw new Error('STRATA_SERVER is not set and no built strata-server was found')
}

export const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// A TCP port on 127.0.0.1 that was free a moment ago.
export function freePort () {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.unref()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

export function portOpen (host, port, timeoutMs = 500) {
  return new Promise(resolve => {
    const sock = net.connect({ host, port })
    const done = ok => { sock.destroy(); resolve(ok) }
    sock.setTimeout(timeoutMs, () => done(false))
    sock.once('connect', () => done(true))
    sock.once('error', () => done(false))
  })
}

// Poll cond() (sync or async) until truthy; return its value; throw after timeoutMs.
export async function waitUntil (cond, timeoutMs = 10000, what = 'condition') {
  const deadline = Date.now() + timeoutMs
  let interval = 20
  let lastErr
  for (;;) {
    try {
      const v = await cond()
      if (v) return v
      lastErr = undefined
    } catch (e) { lastErr = e }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}` +
        (lastErr ? ` (last error: ${lastErr.message || lastErr})` : ''))
    }
    await sleep(interval)
    interval = Math.min(interval * 1.5, 250)
  }
}

export class Server {
  constructor ({ smp = 2, sets = {}, args = [], name = 'js' } = {}) {
    this.smp = smp
    this.sets = { ...sets }
    this.args = args
    this.tmp = fs.mkdtempSync(path.join(os.tmpdir(), `strata-it-${name}-`))
    this.dataDir = path.join(this.tmp, 'data')
    fs.mkdirSync(this.dataDir, { recursive: true })
    this.host = '127.0.0.1'
    this.port = null
    this.adminPort = null
    this.proc = null
    this.exit = null
    this.runs = 0
    this.external = process.env.STRATA_BOOTSTRAP || null
  }

  get bootstrap () { return this.external || `${this.host}:${this.port}` }

  command () {
    const sets = {
      listeners: `PLAINTEXT://${this.host}:${this.port}`,
      'advertised.listeners': `PLAINTEXT://${this.host}:${this.port}`,
      'log.dirs': this.dataDir,
      'admin.listen': `${this.host}:${this.adminPort}`,
      ...this.sets
    }
    const args = []
    if (this.smp) args.push('--smp', String(this.smp))
    for (const [k, v] of Object.entries(sets)) args.push('--set', `${k}=${v}`)
    return args.concat(this.args)
  }

  async start ({ timeoutMs = READY_TIMEOUT_MS } = {}) {
    if (this.external) return this
    if (this.proc) throw new Error('server already running')
    for (let attempt = 0; attempt < 3; attempt++) {
      if (this.port === null || attempt > 0) {
        this.port = await freePort()
        do { this.adminPort = await freePort() } while (this.adminPort === this.port)
      }
      this.runs++
      this.stderrPath = path.join(this.tmp, `stderr.${this.runs}.log`)
      const fd = fs.openSync(this.stderrPath, 'w')
      const env = {
        ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=1',
        UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
        ...process.env
      }
      this.exit = null
      const proc = spawn(serverBinary(), this.command(), {
        stdio: ['ignore', fd, fd], env, cwd: this.tmp
      })
      fs.closeSync(fd)
      this.proc = proc
      this.exitPromise = new Promise(resolve => {
        proc.once('exit', (code, signal) => { this.exit = { code, signal }; resolve(this.exit) })
      })
      try {
        await this.waitReady(timeoutMs)
        return this
      } catch (e) {
        if (this.exit && /in use|EADDRINUSE/i.test(this.stderrText()) && attempt < 2) {
          this.proc = null
          continue
        }
        await this.killQuietly()
        throw e
      }
    }
  }

  async waitReady (timeoutMs) {
    const deadline = Date.now() + timeoutMs
    let interval = 10
    for (;;) {
      if (this.exit) {
        throw new Error(`strata-server exited (${JSON.stringify(this.exit)}) before it was ready\n${this.stderrTail()}`)
      }
      if (await portOpen(this.host, this.port)) return
      if (Date.now() >= deadline) {
        throw new Error(`strata-server not accepting on ${this.bootstrap} within ${timeoutMs} ms\n${this.stderrTail()}`)
      }
      await sleep(interval)
      interval = Math.min(interval * 1.5, 200)
    }
  }

  alive () { return this.proc !== null && this.exit === null }

  // SIGTERM, wait (bounded), and require exit status 0 with no sanitizer report.
  async stop ({ timeoutMs = STOP_TIMEOUT_MS } = {}) {
    if (this.external || !this.proc) return
    if (this.exit) {
      this.proc = null
      throw new Error(`strata-server had already exited (${JSON.stringify(this.exit)})\n${this.stderrTail()}`)
    }
    this.proc.kill('SIGTERM')
    const res = await Promise.race([this.exitPromise, sleep(timeoutMs).then(() => null)])
    if (!res) {
      this.proc.kill('SIGKILL')
      await this.exitPromise
      this.proc = null
      throw new Error(`strata-server did not exit within ${timeoutMs} ms of SIGTERM\n${this.stderrTail()}`)
    }
    this.proc = null
    if (res.code !== 0) {
      throw new Error(`strata-server exit ${JSON.stringify(res)} after SIGTERM (want 0)\n${this.stderrTail()}`)
    }
    if (SANITIZER_RE.test(this.stderrText())) {
      throw new Error(`sanitizer report in strata-server output\n${this.stderrTail(200)}`)
    }
  }

  async kill9 () {
    if (this.external) throw new Error('kill -9 needs a server started by the harness')
    this.proc.kill('SIGKILL')
    await this.exitPromise
    this.proc = null
  }

  async restart ({ clean = true } = {}) {
    if (clean) await this.stop(); else await this.kill9()
    return this.start()
  }

  async killQuietly () {
    if (this.proc && !this.exit) {
      this.proc.kill('SIGKILL')
      await this.exitPromise
    }
    this.proc = null
  }

  // Stop cleanly if running (asserting a clean exit), then remove the temp dir.
  async close () {
    try {
      if (this.alive()) await this.stop()
    } finally {
      await this.killQuietly()
      if (!process.env.STRATA_IT_KEEP) fs.rmSync(this.tmp, { recursive: true, force: true })
    }
  }

  stderrText () {
    try { return fs.readFileSync(this.stderrPath, 'utf8') } catch { return '' }
  }

  stderrTail (n = 60) {
    const lines = this.stderrText().split('\n')
    return `---- strata-server output (${this.stderrPath}) ----\n${lines.slice(-n).join('\n')}\n----`
  }
}

// A name unique within this run, for topics and groups.
let uniq = 0
export function unique (prefix = 't') {
  return `${prefix}-${process.pid}-${Date.now() % 1e8}-${uniq++}`
}

// KafkaJS with its log quiet unless STRATA_IT_VERBOSE is set.
export async function kafkajs (bootstrap, extra = {}) {
  const { Kafka, logLevel } = (await import('kafkajs')).default
  return new Kafka({
    clientId: 'strata-it-kafkajs',
    brokers: [bootstrap],
    logLevel: process.env.STRATA_IT_VERBOSE ? logLevel.DEBUG : logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 5, initialRetryTime: 100 },
    ...extra
  })
}
