// First JS clients connect (issue 2): KafkaJS admin.connect() + describeCluster(), and
// @platformatic/kafka (newest, flexible versions only) gets cluster metadata.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Server, kafkajs } from './harness.mjs'
import { Admin } from '@platformatic/kafka'

const server = new Server({ smp: 2, name: 'js-connect' })
before(async () => { await server.start() })
after(async () => { await server.close() })

const port = () => Number(server.bootstrap.split(':')[1])

test('kafkajs admin.connect + describeCluster', async () => {
  const admin = (await kafkajs(server.bootstrap)).admin()
  await admin.connect()
  try {
    const c = await admin.describeCluster()
    assert.equal(c.brokers.length, 1, JSON.stringify(c))
    assert.deepEqual(c.brokers[0], { nodeId: 0, host: '127.0.0.1', port: port() })
    assert.equal(c.controller, 0)
    assert.ok(c.clusterId, 'cluster id set')
    const topics = (await admin.listTopics()).filter(t => !t.startsWith('__'))
    assert.deepEqual(topics, [])
  } finally {
    await admin.disconnect()
  }
})

test('@platformatic/kafka metadata', async () => {
  const admin = new Admin({
    clientId: 'strata-it-platformatic',
    bootstrapBrokers: [server.bootstrap],
    retries: 2,
    timeout: 10000
  })
  try {
    const md = await admin.metadata({ topics: [] })
    assert.ok(md.id, 'cluster id set')
    assert.equal(md.controllerId, 0)
    assert.deepEqual([...md.brokers.keys()], [0])
    const b = md.brokers.get(0)
    assert.equal(b.host, '127.0.0.1')
    assert.equal(b.port, port())
    const topics = (await admin.listTopics()).filter(t => !t.startsWith('__'))
    assert.deepEqual(topics, [])
  } finally {
    await admin.close()
  }
})

test('server survives clients disconnecting abruptly', async () => {
  for (let i = 0; i < 5; i++) {
    const admin = (await kafkajs(server.bootstrap)).admin()
    await admin.connect()
    admin.describeCluster().catch(() => {})
    await admin.disconnect()
  }
  const admin = (await kafkajs(server.bootstrap)).admin()
  await admin.connect()
  assert.equal((await admin.describeCluster()).brokers.length, 1)
  await admin.disconnect()
  assert.ok(server.external || server.alive(), server.stderrTail())
})
