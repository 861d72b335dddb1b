"""Log compaction of user topics (issue 14), end to end against a real server.

A topic with cleanup.policy=compact is cleaned by its shard in the background: the closed
segments keep the latest record of each key at its original offset; tombstones go once they
are older than delete.retention.ms and survived one clean; an idempotent producer's newest
batch stays (even emptied), so its retries are still recognised after a restart that rebuilds
the producer state from the log; a crash in the middle of a clean loses nothing. The cleaner's
progress is read from /v1/partitions (and /metrics), which the tests wait on.

Clients: confluent-kafka (librdkafka) produces and reads; kafka-python produces the tombstones
and reads them back; raw wire for the idempotent producer's exact retry."""

import glob
import json
import os
import struct
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_segment  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402
from test_idempotence import init_producer_id  # noqa: E402
from test_produce_wire import parse_v3, produce_v3  # noqa: E402

NONE, OUT_OF_ORDER, NOT_LEADER_OR_FOLLOWER = 0, 45, 6
SEGMENT = 16384
COMPACT = {"cleanup.policy": "compact", "internal.segment.bytes": str(SEGMENT),
           "min.cleanable.dirty.ratio": "0.01"}


def get_json(server, path):
    url = "http://%s:%d%s" % (server.host, server.admin_port, path)
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def cleaner(server, topic, partition=0):
    """The cleaner figures of one partition from /v1/partitions (None before they exist)."""
    for p in get_json(server, "/v1/partitions?topic=" + topic)["partitions"]:
        if p["topic"] == topic and p["partition"] == partition:
            return p["cleaner"]
    return None


def wait_cleaned(server, topic, after=0, timeout=60):
    """Waits until more than `after` cleans finished and nothing cleanable is left dirty and
    no clean runs; returns the figures."""
    def done():
        c = cleaner(server, topic)
        return c if (c and c["cleans"] > after and c["dirty_ratio"] == 0
                     and not c["in_progress"]) else None
    return wait_until(done, timeout, "%s cleaned (more than %d cleans, nothing dirty)"
                      % (topic, after))


def segment_bases(server, topic, partition=0):
    d = os.path.join(server.data_dir, "%s-%d" % (topic, partition))
    return sorted(int(os.path.basename(f)[:20]) for f in glob.glob(os.path.join(d, "*.log")))


