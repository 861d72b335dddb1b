// cluster_admin.mjs — create a topic with a JavaScript client, for ../test_cluster.py.
//
//   node cluster_admin.mjs kafkajs|platformatic <bootstrap> <topic> <partitions> <rf>
//
// Creates the topic through the client's admin API with that one broker as bootstrap, then
// prints one JSON line: {"client", "topic", "partitions": [{"partition", "leader", "replicas",
// "isr", ...}]} as the client's own metadata shows it. Any error exits 1 with the message on
// stderr. Not a test file itself (CTest runs js/test_*.mjs only).

const [family, bootstrap, topic, partitionsArg, rfArg] = process.argv.slice(2)
const partitions = Number(partitionsArg)
const rf = Number(rfArg)
if (!['kafkajs', 'platformatic'].includes(family) || !bootstrap || !topic || !(partitions > 0) || !(rf > 0)) {
  console.error('usage: node cluster_admin.mjs kafkajs|platformatic <bootstrap> <topic> <partitions> <rf>')
  process.exit(2)
}
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

async function withKafkaJS () {
  const { Kafka, logLevel } = (await import('kafkajs')).default
  const kafka = new Kafka({
    clientId: 'strata-it-cluster-kafkajs',
    brokers: [bootstrap],
    logLevel: process.env.STRATA_IT_VERBOSE ? logLevel.DEBUG : logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 8, initialRetryTime: 200 }
  })
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions: partitions, replicationFactor: rf }],
      waitForLeaders: true,
      timeout: 15000
    })
    if (!created) throw new Error(`createTopics answered false: ${topic} already exists`)
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    return md.topics[0].partitions.map(p => ({
      partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr
    }))
  } finally {
    await admin.disconnect()
  }
}

async function withPlatformatic () {
  const { Admin } = await import('@platformatic/kafka')
  const admin = new Admin({
    clientId: 'strata-it-cluster-platformatic',
    bootstrapBrokers: [bootstrap],
    retries: 8,
    timeout: 15000
  })
  try {
    await admin.createTopics({ topics: [topic], partitions, replicas: rf })
    const md = await admin.metadata({ topics: [topic], forceUpdate: true })
    const t = md.topics.get(topic)
    return t.partitions.map((p, i) => ({
      partition: i, leader: p.leader, leaderEpoch: p.leaderEpoch, replicas: p.replicas, isr: p.isr
    }))
  } finally {
    await admin.close()
  }
}

try {
  const parts = family === 'kafkajs' ? await withKafkaJS() : await withPlatformatic()
  console.log(JSON.stringify({ client: family, topic, partitions: parts }))
} catch (e) {
  console.error(`${family}: ${e.stack || e}`)
  if (e.errors) console.error(JSON.stringify(e.errors, null, 1))
  process.exit(1)
}
