// KafkaJS transactions (issue 21): producer.transaction(), send, sendOffsets, commit and abort,
// read back with a readUncommitted=false consumer (and a readUncommitted=true one, which sees
// the aborted records too), the offsets sent in a transaction applied at commit and dropped at
// abort, and a small consume-transform-produce loop (one transaction per input batch).
//
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Server, kafkajs, unique, waitUntil } from './harness.mjs'

const server = new Server({
  smp: 2,
  name: 'js-kafkajs-txn',
  sets: {
    'transaction.state.log.replication.factor': '1',
    'transaction.state.log.min.isr': '1',
    'transaction.state.log.num.partitions': '5'
  }
})
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

async function txnProducer (transactionalId) {
  const p = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await p.connect()
  return p
}

// Read `topic` with a fresh group until the message whose value is `last` arrives; returns the
// values in order. readUncommitted=false is read_committed.
async function readThrough (topic, last, readUncommitted, timeoutMs = 30000) {
  const consumer = kafka.consumer({ groupId: unique('g'), maxWaitTimeInMs: 100, readUncommitted })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()) } })
  try {
    await waitUntil(() => got.includes(last), timeoutMs, `${last} in ${topic}`)
  } finally {
    await consumer.disconnect()
  }
  return got
}

test('transaction(): commit and abort; readUncommitted=false sees only the committed', async () => {
  const topic = unique('kjs-txn')
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })
  const producer = await txnProducer(unique('tid'))
  const msgs = tag => Array.from({ length: 5 }, (_, i) => ({ key: `k${i}`, value: `${tag}-${i}` }))
  let txn = await producer.transaction()
  await txn.send({ topic, messages: msgs('c1') })
  await txn.commit()
  txn = await producer.transaction()
  await txn.send({ topic, messages: msgs('a1') })
  await txn.abort()
  txn = await producer.transaction()
  await txn.send({ topic, messages: msgs('c2') })
  assert.equal(txn.isActive(), true)
  await txn.commit()
  assert.equal(txn.isActive(), false)
  await producer.disconnect()
  // A plain record after them: once it is read, everything before it was.
  const plain = kafka.producer()
  await plain.connect()
  await plain.send({ topic, acks: -1, messages: [{ value: 'end' }] })
  await plain.disconnect()
  const committed = await readThrough(topic, 'end', false)
  assert.deepEqual(committed, [...msgs('c1'), ...msgs('c2')].map(m => m.value).concat(['end']))
  const all = await readThrough(topic, 'end', true)
  assert.deepEqual(all, [...msgs('c1'), ...msgs('a1'), ...msgs('c2')].map(m => m.value).concat(['end']))
  // Offsets: 5 + 5 + 5 records, three markers, the plain record.
  const offs = await admin.fetchTopicOffsets(topic)
  assert.equal(offs[0].high, '19')
})

test('sendOffsets: applied at commit, dropped at abort', async () => {
  const input = unique('kjs-txn-in')
  const output = unique('kjs-txn-out')
  const groupId = unique('g-txn')
  await admin.createTopics({ topics: [{ topic: input, numPartitions: 1 }, { topic: output, numPartitions: 1 }], waitForLeaders: true })
  const producer = await txnProducer(unique('tid'))
  let txn = await producer.transaction()
  await txn.send({ topic: output, messages: [{ value: 'one' }] })
  await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: input, partitions: [{ partition: 0, offset: '10' }] }] })
  await txn.commit()
  // Commit returns once PrepareCommit is written; the offsets apply when the marker reaches
  // __consumer_offsets (KafkaJS's OffsetFetch does not ask for stable offsets: it sees the
  // committed ones, without the pending ones).
  const fetched = async () => (await admin.fetchOffsets({ groupId, topics: [input] }))[0].partitions[0].offset
  await waitUntil(async () => (await fetched()) === '10', 10000, 'offset 10 committed')
  txn = await producer.transaction()
  await txn.send({ topic: output, messages: [{ value: 'two' }] })
  await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: input, partitions: [{ partition: 0, offset: '20' }] }] })
  await txn.abort()
  txn = await producer.transaction()
  // The next transaction's first AddPartitionsToTxn succeeds once the abort is complete (its
  // markers written; until then CONCURRENT_TRANSACTIONS, which KafkaJS retries there but not
  // on AddOffsetsToTxn): the aborted 20 is dropped, the pending 30 not yet visible.
  await txn.send({ topic: output, messages: [{ value: 'three' }] })
  await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: input, partitions: [{ partition: 0, offset: '30' }] }] })
  assert.equal(await fetched(), '10', 'an aborted transaction\'s offsets are dropped')
  await txn.commit()
  await waitUntil(async () => (await fetched()) === '30', 10000, 'offset 30 committed')
  await producer.disconnect()
})

