"""txnlib.py — shared pieces of the transaction tests (issue 21).

Raw-wire requests the clients do not expose (FindCoordinator for a transactional id, ListOffsets
at an isolation level: the last stable offset, DescribeTransactions), readers of a topic at
either isolation level, and the consume-transform-produce application the end-to-end tests run
(`Ctp`): it reads an input topic with read_committed, writes one transformed record per input
record to an output topic inside a transaction, sends its consumer offsets with
send_offsets_to_transaction and commits every `k` records; some transactions it aborts on
purpose and re-processes. Every record it writes names the input record and the transaction
(its number within this application and incarnation), so a reader can tell which transactions'
records it sees.

Output record: key = the input key, value = b"<input value>|<incarnation>.<txn number>".
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kwire  # noqa: E402
from harness import wait_until  # noqa: E402

FIND_COORDINATOR, LIST_OFFSETS, DESCRIBE_TRANSACTIONS = 10, 2, 65
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1


# ---- raw wire -------------------------------------------------------------------------------

def find_coordinator(bootstrap, key, key_type=1, timeout=3.0):
    """FindCoordinator v1 (key_type 1: a transactional id): (error, node_id, host, port)."""
    with kwire.Conn.to(bootstrap, timeout) as c:
        r = c.request(FIND_COORDINATOR, 1, kwire.string(key) + kwire.i8(key_type))
        r.i32()                                    # throttle
        err = r.i16()
        r.string()                                 # error message
        out = (err, r.i32(), r.string(), r.i32())
        r.end()
        return out


def wait_coordinator(bootstraps, tid, timeout=30.0, not_node=None):
    """The node id every address in `bootstraps` that answers names as the coordinator of
    `tid` (retrying COORDINATOR_NOT_AVAILABLE and the like), other than `not_node`."""
    last = {}

    def cond():
        last.clear()
        for b in bootstraps:
            try:
                err, node, _, _ = find_coordinator(b, tid)
            except (OSError, EOFError, kwire.Short) as e:
                last[b] = repr(e)
                continue
            last[b] = (err, node)
        ids = {v[1] for v in last.values() if isinstance(v, tuple) and v[0] == 0}
        if len(ids) == 1 and all(isinstance(v, tuple) for v in last.values()):
            n = ids.pop()
            return n if n >= 0 and n != not_node else None
        return None
    try:
        return wait_until(cond, timeout, "a transaction coordinator for %r" % tid)
    except AssertionError as e:
        raise AssertionError("%s; last answers (error, node) per address: %s" % (e, last)) from None


def list_offset(bootstrap, topic, partition, isolation, timestamp=LATEST, timeout=3.0):
    """ListOffsets v2 for one partition: (error, offset). At read_committed and LATEST the
    offset is the partition's last stable offset; at read_uncommitted its high watermark."""
    body = (kwire.i32(-1) + kwire.i8(isolation) + kwire.i32(1) + kwire.string(topic)
            + kwire.i32(1) + kwire.i32(partition) + kwire.i64(timestamp))
    with kwire.Conn.to(bootstrap, timeout) as c:
        r = c.request(LIST_OFFSETS, 2, body)
        r.i32()
        out = None
        for _ in range(r.i32()):
            r.string()
            for _ in range(r.i32()):
                r.i32()
                err = r.i16()
                r.i64()
                out = (err, r.i64())
        r.end()
        return out


def lso_and_hw(bootstrap, topic, partition=0):
    """(last stable offset, high watermark) of a partition, both asserted answered with 0."""
    e1, lso = list_offset(bootstrap, topic, partition, READ_COMMITTED)
    e2, hw = list_offset(bootstrap, topic, partition, READ_UNCOMMITTED)
    assert (e1, e2) == (0, 0), "ListOffsets errors %d (read_committed), %d (read_uncommitted)" % (
        e1, e2)
    return lso, hw


