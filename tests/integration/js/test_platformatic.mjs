import zlib from 'node:zlib'
// @platformatic/kafka end to end (issue 4): the client that speaks only the newest, flexible
// API versions and looks topics up by id. Its consumer works through a group (issue 5).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Server, unique, waitUntil } from './harness.mjs'
import { Admin, Producer, Consumer, MessagesStreamModes, stringSerializers, stringDeserializers } from '@platformatic/kafka'

const server = new Server({ smp: 2, name: 'js-platformatic' })
let admin
const base = () => ({ clientId: 'strata-it-platformatic', bootstrapBrokers: [server.bootstrap], retries: 3, timeout: 15000 })
before(async () => {
  await server.start()
  admin = new Admin(base())
})
after(async () => {
  await admin?.close()
  await server.close()
})

async function readN (topic, n, timeoutMs = 30000) {
  const consumer = new Consumer({ ...base(), groupId: unique('g'), deserializers: stringDeserializers, maxWaitTime: 100 })
  const stream = await consumer.consume({ topics: [topic], mode: MessagesStreamModes.EARLIEST, autocommit: false })
  const got = []
  stream.on('data', m => got.push(m))
  try {
    await waitUntil(() => got.length >= n, timeoutMs, `${n} messages from ${topic}`)
  } finally {
    await stream.close()
    await consumer.close()
  }
  return got
}

test('admin: create, metadata with topic ids, configs, partitions, delete', async () => {
  const topic = unique('pk')
  const created = await admin.createTopics({ topics: [topic], partitions: 3, replicas: 1, configs: [{ name: 'retention.ms', value: '3600000' }] })
  assert.equal(created[0].name, topic)
  assert.equal(created[0].partitions, 3)
  assert.ok(created[0].id && created[0].id !== '00000000-0000-0000-0000-000000000000', 'topic id')
  const md = await admin.metadata({ topics: [topic], forceUpdate: true })
  assert.equal(md.topics.get(topic).partitionsCount, 3)
  assert.equal(md.topics.get(topic).id, created[0].id)
  const cfg = await admin.describeConfigs({ resources: [{ resourceType: 2, resourceName: topic }] })
  assert.equal(cfg[0].configs.find(c => c.name === 'retention.ms').value, '3600000')
  await admin.incrementalAlterConfigs({ resources: [{ resourceType: 2, resourceName: topic, configs: [{ name: 'retention.ms', configOperation: 0, value: '7200000' }] }] })
  const cfg2 = await admin.describeConfigs({ resources: [{ resourceType: 2, resourceName: topic }] })
  assert.equal(cfg2[0].configs.find(c => c.name === 'retention.ms').value, '7200000')
  await admin.createPartitions({ topics: [{ name: topic, count: 4, assignments: [] }] })
  await waitUntil(async () => (await admin.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic).partitionsCount === 4, 15000, '4 partitions')
  await admin.deleteTopics({ topics: [topic] })
  await waitUntil(async () => !(await admin.listTopics()).includes(topic), 15000, 'deleted')
})

test('produce every codec, consume back; list offsets; delete records', async () => {
  const topic = unique('pk-pc')
  await admin.createTopics({ topics: [topic], partitions: 1, replicas: 1 })
  const producer = new Producer({ ...base(), serializers: stringSerializers, idempotent: false })
  const sent = []
  let i = 0
  try {
    // zstd needs Node's zlib zstd (Node 22.15+); the client refuses it on older Node.
    const codecs = ['none', 'gzip', 'snappy', 'lz4', ...(zlib.zstdCompressSync ? ['zstd'] : [])]
    for (const compression of codecs) {
      for (const acks of [-1, 1]) {
        const messages = Array.from({ length: 10 }, () => {
          const n = i++
          return { topic, partition: 0, key: `k${n % 3}`, value: `${compression} ${n}`, headers: { n: `${n}` }, timestamp: BigInt(1_600_000_000_000 + n) }
        })
        await producer.send({ messages, compression, acks })
        sent.push(...messages)
      }
    }
  } finally {
    await producer.close()
  }
  const got = await readN(topic, sent.length)
  assert.deepEqual(got.map(m => Number(m.offset)), sent.map((_, j) => j))
  got.forEach((m, j) => {
    assert.equal(m.key, sent[j].key)
    assert.equal(m.value, sent[j].value)
    assert.equal(m.headers.get('n'), sent[j].headers.n)
    assert.equal(BigInt(m.timestamp), sent[j].timestamp)
  })
  const offs = await admin.listOffsets({ topics: [{ name: topic, partitions: [{ partitionIndex: 0, timestamp: -1n }] }] })
  assert.equal(offs[0].partitions[0].offset, BigInt(sent.length))
  const deleted = await admin.deleteRecords({ topics: [{ name: topic, partitions: [{ partition: 0, offset: 30n }] }] })
  assert.equal(deleted[0].partitions[0].lowWatermark, 30n)
  const early = await admin.listOffsets({ topics: [{ name: topic, partitions: [{ partitionIndex: 0, timestamp: -2n }] }] })
  assert.equal(early[0].partitions[0].offset, 30n)
})
