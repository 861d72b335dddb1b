"""cg_worker.py — one KIP-848 consumer (librdkafka, group.protocol=consumer) in its own
process, for the consumer-group tests that kill a member with SIGKILL.

    cg_worker.py BOOTSTRAP GROUP SUBSCRIPTION [key=value librdkafka config ...]

SUBSCRIPTION is a comma-separated list of topics; a name starting with '^' is a regular
expression (librdkafka sends it as the heartbeat's subscribed_topic_regex). The process needs a
librdkafka that speaks ConsumerGroupHeartbeat (2.4 or later; the test puts it on
LD_LIBRARY_PATH).

Writes JSON lines to stdout, each with "t" (CLOCK_MONOTONIC seconds, comparable across the
processes of one machine): {"ev":"ready"}, {"ev":"assign","parts":[[topic,p],...]} after every
change of the assignment (the whole current one), {"ev":"got","topic":T,"p":P,"o":O} for each
message received, then {"ev":"msg",...} for it once its offset was committed synchronously (so
every "msg" is committed; a process killed in between leaves a "got" alone).
A line "quit" on stdin makes it close cleanly (it leaves the group) and exit 0.
"""

import json
import select
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

STALE_MEMBER_EPOCH = 113  # the Python binding (1.7) predates the name


def out(**kw):
    kw["t"] = time.monotonic()
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def commit(c, m):
    """Commits m's offset synchronously. A commit that races an epoch bump of this member is
    refused with STALE_MEMBER_EPOCH (Kafka does the same) and librdkafka hands that to a
    synchronous commit: it is sent again, with the new epoch, a bounded number of times. The
    partition cannot be revoked meanwhile (that happens inside poll)."""
    tp = [TopicPartition(m.topic(), m.partition(), m.offset() + 1)]
    for _ in range(200):
        try:
            c.commit(offsets=tp, asynchronous=False)
            return
        except KafkaException as e:
            if e.args[0].code() != STALE_MEMBER_EPOCH:
                raise
            time.sleep(0.02)
    raise RuntimeError("commit kept failing with STALE_MEMBER_EPOCH")


def main():
    bootstrap, group, subscription = sys.argv[1:4]
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000}
    for kv in sys.argv[4:]:
        k, v = kv.split("=", 1)
        conf[k] = v
    c = Consumer(conf)
    current = set()

    def on_assign(cons, parts):
        cons.incremental_assign(parts)
        current.update((p.topic, p.partition) for p in parts)
        out(ev="assign", parts=sorted(current))

    def on_revoke(cons, parts):
        cons.incremental_unassign(parts)
        current.difference_update((p.topic, p.partition) for p in parts)
        out(ev="assign", parts=sorted(current))

    c.subscribe(subscription.split(","), on_assign=on_assign, on_revoke=on_revoke,
                on_lost=on_revoke)
    out(ev="ready")
    while True:
        r, _, _ = select.select([sys.stdin], [], [], 0)
        if r and sys.stdin.readline().strip() in ("quit", ""):
            break
        m = c.poll(0.1)
        if m is None:
            continue
        if m.error():
            out(ev="error", err=str(m.error()))
            continue
        out(ev="got", topic=m.topic(), p=m.partition(), o=m.offset())
        commit(c, m)
        out(ev="msg", topic=m.topic(), p=m.partition(), o=m.offset())
    c.close()
    out(ev="closed")


if __name__ == "__main__":
    main()
