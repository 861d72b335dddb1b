// KafkaJS end to end (issues 4 and 5). Note: KafkaJS can only consume through a consumer
// group, so its read-back needs FindCoordinator/JoinGroup/SyncGroup/OffsetFetch too.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Server, kafkajs, unique, waitUntil } from './harness.mjs'

const server = new Server({ smp: 2, name: 'js-kafkajs' })
let kafka, admin
before(async () => {
  await server.start()
  kafka = await kafkajs(server.bootstrap)
  admin = kafka.admin()
  await admin.connect()
})
after(async () => {
  await admin?.disconnect()
  await server.close()
})

// Consume `n` messages from `topic` with a fresh group; returns them in arrival order.
async function consumeN (topic, n, timeoutMs = 30000) {
  const consumer = kafka.consumer({ groupId: unique('g'), maxWaitTimeInMs: 100 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  await consumer.run({ eachMessage: async ({ partition, message }) => { got.push({ partition, ...message }) } })
  try {
    await waitUntil(() => got.length >= n, timeoutMs, `${n} messages from ${topic}`)
  } finally {
    await consumer.disconnect()
  }
  return got
}

test('topics: create, describe, configs, partitions, delete', async () => {
  const topic = unique('kjs')
  assert.equal(await admin.createTopics({
    topics: [{ topic, numPartitions: 3, configEntries: [{ name: 'retention.ms', value: '86400000' }] }],
    waitForLeaders: true
  }), true)
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  assert.equal(md.topics[0].partitions.length, 3)
  const cfg = await admin.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false })
  const entry = cfg.resources[0].configEntries.find(e => e.configName === 'retention.ms')
  assert.equal(entry.configValue, '86400000')
  await admin.alterConfigs({ resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '1000000' }] }] })
  const cfg2 = await admin.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false })
  assert.equal(cfg2.resources[0].configEntries.find(e => e.configName === 'retention.ms').configValue, '1000000')
  await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
  await waitUntil(async () => (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length === 5, 15000, '5 partitions')
  await assert.rejects(admin.createTopics({ topics: [{ topic, numPartitions: 1 }], validateOnly: false }).then(ok => { if (!ok) throw new Error('exists') }))
  await admin.deleteTopics({ topics: [topic] })
  await waitUntil(async () => !(await admin.listTopics()).includes(topic), 15000, 'topic deleted')
})

test('produce and consume: keys, nulls, headers, timestamps, gzip, acks', async () => {
  const { CompressionTypes } = (await import('kafkajs')).default
  const topic = unique('kjs-pc')
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  const sent = []
  let i = 0
  for (const acks of [-1, 1, 0]) {
    for (const compression of [CompressionTypes.None, CompressionTypes.GZIP]) {
      const messages = []
      for (let j = 0; j < 20; j++, i++) {
        messages.push({
          key: i % 4 === 0 ? null : `k${i % 3}`,
          value: i % 5 === 0 ? null : `v${i}`,
          headers: { n: `${i}` },
          timestamp: String(1_600_000_000_000 + i)
        })
      }
      const res = await producer.send({ topic, acks, compression, messages })
      if (acks !== 0) assert.equal(res[0].errorCode, 0)
      sent.push(...messages)
    }
  }
  await producer.disconnect()
  const got = await consumeN(topic, sent.length)
  assert.deepEqual(got.map(m => Number(m.offset)), sent.map((_, j) => j))
  got.forEach((m, j) => {
    assert.equal(m.key === null ? null : m.key.toString(), sent[j].key)
    assert.equal(m.value === null ? null : m.value.toString(), sent[j].value)
    assert.equal(m.headers.n.toString(), sent[j].headers.n)
    assert.equal(m.timestamp, sent[j].timestamp)
  })
})

test('offsets: watermarks, by timestamp, deleteTopicRecords moves the log start', async () => {
  const topic = unique('kjs-off')
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  const base = 1_700_000_000_000
  await producer.send({ topic, messages: Array.from({ length: 10 }, (_, i) => ({ value: `m${i}`, partition: 0, timestamp: String(base + i * 1000) })) })
  await producer.disconnect()
  let offs = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offs.map(o => [o.partition, o.low, o.high]), [[0, '0', '10']])
  const byTs = await admin.fetchTopicOffsetsByTimestamp(topic, base + 2500)
  assert.equal(byTs[0].offset, '3')
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '4' }] })
  offs = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offs.map(o => [o.low, o.high]), [['4', '10']])
  const got = await consumeN(topic, 6)
  assert.deepEqual(got.map(m => Number(m.offset)), [4, 5, 6, 7, 8, 9])
})

test('group: three consumers split six partitions, then commit and describe', async () => {
  const topic = unique('kjs-grp')
  const groupId = unique('g')
  await admin.createTopics({ topics: [{ topic, numPartitions: 6 }], waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, messages: Array.from({ length: 60 }, (_, i) => ({ value: `${i}`, partition: i % 6 })) })
  await producer.disconnect()
  const consumers = []
  const assignments = [null, null, null]
  const seen = []
  for (let i = 0; i < 3; i++) {
    const c = kafka.consumer({ groupId, maxWaitTimeInMs: 100, sessionTimeout: 10000, heartbeatInterval: 500 })
    c.on(c.events.GROUP_JOIN, e => { assignments[i] = e.payload.memberAssignment[topic] || [] })
    await c.connect()
    await c.subscribe({ topic, fromBeginning: true })
    await c.run({ eachMessage: async ({ partition, message }) => { seen.push(`${partition}:${message.offset}`) } })
    consumers.push(c)
  }
  try {
    await waitUntil(() => {
      if (assignments.some(a => a === null)) return false
      const all = assignments.flat().sort((a, b) => a - b)
      return JSON.stringify(all) === JSON.stringify([0, 1, 2, 3, 4, 5]) && assignments.every(a => a.length === 2)
    }, 60000, 'three members with two partitions each')
    await waitUntil(() => new Set(seen).size === 60, 30000, '60 messages')
    const d = await admin.describeGroups([groupId])
    assert.equal(d.groups[0].state, 'Stable')
    assert.equal(d.groups[0].members.length, 3)
    assert.ok((await admin.listGroups()).groups.some(g => g.groupId === groupId))
    await assert.rejects(admin.deleteGroups([groupId]))
  } finally {
    for (const c of consumers) await c.disconnect()
  }
  await waitUntil(async () => (await admin.describeGroups([groupId])).groups[0].state === 'Empty', 20000, 'group Empty')
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  assert.deepEqual(committed[0].partitions.map(p => p.offset).sort(), Array(6).fill('10'))
  await admin.deleteGroups([groupId])
  assert.ok(!(await admin.listGroups()).groups.some(g => g.groupId === groupId))
})
