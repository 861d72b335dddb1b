// SASL (issue 22): KafkaJS produces and consumes over a SASL_PLAINTEXT listener with
// SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN against users from sasl.bootstrap.users; a wrong
// password is refused with KafkaJS's authentication error.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Server, freePort, kafkajs, unique, waitUntil } from './harness.mjs'

class SaslServer extends Server {
  command () {
    const l = `PLAINTEXT://${this.host}:${this.port},SASL_PLAINTEXT://${this.host}:${this.saslPort}`
    this.sets.listeners = l
    this.sets['advertised.listeners'] = l
    return super.command()
  }

  get saslBootstrap () { return `${this.host}:${this.saslPort}` }
}

const server = new SaslServer({
  smp: 2,
  name: 'js-sasl',
  sets: { 'sasl.bootstrap.users': 'ann:SCRAM-SHA-256:ann-pw,ann:SCRAM-SHA-512:ann-pw' }
})
before(async () => {
  server.saslPort = await freePort()
  await server.start()
})
after(async () => { await server.close() })

const client = (mechanism, password = 'ann-pw') =>
  kafkajs(server.saslBootstrap, { sasl: { mechanism, username: 'ann', password } })

async function roundTrip (mechanism) {
  const kafka = await client(mechanism)
  const admin = kafka.admin()
  const topic = unique('sasl-js')
  // the bootstrap users are created by the controller shortly after start
  await waitUntil(async () => {
    try { await admin.connect(); return true } catch (e) { return false }
  }, 20000, `${mechanism} admin connect`)
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })
  } finally {
    await admin.disconnect()
  }
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, messages: [{ value: 'a' }, { value: 'b' }] })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: unique('g'), maxWaitTimeInMs: 100 })
  await consumer.connect()
  const got = []
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()) } })
    await waitUntil(() => got.length >= 2, 30000, 'two messages')
  } finally {
    await consumer.disconnect()
  }
  assert.deepEqual(got, ['a', 'b'])
}

test('kafkajs scram-sha-256', async () => { await roundTrip('scram-sha-256') })
test('kafkajs scram-sha-512', async () => { await roundTrip('scram-sha-512') })
test('kafkajs plain', async () => { await roundTrip('plain') })

test('kafkajs wrong password', async () => {
  const kafka = await kafkajs(server.saslBootstrap, {
    sasl: { mechanism: 'scram-sha-256', username: 'ann', password: 'nope' },
    retry: { retries: 0 }
  })
  const admin = kafka.admin()
  await assert.rejects(admin.connect(), e => /SASL SCRAM SHA256 authentication failed|Authentication failed/i.test(String(e.message)))
})
