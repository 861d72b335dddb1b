"""kclients.py — small helpers over the real client libraries, shared by the tests.

confluent-kafka (librdkafka) is the reference client here: topics are created and data is
read back through it unless a test is about another client."""

import time

import harness
from harness import wait_until


def admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 15000})


def create_topic(bootstrap, name, partitions=1, config=None, rf=1):
    """Create a topic with confluent's AdminClient and wait until every partition has a
    leader in the metadata."""
    from confluent_kafka.admin import NewTopic
    a = admin(bootstrap)
    fs = a.create_topics([NewTopic(name, partitions, rf, config=config or {})],
                         operation_timeout=15, request_timeout=20)
    fs[name].result(timeout=30)
    wait_topic(bootstrap, name, partitions, a)
    return a


def wait_topic(bootstrap, name, partitions, a=None, timeout=15):
    a = a or admin(bootstrap)

    def ready():
        md = a.list_topics(name, timeout=5)
        t = md.topics.get(name)
        return (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader == 0 for p in t.partitions.values()))
    wait_until(ready, timeout, "topic %s with %d partitions led by broker 0" % (name, partitions))


def producer(bootstrap, **conf):
    from confluent_kafka import Producer
    c = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
         "enable.idempotence": False}
    c.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(c)


def produce_all(p, topic, msgs, timeout=60):
    """Produce [(key, value, partition, headers, timestamp)] dicts; wait for every delivery
    report; return the reports [(msg dict, partition, offset)] in send order. Any delivery
    error fails."""
    reports = [None] * len(msgs)
    errors = []

    def cb_for(i):
        def cb(err, m):
            if err is not None:
                errors.append((i, err))
            reports[i] = (msgs[i], m.partition(), m.offset())
        return cb

    for i, m in enumerate(msgs):
        kw = {k: v for k, v in m.items() if k in ("key", "value", "partition", "headers",
                                                   "timestamp") and v is not None}
        if "value" not in kw:
            kw["value"] = None
        while True:
            try:
                p.produce(topic, on_delivery=cb_for(i), **kw)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(timeout)
    assert left == 0, "%d messages not delivered within %ss" % (left, timeout)
    assert not errors, "delivery errors: %s" % errors[:5]
    return reports


def consume_partitions(bootstrap, topic, partitions, expected, timeout=30, start=0, **conf):
    """Read `expected` messages in total from the given partitions, starting at offset
    `start`, with a plain assign() (no group). Returns the confluent Message objects."""
    from confluent_kafka import Consumer, TopicPartition
    c = {"bootstrap.servers": bootstrap, "group.id": "strata-it-reader",
         "enable.auto.commit": False, "auto.offset.reset": "error",
         "fetch.wait.max.ms": 100, "enable.partition.eof": False}
    c.update({k.replace("_", "."): v for k, v in conf.items()})
    cons = Consumer(c)
    try:
        cons.assign([TopicPartition(topic, p, start) for p in partitions])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected:
            if time.monotonic() > deadline:
                raise AssertionError("read %d of %d messages from %s within %ss"
                                     % (len(out), expected, topic, timeout))
            for m in cons.consume(min(1000, expected - len(out)), 0.5):
                if m.error() is not None:
                    raise AssertionError("consume error: %s" % m.error())
                out.append(m)
        # Nothing beyond what was expected.
        extra = [m for m in cons.consume(100, 0.5) if m.error() is None]
        assert not extra, "%d unexpected extra messages, first at offset %d" % (
            len(extra), extra[0].offset())
        return out
    finally:
        cons.close()


def by_partition(msgs):
    out = {}
    for m in msgs:
        out.setdefault(m.partition(), []).append(m)
    return out


def assert_contiguous_from(testcase, msgs, first=0):
    """Offsets of each partition's messages run first, first+1, ... with no gap."""
    for p, ms in by_partition(msgs).items():
        offs = [m.offset() for m in ms]
        testcase.assertEqual(offs, list(range(first, first + len(offs))),
                             "partition %d offsets not contiguous from %d" % (p, first))