def describe_transactions_on(c, tids):
    """DescribeTransactions v0 over connection c: {tid: dict(error, state, timeout_ms,
    start_ms, producer_id, epoch, partitions={topic: [partition]})}."""
    body = kwire.compact_array(tids, kwire.compact_string) + kwire.TAGS_NONE
    r = c.request(DESCRIBE_TRANSACTIONS, 0, body, flexible=True)
    r.i32()
    out = {}

    def topic(rr):
        name = rr.compact_string()
        parts = rr.compact_array(lambda x: x.i32())
        rr.tags()
        return name, parts

    def state(rr):
        d = {"error": rr.i16()}
        tid = rr.compact_string()
        d["state"] = rr.compact_string()
        d["timeout_ms"] = rr.i32()
        d["start_ms"] = rr.i64()
        d["producer_id"] = rr.i64()
        d["epoch"] = rr.i16()
        d["partitions"] = dict(rr.compact_array(topic) or [])
        rr.tags()
        out[tid] = d
    r.compact_array(state)
    r.tags()
    r.end()
    return out


def describe_transactions(bootstrap, tids, timeout=3.0):
    """describe_transactions_on over a new connection to bootstrap."""
    with kwire.Conn.to(bootstrap, timeout) as c:
        return describe_transactions_on(c, tids)


# ---- readers --------------------------------------------------------------------------------

def read_topic(bootstrap, topic, partitions, isolation="read_committed", timeout=30.0,
               client_id="it-reader"):
    """Every record of the topic's partitions that a consumer at `isolation` sees, read from the
    beginning up to the end it sees (the LSO for read_committed, the high watermark otherwise;
    partition EOF events mark it). Returns [(partition, offset, key, value)]."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "it-txn-reader",
                  "client.id": client_id, "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True,
                  "fetch.wait.max.ms": 100, "socket.timeout.ms": 10000})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out, eof = [], set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError("%s: %d records read, partitions %s at their end of %d, "
                                     "within %.0fs" % (topic, len(out), sorted(eof), partitions,
                                                       timeout))
            for m in c.consume(1000, 0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise AssertionError("consume error: %s" % m.error())
                eof.discard(m.partition())
                out.append((m.partition(), m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def fill_input(bootstrap, topic, n, partitions, client_id="it-filler"):
    """n keyed records (key b"k<i>", value b"in-<i>") round-robin over the partitions, with an
    idempotent acks=all producer; returns {partition: high watermark}."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                  "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    errors = []
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"k%d" % i, value=b"in-%d" % i, partition=i % partitions,
                          on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0, "input not delivered within 60s"
    assert not errors, errors[:3]
    return {q: len(range(q, n, partitions)) for q in range(partitions)}


def output_index(records):
    """records [(partition, offset, key, value)] of an output topic: {input number: [txn tag]}."""
    seen = {}
    for _, _, _, v in records:
        inp, tag = v.rsplit(b"|", 1)
        seen.setdefault(int(inp.split(b"-")[1]), []).append(tag.decode())
    return seen


# ---- the consume-transform-produce application --------------------------------------------

class Fatal(Exception):
    """The producer hit a fatal error (fenced, or its state lost): the application restarts."""