def read_all(bootstrap, topic, timeout=30):
    """Every record of partition 0 from the log start to the high watermark (confluent)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "strata-it-compaction",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                  "enable.partition.eof": True})
    try:
        _, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout
        while not out or out[-1][0] < hi - 1:
            if time.monotonic() > deadline:
                raise AssertionError("read up to offset %s of %d within %ss"
                                     % (out[-1][0] if out else None, hi, timeout))
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def kbatch(pid, epoch, seq, pairs):
    """An uncompressed batch of keyed records from producer pid/epoch starting at seq."""
    n = len(pairs)
    recs = b"".join(cli_segment._record(i, i, k, v) for i, (k, v) in enumerate(pairs))
    ts = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 0, n - 1, ts, ts + n - 1, pid, epoch, seq, n) + recs
    after_len = struct.pack(">ibI", 0, 2, cli_segment.crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


class CompactionTest(ServerTestCase):
    SMP = 2

    def check_compacted(self, topic, produced, got):
        """got (offset, key, value) against produced {offset: (key, value)}: offsets kept, each
        key's last record is its latest, and below the active segment each key appears once,
        as its latest record below it."""
        self.assertEqual([o for o, _, _ in got], sorted({o for o, _, _ in got}))
        for o, k, v in got:
            self.assertEqual((k, v), produced[o], "offset %d is not what was produced there" % o)
        latest = {}
        for o in sorted(produced):
            latest[produced[o][0]] = o
        last_seen = {k: o for o, k, _ in got}
        for k, o in last_seen.items():
            self.assertEqual(o, latest[k], "key %r: its last record is not its latest" % k)
        for k, o in latest.items():
            if produced[o][1] is not None:  # a tombstone may be gone; a value never
                self.assertIn(k, last_seen)
        active = segment_bases(self.server, topic)[-1]
        below = {}
        for o in sorted(produced):
            if o < active:
                below[produced[o][0]] = o
        closed = [(o, k) for o, k, _ in got if o < active]
        self.assertEqual(len(closed), len({k for _, k in closed}), "a key twice in closed segments")
        for o, k in closed:
            self.assertEqual(o, below[k], "key %r at %d: not its latest below %d" % (k, o, active))
        return active

    def check_cli(self, topic):
        """`strata topic describe` shows each partition's cleanable ratio from the admin API."""
        cli = os.environ.get("STRATA_CLI")
        if not cli:
            return
        base = [cli, "topic", "describe", topic, "-b", self.bootstrap]
        r = harness.run_cmd(base + ["--admin", "%s:%d" % (self.server.host,
                                                           self.server.admin_port)])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("CLEANABLE", r.stdout)
        self.assertRegex(r.stdout, r"(?m)^0\s+0\s.*\s0\.00$")
        self.assertRegex(r.stdout, r"cleanup\.policy\s+compact")
        # No admin API there: the ratio is unknown, the rest is printed.
        r = harness.run_cmd(base + ["--admin", "127.0.0.1:%d" % harness.free_port()])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"(?m)^0\s+0\s.*\s\?$")
        self.assertIn("cleanable ratio unknown", r.stdout)

    def test_latest_value_per_key_offsets_kept(self):
        topic = self.unique("cmp")
        kc.create_topic(self.bootstrap, topic, 1, config=COMPACT)
        p = kc.producer(self.bootstrap, batch_size=4096, linger_ms=2)
        n, keys = 100000, 1000
        msgs = [{"key": b"k%04d" % (i % keys), "value": b"v%06d" % i} for i in range(n)]
        t0 = time.monotonic()
        reports = kc.produce_all(p, topic, msgs, timeout=90)
        produced = {off: (m["key"], m["value"]) for m, _, off in reports}
        st = wait_cleaned(self.server, topic)
        print("  produced %d records in %.1fs; cleaner: %s" % (n, time.monotonic() - t0, st))
        self.assertGreater(st["records_removed"], n // 2)
        self.assertGreater(st["bytes_reclaimed"], 0)
        got = read_all(self.bootstrap, topic)
        self.check_compacted(topic, produced, got)
        self.assertLess(len(got), n // 10, "far fewer records than were produced")
        self.check_cli(topic)
        metrics = urllib.request.urlopen("http://%s:%d/metrics" % (
            self.server.host, self.server.admin_port), timeout=5).read().decode()
        label = '{topic="%s",partition="0"}' % topic
        for fam in ("strata_partition_cleaner_dirty_ratio", "strata_partition_cleaner_cleans_total",
                    "strata_partition_cleaner_records_removed_total",
                    "strata_partition_cleaner_bytes_reclaimed_total",
                    "strata_partition_cleaner_last_clean_timestamp_seconds"):
            self.assertIn(fam + label, metrics)

    def test_tombstones_go_after_delete_retention(self):
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        topic = self.unique("tomb")
        kc.create_topic(self.bootstrap, topic, 1, config=dict(COMPACT, **{
            "delete.retention.ms": "1500"}))
        kp = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", batch_size=2048,
                           linger_ms=2)
        produced, seq = {}, [0]

        def send(pairs):
            futs = [(k, v, kp.send(topic, key=k, value=v, partition=0)) for k, v in pairs]
            for k, v, f in futs:
                produced[f.get(timeout=30).offset] = (k, v)

        def filler():  # other keys, enough to close the segment holding what came before
            send([(b"f%03d" % (i % 50), b"x" * 60 + b"%d" % (seq[0] + i)) for i in range(400)])
            seq[0] += 400

        send([(b"d%03d" % i, b"live%d" % i) for i in range(100)])
        send([(b"d%03d" % i, None) for i in range(50)])   # tombstones for d000..d049
        filler()
        st = wait_cleaned(self.server, topic)

        def read():
            kcons = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                  consumer_timeout_ms=1500)
            tp = TopicPartition(topic, 0)
            kcons.assign([tp])
            kcons.seek_to_beginning(tp)
            end = kcons.end_offsets([tp])[tp]
            out = []
            deadline = time.monotonic() + 20
            while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
                for recs in kcons.poll(500).values():
                    out.extend((r.offset, r.key, r.value) for r in recs)
            kcons.close()
            return out

        got = read()
        dkeys = {k: v for _, k, v in got if k.startswith(b"d")}
        self.assertEqual(len(dkeys), 100, "a tombstone survives its first clean")
        self.assertEqual([dkeys[b"d%03d" % i] for i in range(50)], [None] * 50)
        # Later cleans, once the tombstones are older than delete.retention.ms, drop them.
        deadline = time.monotonic() + 30
        while True:
            filler()
            st = wait_cleaned(self.server, topic, after=st["cleans"])
            got = read()
            dkeys = {k: v for _, k, v in got if k.startswith(b"d")}
            if len(dkeys) == 50 or time.monotonic() > deadline:
                break
        kp.close()
        self.assertEqual(sorted(dkeys), [b"d%03d" % i for i in range(50, 100)])
        self.assertEqual(dkeys[b"d077"], b"live77")
        self.check_compacted(topic, produced, got)

    def test_idempotent_producer_across_a_clean_and_restarts(self):
        """The producer's newest batch is kept even when compaction empties it, so after a
        crash (state rebuilt from the log) its retry is still a duplicate; librdkafka with
        enable.idempotence goes on producing across a clean and a clean restart."""
        topic = self.unique("idem")
        kc.create_topic(self.bootstrap, topic, 1, config=COMPACT)
        with kwire.Conn.to(self.bootstrap) as c:
            err, pid, epoch = init_producer_id(c)
            self.assertEqual(err, NONE)
            b0 = kbatch(pid, epoch, 0, [(b"k%d" % i, b"first%d" % i) for i in range(5)])
            r = parse_v3(c.request(0, 3, produce_v3(topic, 0, b0)))[0]
            self.assertEqual(r[1], NONE)
            first = r[2]
        # Newer values of the same keys (another producer), and enough to close segments.
        p = kc.producer(self.bootstrap, enable_idempotence=True, batch_size=4096)
        msgs = [{"key": b"k%d" % (i % 200), "value": b"second%d" % i} for i in range(6000)]
        reports = kc.produce_all(p, topic, msgs)
        produced = {first + i: (b"k%d" % i, b"first%d" % i) for i in range(5)}
        produced.update({off: (m["key"], m["value"]) for m, _, off in reports})
        wait_cleaned(self.server, topic)
        got = read_all(self.bootstrap, topic)
        self.assertFalse([o for o, _, _ in got if first <= o < first + 5],
                         "the raw producer's records were superseded and cleaned away")
        self.check_compacted(topic, produced, got)
        # A crash: no snapshot; the state comes from the batch headers, the emptied one too.
        self.server.restart(clean=False)
        with kwire.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(parse_v3(c.request(0, 3, produce_v3(topic, 0, b0)))[0][1:],
                             (NONE, first), "the retry of its last batch is a duplicate")
            b2 = kbatch(pid, epoch, 7, [(b"k0", b"gap")])
            # refused, not written: retriable, as the producer's state is from before this
            # leadership (partition.h, the gap grace; OUT_OF_ORDER once it is over)
            self.assertEqual(parse_v3(c.request(0, 3, produce_v3(topic, 0, b2)))[0][1],
                             NOT_LEADER_OR_FOLLOWER)
            b1 = kbatch(pid, epoch, 5, [(b"k0", b"third")])
            r = parse_v3(c.request(0, 3, produce_v3(topic, 0, b1)))[0]
            self.assertEqual(r[1], NONE)
            produced[r[2]] = (b"k0", b"third")
        # librdkafka's idempotent producer goes on over the restart and the next clean.
        more = [{"key": b"k%d" % (i % 200), "value": b"fourth%d" % i} for i in range(3000)]
        reports = kc.produce_all(p, topic, more)
        produced.update({off: (m["key"], m["value"]) for m, _, off in reports})
        self.server.restart(clean=True)
        reports = kc.produce_all(p, topic, more[:1000])
        produced.update({off: (m["key"], m["value"]) for m, _, off in reports})
        p.flush(10)
        wait_cleaned(self.server, topic)
        self.check_compacted(topic, produced, read_all(self.server.bootstrap, topic))


