// @platformatic/kafka consumers with groupProtocol 'consumer' (KIP-848, issue 24): the broker
// assigns the partitions (ConsumerGroupHeartbeat), a second member takes some of them over
// incrementally, each new record goes to exactly one member and only from partitions it owns,
// and when a member leaves the other gets everything back. The client from npm that speaks the
// new protocol on the machine's Node (Debian's librdkafka 2.0.2 does not).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Server, unique, waitUntil } from './harness.mjs'
import { Admin, Producer, Consumer, MessagesStreamModes, stringSerializers, stringDeserializers } from '@platformatic/kafka'

const PARTITIONS = 6
const server = new Server({ smp: 2, name: 'js-kip848' })
let admin
const base = () => ({ clientId: 'strata-it-kip848', bootstrapBrokers: [server.bootstrap], retries: 3, timeout: 15000 })
before(async () => {
  await server.start()
  admin = new Admin(base())
})
after(async () => {
  await admin?.close()
  await server.close()
})

async function produceRound (topic, round) {
  const producer = new Producer({ ...base(), serializers: stringSerializers, idempotent: false })
  try {
    const messages = []
    for (let p = 0; p < PARTITIONS; p++) {
      for (let i = 0; i < 10; i++) messages.push({ topic, partition: p, key: `k${p}`, value: `r${round} p${p} ${i}` })
    }
    await producer.send({ messages, acks: -1 })
  } finally {
    await producer.close()
  }
}

// The partitions of `topic` a consumer owns now (its last assignment).
function owned (consumer, topic) {
  const out = new Set()
  for (const a of consumer.assignments ?? []) {
    if (a.topic === topic) a.partitions.forEach(p => out.add(p))
  }
  return out
}

test('KIP-848: the broker assigns, a member joins and leaves, every record goes to one owner', async () => {
  const topic = unique('k848')
  const group = unique('g848')
  await admin.createTopics({ topics: [topic], partitions: PARTITIONS, replicas: 1 })
  await produceRound(topic, 0)
  const member = id => new Consumer({ ...base(), clientId: `strata-it-kip848-${id}`, groupId: group, groupProtocol: 'consumer', deserializers: stringDeserializers, maxWaitTime: 100 })
  const a = member('a')
  const b = member('b')
  const got = { a: [], b: [] }
  let sa, sb
  try {
    sa = await a.consume({ topics: [topic], mode: MessagesStreamModes.EARLIEST, autocommit: 100 })
    sa.on('data', m => got.a.push({ m, owned: owned(a, topic) }))
    // alone, it is assigned every partition and reads all of round 0
    await waitUntil(() => got.a.length >= 10 * PARTITIONS, 30000, 'member a reads round 0')
    assert.equal(owned(a, topic).size, PARTITIONS, `member a alone owns every partition: ${[...owned(a, topic)]}`)

    sb = await b.consume({ topics: [topic], mode: MessagesStreamModes.EARLIEST, autocommit: 100 })
    sb.on('data', m => got.b.push({ m, owned: owned(b, topic) }))
    // the broker moves some partitions to b: a revokes them first, then b gets them
    await waitUntil(() => {
      const oa = owned(a, topic)
      const ob = owned(b, topic)
      return oa.size > 0 && ob.size > 0 && oa.size + ob.size === PARTITIONS && [...oa].every(p => !ob.has(p))
    }, 30000, 'both members own disjoint halves of the partitions')
    const oa = owned(a, topic)
    const ob = owned(b, topic)
    const n0 = { a: got.a.length, b: got.b.length }
    await produceRound(topic, 1)
    const round1 = who => got[who].slice(n0[who]).map(x => x.m).filter(m => m.value.startsWith('r1 '))
    await waitUntil(() => round1('a').length + round1('b').length >= 10 * PARTITIONS, 30000, 'round 1 consumed by the two members')
    const seen = new Map()
    for (const [who, mine] of [['a', oa], ['b', ob]]) {
      for (const m of round1(who)) {
        assert.ok(mine.has(m.partition), `member ${who} got partition ${m.partition}, which it does not own (${[...mine]})`)
        const k = `${m.partition}/${m.offset}`
        assert.ok(!seen.has(k), `record ${k} consumed by ${seen.get(k)} and ${who}`)
        seen.set(k, who)
      }
    }
    assert.equal(seen.size, 10 * PARTITIONS)

    // b leaves: a gets every partition back
    await sb.close()
    sb = null
    await b.close()
    await waitUntil(() => owned(a, topic).size === PARTITIONS, 30000, 'member a owns every partition again')
  } finally {
    await sb?.close()
    await sa?.close()
    await b.close()
    await a.close()
  }
})
