"""group_worker.py — one confluent-kafka group consumer in its own process, for group tests
that kill a member with SIGKILL.

    group_worker.py BOOTSTRAP GROUP TOPIC ASSIGNOR [key=value librdkafka config ...]

Writes JSON lines to stdout: {"ev":"ready"}, {"ev":"assign","parts":[...]} after every
assignment change (the whole current assignment), {"ev":"msg","p":P,"o":O,"v":V} for each
message AFTER its offset was committed synchronously (so every printed message is
committed). A line "quit" on stdin makes it close cleanly (LeaveGroup) and exit 0.
"""

import json
import select
import sys

from confluent_kafka import Consumer, TopicPartition


def out(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def main():
    bootstrap, group, topic, assignor = sys.argv[1:5]
    conf = {"bootstrap.servers": bootstrap, "group.id": group,
            "partition.assignment.strategy": assignor, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100}
    for kv in sys.argv[5:]:
        k, v = kv.split("=", 1)
        conf[k] = v
    c = Consumer(conf)
    current = set()
    cooperative = assignor == "cooperative-sticky"

    def on_assign(cons, parts):
        if cooperative:
            cons.incremental_assign(parts)
            current.update(p.partition for p in parts)
        else:
            cons.assign(parts)
            current.clear()
            current.update(p.partition for p in parts)
        out(ev="assign", parts=sorted(current))

    def on_revoke(cons, parts):
        if cooperative:
            cons.incremental_unassign(parts)
            current.difference_update(p.partition for p in parts)
        else:
            cons.unassign()
            current.clear()
        out(ev="assign", parts=sorted(current))

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
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
        c.commit(offsets=[TopicPartition(m.topic(), m.partition(), m.offset() + 1)],
                 asynchronous=False)
        out(ev="msg", p=m.partition(), o=m.offset(), v=m.value().decode())
    c.close()
    out(ev="closed")


if __name__ == "__main__":
    main()