class CleanCrashTest(ServerTestCase):
    """A crash in the middle of a clean loses nothing: the cleaner is throttled so the clean
    is still running when the server is killed."""
    SMP = 1
    SETS = {"log.cleaner.io.max.bytes.per.second": "400000"}

    def test_kill_during_clean(self):
        topic = self.unique("crash")
        kc.create_topic(self.bootstrap, topic, 1, config=dict(COMPACT, **{
            "min.cleanable.dirty.ratio": "0.9"}))
        p = kc.producer(self.bootstrap, batch_size=4096)
        msgs = [{"key": b"k%03d" % (i % 300), "value": b"v%06d" % i + b"." * 40}
                for i in range(20000)]
        reports = kc.produce_all(p, topic, msgs, timeout=90)
        produced = {off: (m["key"], m["value"]) for m, _, off in reports}
        # The ratio was not reached while producing (the active segment is never dirty): lower
        # it so one big, throttled clean starts.
        from confluent_kafka.admin import ConfigResource
        a = kc.admin(self.bootstrap)
        res = ConfigResource("topic", topic, set_config=dict(COMPACT))
        a.alter_configs([res])[res].result(30)
        wait_until(lambda: (cleaner(self.server, topic) or {}).get("in_progress"), 20,
                   "a clean in progress")
        self.server.restart(clean=False)
        got = read_all(self.server.bootstrap, topic)
        last = {k: o for o, (k, _) in sorted(produced.items())}
        self.assertEqual({k: o for o, k, _ in got}, last, "every key's latest record is there")
        for o, k, v in got:
            self.assertEqual((k, v), produced[o])
        # The clean starts over after the restart (still throttled: about 1.3 MB to read
        # twice) and finishes.
        st = wait_cleaned(self.server, topic, timeout=60)
        self.assertGreater(st["records_removed"], 0)
        got = read_all(self.server.bootstrap, topic)
        CompactionTest.check_compacted(self, topic, produced, got)


if __name__ == "__main__":
    harness.main()
