// TLS and SASL_SSL with the JavaScript clients (issue 22, "Tests"): @platformatic/kafka 1.x
// produces and consumes (through a group) over an SSL listener and over a SASL_SSL listener
// with SCRAM-SHA-256 and SCRAM-SHA-512; KafkaJS 2.2 does the same with SCRAM over SASL_SSL
// (test_kafkajs_sasl.mjs covers SASL_PLAINTEXT); a client that trusts another CA fails its
// handshake, and a wrong SCRAM password is refused over TLS. The CA and the broker certificate
// are made with the openssl CLI at test time.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { Server, freePort, kafkajs, unique, waitUntil } from './harness.mjs'
import { Admin, Producer, Consumer, MessagesStreamModes, stringSerializers, stringDeserializers } from '@platformatic/kafka'

function openssl (dir, ...args) {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], timeout: 60000 })
}

// A CA and a broker certificate it signs (subjectAltName 127.0.0.1 and localhost).
function makePki (dir, name) {
  fs.mkdirSync(dir, { recursive: true })
  openssl(dir, 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '30', '-keyout', 'ca.key',
    '-out', 'ca.pem', '-subj', `/CN=Strata JS test CA ${name}`)
  fs.writeFileSync(path.join(dir, 'san.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
  openssl(dir, 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'broker.key', '-out', 'broker.csr',
    '-subj', '/CN=localhost')
  openssl(dir, 'x509', '-req', '-in', 'broker.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key',
    '-CAcreateserial', '-days', '30', '-extfile', 'san.cnf', '-out', 'broker.pem')
  const ks = path.join(dir, 'broker-keystore.pem')
  fs.writeFileSync(ks, fs.readFileSync(path.join(dir, 'broker.key')) + fs.readFileSync(path.join(dir, 'broker.pem')))
  return { ca: fs.readFileSync(path.join(dir, 'ca.pem')), keystore: ks }
}

// An error's message with those of its causes and aggregated errors (the clients nest them).
function errorText (e, depth = 0) {
  if (!e || depth > 6) return ''
  let t = String(e.message ?? e)
  if (e.cause) t += ' | ' + errorText(e.cause, depth + 1)
  for (const x of e.errors ?? []) t += ' | ' + errorText(x, depth + 1)
  return t
}

// PLAINTEXT (the harness's readiness check and the broker's own use), SSL and SASL_SSL.
class TlsServer extends Server {
  command () {
    const l = `PLAINTEXT://${this.host}:${this.port},SSL://${this.host}:${this.sslPort},` +
      `SASL_SSL://${this.host}:${this.saslSslPort}`
    this.sets.listeners = l
    this.sets['advertised.listeners'] = l
    this.sets['inter.broker.listener.name'] = 'PLAINTEXT'
    return super.command()
  }

  get ssl () { return `${this.host}:${this.sslPort}` }
  get saslSsl () { return `${this.host}:${this.saslSslPort}` }
}

const server = new TlsServer({
  smp: 2,
  name: 'js-tls',
  sets: { 'sasl.bootstrap.users': 'ann:SCRAM-SHA-256:ann-pw,ann:SCRAM-SHA-512:ann-pw' }
})
let pki, otherPki
before(async () => {
  pki = makePki(path.join(server.tmp, 'pki'), 'a')
  otherPki = makePki(path.join(server.tmp, 'pki-other'), 'b')
  server.sets['ssl.keystore.location'] = pki.keystore
  server.sslPort = await freePort()
  do { server.saslSslPort = await freePort() } while (server.saslSslPort === server.sslPort)
  await server.start()
})
after(async () => { await server.close() })

// @platformatic/kafka's options for one listener: Node's tls options, SASL when asked.
const pk = (bootstrap, { ca = pki.ca, sasl } = {}) => ({
  clientId: 'strata-it-platformatic-tls',
  bootstrapBrokers: [bootstrap],
  retries: 3,
  timeout: 15000,
  tls: { ca, servername: 'localhost' },
  ...(sasl ? { sasl } : {})
})

async function platformaticRoundTrip (opts, n = 50) {
  const topic = unique('pk-tls')
  const admin = new Admin(opts)
  try {
    // over SASL the bootstrap users appear shortly after start
    await waitUntil(async () => {
      try { await admin.createTopics({ topics: [topic], partitions: 2, replicas: 1 }); return true } catch (e) {
        if (/already exists/i.test(errorText(e))) return true
        return false
      }
    }, 20000, `create ${topic}`)
  } finally {
    await admin.close()
  }
  const producer = new Producer({ ...opts, serializers: stringSerializers })
  const sent = []
  try {
    for (let i = 0; i < n; i++) sent.push({ topic, key: `k${i % 5}`, value: `v${i}-${'x'.repeat(i * 40)}` })
    await producer.send({ messages: sent, acks: -1 })
  } finally {
    await producer.close()
  }
  const consumer = new Consumer({ ...opts, groupId: unique('g'), deserializers: stringDeserializers, maxWaitTime: 100 })
  const got = []
  const stream = await consumer.consume({ topics: [topic], mode: MessagesStreamModes.EARLIEST, autocommit: false })
  stream.on('data', m => got.push(m.value))
  try {
    await waitUntil(() => got.length >= n, 30000, `${n} messages from ${topic}`)
  } finally {
    await stream.close()
    await consumer.close()
  }
  assert.deepEqual(got.slice().sort(), sent.map(m => m.value).sort())
}

test('platformatic over SSL: produce (acks all), consume through a group', async () => {
  await platformaticRoundTrip(pk(server.ssl))
})

test('platformatic over SASL_SSL with SCRAM-SHA-256', async () => {
  await platformaticRoundTrip(pk(server.saslSsl, { sasl: { mechanism: 'SCRAM-SHA-256', username: 'ann', password: 'ann-pw' } }))
})

test('platformatic over SASL_SSL with SCRAM-SHA-512', async () => {
  await platformaticRoundTrip(pk(server.saslSsl, { sasl: { mechanism: 'SCRAM-SHA-512', username: 'ann', password: 'ann-pw' } }))
})

test('platformatic trusting another CA fails; the broker keeps serving', async () => {
  const admin = new Admin({ ...pk(server.ssl, { ca: otherPki.ca }), retries: 0 })
  try {
    await assert.rejects(admin.listTopics(), e => /certificate|self.signed|verify/i.test(errorText(e)))
  } finally {
    await admin.close()
  }
  await platformaticRoundTrip(pk(server.ssl), 5)
})

test('platformatic over SASL_SSL with a wrong password is refused', async () => {
  const admin = new Admin({ ...pk(server.saslSsl, { sasl: { mechanism: 'SCRAM-SHA-512', username: 'ann', password: 'nope' } }), retries: 0 })
  try {
    await assert.rejects(admin.listTopics(), e => /SASL|authentication/i.test(errorText(e)))
  } finally {
    await admin.close()
  }
})

async function kafkajsRoundTrip (mechanism) {
  const kafka = await kafkajs(server.saslSsl, {
    ssl: { ca: [pki.ca], servername: 'localhost' },
    sasl: { mechanism, username: 'ann', password: 'ann-pw' }
  })
  const admin = kafka.admin()
  const topic = unique('kjs-tls')
  await waitUntil(async () => {
    try { await admin.connect(); return true } catch (e) { return false }
  }, 20000, `${mechanism} admin connect over SASL_SSL`)
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })
  } finally {
    await admin.disconnect()
  }
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, acks: -1, messages: [{ value: 'a' }, { value: 'b' }, { value: 'c'.repeat(100000) }] })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: unique('g'), maxWaitTimeInMs: 100 })
  await consumer.connect()
  const got = []
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()) } })
    await waitUntil(() => got.length >= 3, 30000, 'three messages')
  } finally {
    await consumer.disconnect()
  }
  assert.deepEqual(got, ['a', 'b', 'c'.repeat(100000)])
}

test('kafkajs over SASL_SSL with SCRAM-SHA-256', async () => { await kafkajsRoundTrip('scram-sha-256') })
test('kafkajs over SASL_SSL with SCRAM-SHA-512', async () => { await kafkajsRoundTrip('scram-sha-512') })