test('consume-transform-produce: one transaction per batch, exactly once for readUncommitted=false', async () => {
  const input = unique('kjs-ctp-in')
  const output = unique('kjs-ctp-out')
  const groupId = unique('g-ctp')
  const N = 60
  await admin.createTopics({ topics: [{ topic: input, numPartitions: 2 }, { topic: output, numPartitions: 2 }], waitForLeaders: true })
  const plain = kafka.producer()
  await plain.connect()
  // Several sends: several record batches per partition, so the consumer gets several batches.
  for (let s = 0; s < N; s += 10) {
    await plain.send({ topic: input, acks: -1, messages: Array.from({ length: 10 }, (_, j) => ({ key: `k${s + j}`, value: `in-${s + j}`, partition: (s + j) % 2 })) })
  }
  const producer = await txnProducer(unique('tid'))
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, readUncommitted: false, maxBytesPerPartition: 64 })
  await consumer.connect()
  await consumer.subscribe({ topic: input, fromBeginning: true })
  let processed = 0
  let batches = 0
  let aborted = 0
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      batches++
      const txn = await producer.transaction()
      try {
        await txn.send({ topic: output, messages: batch.messages.map(m => ({ key: m.key, value: `${m.value}|b${batches}`, partition: batch.partition })) })
        if (batches % 2 === 1 && aborted < 3) {
          // Abort on purpose: the same records come again (the consumer seeks back).
          aborted++
          throw new Error('abort on purpose')
        }
        const next = (BigInt(batch.lastOffset()) + 1n).toString()
        await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: input, partitions: [{ partition: batch.partition, offset: next }] }] })
        await txn.commit()
        for (const m of batch.messages) resolveOffset(m.offset)
        processed += batch.messages.length
      } catch (e) {
        await txn.abort()
        consumer.seek({ topic: input, partition: batch.partition, offset: batch.messages[0].offset })
        if (e.message !== 'abort on purpose') throw e
      }
      await heartbeat()
    }
  })
  try {
    await waitUntil(() => processed >= N, 60000, `${N} inputs processed in transactions`)
  } finally {
    await consumer.disconnect()
    await producer.disconnect()
  }
  // A plain record per output partition marks the end.
  await plain.send({ topic: output, acks: -1, messages: [{ value: 'end-0', partition: 0 }, { value: 'end-1', partition: 1 }] })
  await plain.disconnect()
  const reader = kafka.consumer({ groupId: unique('g'), maxWaitTimeInMs: 100, readUncommitted: false })
  await reader.connect()
  await reader.subscribe({ topic: output, fromBeginning: true })
  const got = []
  await reader.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()) } })
  try {
    await waitUntil(() => got.includes('end-0') && got.includes('end-1'), 30000, 'both end markers')
  } finally {
    await reader.disconnect()
  }
  const inputs = got.filter(v => v.startsWith('in-')).map(v => Number(v.split('|')[0].slice(3)))
  assert.equal(inputs.length, N, `every input once (got ${inputs.length} records)`)
  assert.deepEqual([...new Set(inputs)].sort((a, b) => a - b), Array.from({ length: N }, (_, i) => i))
  assert.ok(aborted > 0, 'no batch was aborted on purpose')
})