class Ctp:
    """One incarnation of the consume-transform-produce application.

        app = Ctp(bootstrap, tid, group, "in", "out", ends={0: 100, ...}, k=10,
                  abort=lambda n: n % 4 == 3, incarnation=0)
        app.run(deadline)     # until the committed offsets reach `ends`; raises Fatal

    `aborted` / `committed` list the transaction tags it aborted and committed (tags are
    "<incarnation>.<n>"). An abort rewinds the consumer to where the transaction began and the
    records are processed again in the next one. A retriable error on commit is retried; one
    that needs an abort aborts and rewinds; a fatal one (or any other) raises Fatal after closing
    both clients, and the caller starts a new incarnation with the same transactional id.
    """

    def __init__(self, bootstrap, tid, group, topic_in, topic_out, ends, k, abort=None,
                 incarnation=0, producer_conf=None, consumer_conf=None, client_prefix="it-",
                 crash_at=None):
        from confluent_kafka import Consumer, Producer
        self.tid, self.topic_in, self.topic_out = tid, topic_in, topic_out
        self.consumer_group = group
        self.ends, self.k = dict(ends), k
        self.abort = abort or (lambda n: False)
        self.incarnation = incarnation
        self.aborted, self.committed = [], []
        self.errors = []                   # every KafkaException seen, as text
        pc = {"bootstrap.servers": bootstrap, "client.id": client_prefix + "txn-producer",
              "transactional.id": tid, "acks": "all", "linger.ms": 5,
              "transaction.timeout.ms": 20000, "message.timeout.ms": 20000,
              "socket.timeout.ms": 10000, "retry.backoff.ms": 100}
        pc.update(producer_conf or {})
        cc = {"bootstrap.servers": bootstrap, "client.id": client_prefix + "txn-consumer",
              "group.id": group, "isolation.level": "read_committed",
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "enable.partition.eof": False, "fetch.wait.max.ms": 100,
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
              "socket.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 2000}
        cc.update(consumer_conf or {})
        self.producer = Producer(pc)
        self.consumer = Consumer(cc)
        self.n = 0                         # transactions begun by this incarnation
        self.sizes = {}                    # tag -> records written in that transaction
        self.delivered = {}                # tag -> records whose delivery was reported
        self.forced = []                   # tags aborted because a commit step needed it
        self.started_at = None             # committed offsets this incarnation started from
        self.crash_at = crash_at           # crash (abandon the clients) in this transaction
        self.crashed = None                # the tag of the transaction left open by the crash

    def tag(self):
        return "%d.%d" % (self.incarnation, self.n)

    def close(self):
        try:
            self.consumer.close()
        except Exception:
            pass
        self.producer = None

    def _fail(self, what, e):
        self.errors.append("%s: %s" % (what, e))
        self.close()
        raise Fatal("%s: %s" % (what, e)) from e

    def _retry(self, what, fn, deadline):
        """Call fn() until it succeeds; retriable errors are retried, an abortable one returns
        "abort", a fatal or unknown one raises Fatal."""
        from confluent_kafka import KafkaException
        while True:
            try:
                fn()
                return "ok"
            except KafkaException as e:
                err = e.args[0]
                self.errors.append("%s: %s" % (what, err))
                if err.fatal():
                    self._fail(what, err)
                if err.txn_requires_abort():
                    return "abort"
                if not err.retriable() or time.monotonic() > deadline:
                    self._fail(what, err)

    def _committed(self, deadline):
        """The group's committed offsets of the input partitions (OffsetFetch; with
        read_committed librdkafka asks for stable offsets only), 0 where none."""
        from confluent_kafka import KafkaException, TopicPartition
        parts = [TopicPartition(self.topic_in, q) for q in sorted(self.ends)]
        while True:
            try:
                got = self.consumer.committed(parts, timeout=10)
                return {tp.partition: max(tp.offset, 0) for tp in got}
            except KafkaException as e:
                self.errors.append("committed: %s" % e)
                if time.monotonic() > deadline:
                    self._fail("committed", e)

    def _delivered(self, err, m):
        if err is None:
            t = m.value().rsplit(b"|", 1)[1].decode()
            self.delivered[t] = self.delivered.get(t, 0) + 1

    def _begin(self, deadline):
        if self._retry("begin_transaction", self.producer.begin_transaction, deadline) != "ok":
            self._fail("begin_transaction", "abortable error")
        self.n += 1

    def run(self, deadline):
        """Process until the positions reach `ends` on every partition with nothing left
        uncommitted. Returns True when done; raises Fatal (the caller restarts) or
        AssertionError past the deadline."""
        from confluent_kafka import KafkaException, TopicPartition
        p, c = self.producer, self.consumer
        self._retry("init_transactions", lambda: p.init_transactions(30), deadline)
        assigned = []
        c.subscribe([self.topic_in], on_assign=lambda cons, parts: assigned.append(parts))
        early = []                            # records the assigning consume() returned
        while not assigned:
            if time.monotonic() > deadline:
                self._fail("subscribe", "no assignment before the deadline")
            early += [m for m in c.consume(1, 0.2) if m.error() is None]
        pos = self._committed(deadline)       # where this incarnation starts
        self.started_at = dict(pos)
        start, batch = None, 0                # start: positions where the transaction began
        while True:
            done = all(pos.get(q, 0) >= end for q, end in self.ends.items())
            if done and batch == 0:
                self.close()
                return True
            if not done and batch < self.k:
                if time.monotonic() > deadline:
                    raise AssertionError("consume-transform-produce past its deadline: "
                                         "positions %s of %s" % (pos, self.ends))
                msgs, early = early + c.consume(self.k - batch - len(early), 0.3), []
                for m in msgs:
                    if m.error() is not None:
                        self.errors.append("consume: %s" % m.error())
                        if m.error().fatal():
                            self._fail("consume", m.error())
                        continue
                    if start is None:
                        self._begin(deadline)
                        start = dict(pos)
                    if m.offset() != pos.get(m.partition(), 0):
                        # Not where this incarnation is (a rebalance restarted the partition
                        # from the committed offset): start again from the committed offsets;
                        # the next incarnation's init_transactions aborts what is open.
                        self._fail("position", "input %d: offset %d, the position is %d"
                                   % (m.partition(), m.offset(), pos.get(m.partition())))
                    value = m.value() + b"|" + self.tag().encode()
                    while True:
                        try:
                            p.produce(self.topic_out, key=m.key(), value=value,
                                      partition=m.partition(), on_delivery=self._delivered)
                            break
                        except BufferError:
                            p.poll(0.05)
                        except KafkaException as e:
                            self._fail("produce", e)
                    pos[m.partition()] = m.offset() + 1
                    batch += 1
                p.poll(0)
                continue
            # The end of a transaction of `batch` records.
            tag = self.tag()
            self.sizes[tag] = batch
            if self.crash_at == self.n:
                # The application dies with its transaction open: its records are in the log
                # (flushed), nothing is committed or aborted. The next incarnation's
                # init_transactions must abort it.
                p.flush(30)
                self.crashed = tag
                self.errors.append("crashed in transaction %s on purpose" % tag)
                self.consumer.close()
                self.producer = None
                raise Fatal("crash on purpose in %s" % tag)
            r = "abort" if self.abort(self.n) else "ok"
            if r == "ok":
                offsets = [TopicPartition(self.topic_in, q, o) for q, o in sorted(pos.items())]
                meta = c.consumer_group_metadata()
                r = self._retry("send_offsets_to_transaction",
                                lambda: p.send_offsets_to_transaction(offsets, meta, 30),
                                deadline)
                if r == "ok":
                    r = self._retry("commit_transaction", lambda: p.commit_transaction(30),
                                    deadline)
                if r == "ok":
                    self.committed.append(tag)
                else:
                    self.forced.append(tag)
            if r != "ok":
                # Every record of an aborted transaction reaches the log first (flush), so a
                # read_uncommitted reader must see it; then abort and rewind.
                p.flush(30)
                self._retry("abort_transaction", lambda: p.abort_transaction(30), deadline)
                self.aborted.append(tag)
                pos = dict(start)
                self._rewind(start)
            start, batch = None, 0

    def _rewind(self, start):
        from confluent_kafka import TopicPartition
        for q, o in start.items():
            if o >= 0:
                self.consumer.seek(TopicPartition(self.topic_in, q, o))


def run_ctp(bootstrap, tid, group, topic_in, topic_out, ends, k, abort, deadline,
            max_incarnations=10, on_incarnation=None, crash_at=None, **kw):
    """Run the application to completion, starting a new incarnation (same transactional id,
    same group) after each fatal error. crash_at=(incarnation, n): that incarnation dies with
    its n-th transaction open. Returns the list of incarnations."""
    apps = []
    for inc in range(max_incarnations):
        crash = crash_at[1] if crash_at and crash_at[0] == inc else None
        app = Ctp(bootstrap, tid, group, topic_in, topic_out, ends, k, abort, inc,
                  crash_at=crash, **kw)
        apps.append(app)
        if on_incarnation:
            on_incarnation(app)
        try:
            if app.run(deadline):
                return apps
        except Fatal:
            if time.monotonic() > deadline:
                raise
            continue
    raise AssertionError("the application did not finish in %d incarnations; errors: %s"
                         % (max_incarnations, [a.errors[-3:] for a in apps]))
