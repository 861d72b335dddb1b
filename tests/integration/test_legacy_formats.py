"""Message formats v0 and v1 (issue 27): Produce v0-2 carrying legacy MessageSets — each codec
those formats allowed, compressed sets as wrapper messages — is stored as RecordBatch v2 (offsets
assigned, timestamps kept, CRCs checked: a bad one is CORRUPT_MESSAGE); Fetch v0-3 answers with
the records converted down (v0-1 magic 0, v2-3 magic 1), control records skipped, bounded by the
partition's max bytes in v0-2, refused with UNSUPPORTED_VERSION where
message.downconversion.enable=false and UNSUPPORTED_COMPRESSION_TYPE for zstd; v4+ see the v2
batches. The legacy sets are built and read with kafka-python's own codec (an independent
implementation, LZ4's magic 0 header checksum quirk included), and kafka-python's clients forced
to api_version 0.9 / 0.10.1 produce and consume. The metrics count the conversions."""

import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402
from kwire import compact_string, i8, i16, i32, i64, string, uvarint  # noqa: E402

from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402



def _xxh32(data, seed=0):
    """xxHash32, for kafka-python's magic 0 LZ4 codec (python3-xxhash is not packaged here)."""
    P1, P2, P3, P4, P5, M = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & M

    def rnd(acc, lane):
        return (rotl((acc + lane * P2) & M, 13) * P1) & M
    n, p = len(data), 0
    if n >= 16:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while n - p >= 16:
            for k in range(4):
                v[k] = rnd(v[k], struct.unpack_from("<I", data, p + 4 * k)[0])
            p += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while n - p >= 4:
        h = (rotl((h + struct.unpack_from("<I", data, p)[0] * P3) & M, 17) * P4) & M
        p += 4
    while p < n:
        h = (rotl((h + data[p] * P5) & M, 11) * P1) & M
        p += 1
    h ^= h >> 15
    h = (h * P2) & M
    h ^= h >> 13
    h = (h * P3) & M
    h ^= h >> 16
    return h


class _XXH:
    def __init__(self, data):
        self.h = _xxh32(bytes(data))

    def digest(self):
        return struct.pack(">I", self.h)

    def intdigest(self):
        return self.h


import kafka.codec  # noqa: E402
if kafka.codec.xxhash is None:
    kafka.codec.xxhash = type("xxhash", (), {"xxh32": staticmethod(_XXH)})
assert _xxh32(b"") == 0x02CC5D05

CORRUPT_MESSAGE, UNSUPPORTED_VERSION, UNSUPPORTED_COMPRESSION_TYPE = 2, 35, 76
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
TS = 1700000000000


def legacy_set(magic, codec, msgs, first_ts=TS):
    """A MessageSet of (key, value) pairs, magic 0/1, wrapped by codec (0: none)."""
    b = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (k, v) in enumerate(msgs):
        assert b.append(i, first_ts + i if magic else None, k, v) is not None
    return bytes(b.build())


def produce_body(version, topic, records, acks=-1, partition=0):
    """Produce v0-2 (no transactional_id before v3)."""
    return (i16(acks) + i32(10000) + i32(1) + string(topic) + i32(1) + i32(partition)
            + i32(len(records)) + records)


def parse_produce(r, version):
    """[(partition, error, base_offset, log_append_time)] of the only topic."""
    out = []
    assert r.i32() == 1
    r.string()
    for _ in range(r.i32()):
        p, e, off = r.i32(), r.i16(), r.i64()
        la = r.i64() if version >= 2 else None
        out.append((p, e, off, la))
    if version >= 1:
        r.i32()  # throttle_time_ms
    r.end()
    return out


def fetch_body(version, topic, offset, part_max=1 << 20, partition=0):
    """Fetch v0-3 of one partition, min_bytes 1, max_wait 100 ms."""
    b = i32(-1) + i32(100) + i32(1)
    if version >= 3:
        b += i32(8 << 20)
    return b + i32(1) + string(topic) + i32(1) + i32(partition) + i64(offset) + i32(part_max)


def parse_fetch(r, version):
    """(error, high_watermark, message-set bytes) of the only partition."""
    if version >= 1:
        r.i32()  # throttle_time_ms
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err, hw = r.i16(), r.i64()
    size = r.i32()
    recs = bytes(r.take(size)) if size > 0 else b""
    r.end()
    return err, hw, recs


def fetch12_body(topic, offset):
    """Fetch v12 (flexible) of one partition."""
    part = (i32(0) + i32(-1) + i64(offset) + i32(-1) + i64(-1) + i32(1 << 20) + kwire.TAGS_NONE)
    t = compact_string(topic) + uvarint(2) + part + kwire.TAGS_NONE
    return (i32(-1) + i32(100) + i32(1) + i32(8 << 20) + i8(0) + i32(0) + i32(-1)
            + uvarint(2) + t + uvarint(1) + compact_string("") + kwire.TAGS_NONE)


def parse_fetch12(r):
    r.i32()
    assert r.i16() == 0
    r.i32()
    assert r.uvarint() == 2
    r.compact_string()
    assert r.uvarint() == 2
    r.i32()
    err, hw = r.i16(), r.i64()
    r.i64(), r.i64()
    r.compact_array(lambda rr: (rr.i64(), rr.i64(), rr.tags()))
    r.i32()
    n = r.uvarint()
    recs = bytes(r.take(n - 1)) if n > 1 else b""
    r.tags()
    r.tags()
    r.tags()
    r.end()
    return err, hw, recs


def legacy_messages(recs):
    """[(offset, magic, timestamp, key, value, wrapper codec)] of a legacy set, CRCs checked;
    a partial message at the end is left out, as consumers do."""
    out, pos = [], 0
    while pos + 12 <= len(recs):
        (size,) = struct.unpack_from(">i", recs, pos + 8)
        if pos + 12 + size > len(recs):
            break
        magic = recs[pos + 16]
        batch = LegacyRecordBatch(recs[pos:pos + 12 + size], magic)
        assert batch.validate_crc(), "bad CRC at %d" % pos
        codec = recs[pos + 17] & 7
        for m in batch:
            out.append((m.offset, magic, m.timestamp, m.key, m.value, codec))
        pos += 12 + size
    return out


def v2_batches(recs):
    """[(base_offset, magic, attributes, max_timestamp, [(offset, timestamp, key, value)])]."""
    mr = MemoryRecords(recs)
    out = []
    while True:
        b = mr.next_batch()
        if b is None:
            return out
        rs = [(r.offset, r.timestamp, r.key, r.value) for r in b]
        out.append((b.base_offset, b.magic, b.attributes, b.max_timestamp, rs))


class LegacyFormatsTest(ServerTestCase):
    SMP = 2

    def produce(self, conn, version, topic, records, acks=-1):
        r = conn.request(0, version, produce_body(version, topic, records, acks))
        return parse_produce(r, version)[0]

    def fetch(self, conn, version, topic, offset, part_max=1 << 20):
        return parse_fetch(conn.request(1, version, fetch_body(version, topic, offset, part_max)),
                           version)

    def test_advertised(self):
        with kwire.Conn.to(self.bootstrap) as c:
            err, apis = kwire.api_versions(c, 3)[:2]
            self.assertEqual(err, 0)
            self.assertEqual(apis[0][0], 0)   # Produce from v0
            self.assertEqual(apis[1][0], 0)   # Fetch from v0

    def test_produce_every_version_and_codec_fetch_every_version(self):
        topic = self.unique("legacy")
        kc.create_topic(self.bootstrap, topic, 1)
        want = []  # (offset, key, value, timestamp or None)
        with kwire.Conn.to(self.bootstrap) as c:
            for version in (0, 1, 2):
                for name, codec in CODECS.items():
                    magic = 1 if version == 2 else 0
                    msgs = [(b"k%d" % i, ("%s-v%d-%s" % (name, version, i)).encode())
                            for i in range(3)] + [(None, b"no key"), (b"no value", None)]
                    p, err, base, la = self.produce(c, version, topic,
                                                    legacy_set(magic, codec, msgs))
                    self.assertEqual((p, err), (0, 0), "v%d %s" % (version, name))
                    self.assertEqual(base, len(want), "v%d %s: base offset" % (version, name))
                    if version >= 2:
                        self.assertEqual(la, -1)  # CreateTime topic
                    for i, (k, v) in enumerate(msgs):
                        want.append((base + i, k, v, TS + i if magic else None, codec))
            # every Fetch version reads it all back, converted down
            for version in (0, 1, 2, 3):
                got, off = [], 0
                for _ in range(100):
                    err, hw, recs = self.fetch(c, version, topic, off)
                    self.assertEqual(err, 0)
                    self.assertEqual(hw, len(want))
                    ms = legacy_messages(recs)
                    if not ms:
                        break
                    got += ms
                    off = ms[-1][0] + 1
                    if off == hw:
                        break
                magic = 0 if version <= 1 else 1
                self.assertEqual([g[0] for g in got], [w[0] for w in want], "v%d" % version)
                for g, w in zip(got, want):
                    self.assertEqual(g[1], magic)
                    self.assertEqual((g[3], g[4]), (w[1], w[2]))
                    self.assertEqual(g[5], w[4], "v%d: the wrapper keeps the codec" % version)
                    if magic == 1:
                        self.assertEqual(g[2], w[3] if w[3] is not None else -1)
            # a fetch from the middle of a wrapper starts at the fetch offset
            err, _, recs = self.fetch(c, 3, topic, 7)
            self.assertEqual(legacy_messages(recs)[0][0], 7)
            # v12 sees v2 batches: one per produce, offsets and timestamps as produced
            r = c.request(1, 12, fetch12_body(topic, 0), flexible=True)
            err, hw, recs = parse_fetch12(r)
            self.assertEqual(err, 0)
            batches = v2_batches(recs)
            self.assertEqual(len(batches), 12)
            self.assertTrue(all(b[1] == 2 for b in batches))
            flat = [r for b in batches for r in b[4]]
            self.assertEqual([x[0] for x in flat], [w[0] for w in want])
            self.assertEqual([x[1] for x in flat], [w[3] if w[3] is not None else -1 for w in want])
            self.assertEqual([(x[2], x[3]) for x in flat], [(w[1], w[2]) for w in want])
            self.assertEqual([b[2] & 7 for b in batches], [w[4] for w in want[::5]])
        m = ac.scrape(self.server.admin_port)
        self.assertGreaterEqual(m.sum("strata_produce_upconverted_records_total"), len(want))
        self.assertGreaterEqual(m.sum("strata_fetch_downconverted_records_total"), 4 * len(want))
        self.assertGreater(m.sum("strata_fetch_downconverted_bytes_total"), 0)
        self.assertGreater(m.sum("strata_fetch_downconversion_seconds_total"), 0)

    def test_lz4_magic0_broken_checksum(self):
        """kafka-python writes magic 0 LZ4 with Kafka's old header checksum; reads it back
        (as old clients expect it) from Fetch v0."""
        topic = self.unique("lz4v0")
        kc.create_topic(self.bootstrap, topic, 1)
        s = legacy_set(0, 3, [(b"a", b"x" * 300), (b"b", b"y" * 300)])
        with kwire.Conn.to(self.bootstrap) as c:
            self.assertEqual(self.produce(c, 0, topic, s)[1], 0)
            err, _, recs = self.fetch(c, 0, topic, 0)
            self.assertEqual(err, 0)
            ms = legacy_messages(recs)
            self.assertEqual([(m[0], m[3], m[4], m[5]) for m in ms],
                             [(0, b"a", b"x" * 300, 3), (1, b"b", b"y" * 300, 3)])

    def test_crc_and_format_errors(self):
        topic = self.unique("crc")
        kc.create_topic(self.bootstrap, topic, 1)
        good = legacy_set(1, 0, [(b"k", b"value")])
        with kwire.Conn.to(self.bootstrap) as c:
            bad = bytearray(good)
            bad[-1] ^= 0x01  # a value bit: the CRC no longer matches
            self.assertEqual(self.produce(c, 2, topic, bytes(bad))[1], CORRUPT_MESSAGE)
            inner_bad = bytearray(legacy_set(1, 1, [(b"k", b"v" * 50)]))
            # a wrapper whose compressed bytes are damaged (CRC fixed up): still refused
            inner_bad[-8] ^= 0xFF
            inner_bad[12:16] = struct.pack(">I", __import__("zlib").crc32(bytes(inner_bad[16:])))
            self.assertIn(self.produce(c, 2, topic, bytes(inner_bad))[1], (CORRUPT_MESSAGE,))
            self.assertEqual(self.produce(c, 1, topic, good[:-3])[1], CORRUPT_MESSAGE)
            self.assertEqual(self.produce(c, 2, topic, good)[:3], (0, 0, 0))
            err, hw, recs = self.fetch(c, 2, topic, 0)
            self.assertEqual((err, hw, len(legacy_messages(recs))), (0, 1, 1))

    def test_log_append_time_and_mixed(self):
        """A LogAppendTime topic stamps the converted batch; Produce v3 (v2 batches) and v0 mix
        in one log, and Fetch v1 converts both."""
        topic = self.unique("lat")
        kc.create_topic(self.bootstrap, topic, 1, config={"message.timestamp.type": "LogAppendTime"})
        with kwire.Conn.to(self.bootstrap) as c:
            before = int(time.time() * 1000)
            p, err, base, la = self.produce(c, 2, topic, legacy_set(1, 2, [(b"a", b"1"), (b"b", b"2")]))
            self.assertEqual((err, base), (0, 0))
            self.assertGreaterEqual(la, before - 1000)
            import cli_segment
            v2 = cli_segment.batch(0, [(b"c", b"3")])
            r = c.request(0, 3, kwire.produce_v3(topic, 0, v2))
            self.assertEqual(r.i32(), 1)
            r.string()
            r.i32()
            r.i32()
            self.assertEqual((r.i16(), r.i64()), (0, 2))
            self.assertEqual(self.produce(c, 0, topic, legacy_set(0, 0, [(b"d", b"4")]))[1:3], (0, 3))
            err, _, recs = self.fetch(c, 3, topic, 0)
            ms = legacy_messages(recs)
            self.assertEqual([(m[0], m[3]) for m in ms], [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")])
            self.assertTrue(all(m[2] >= before - 1000 for m in ms), ms)  # the append time
            err, _, recs = self.fetch(c, 1, topic, 0)
            self.assertEqual([m[1] for m in legacy_messages(recs)], [0, 0, 0, 0])

    def test_transactional_batch_fetched_at_v3(self):
        """Control records (the markers) are left out when converting down; the data records
        keep their offsets (read_uncommitted: Fetch v3 has no isolation level)."""
        from confluent_kafka import Producer
        topic = self.unique("txn")
        kc.create_topic(self.bootstrap, topic, 1)
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": topic,
                      "linger.ms": 5})
        p.init_transactions(30)
        for round_ in range(2):
            p.begin_transaction()
            for i in range(3):
                p.produce(topic, key=b"t%d" % round_, value=b"v%d" % i, partition=0)
            p.commit_transaction(30)
        with kwire.Conn.to(self.bootstrap) as c:
            wait_until(lambda: self.fetch(c, 3, topic, 0)[1] == 8, 15, "high watermark 8")
            err, hw, recs = self.fetch(c, 3, topic, 0)
            ms = legacy_messages(recs)
            self.assertEqual([m[0] for m in ms], [0, 1, 2, 4, 5, 6])  # 3 and 7: markers
            self.assertEqual([m[4] for m in ms], [b"v0", b"v1", b"v2"] * 2)
            # from the marker's offset: the next transaction's records
            err, hw, recs = self.fetch(c, 2, topic, 3)
            self.assertEqual([m[0] for m in legacy_messages(recs)], [4, 5, 6])

    def test_limits_disabled_and_zstd(self):
        topic = self.unique("lim")
        kc.create_topic(self.bootstrap, topic, 1)
        off_topic = self.unique("nodc")
        kc.create_topic(self.bootstrap, off_topic, 1,
                        config={"message.downconversion.enable": "false"})
        z_topic = self.unique("zstd")
        kc.create_topic(self.bootstrap, z_topic, 1)
        with kwire.Conn.to(self.bootstrap) as c:
            msgs = [(b"k%d" % i, b"v" * 100) for i in range(20)]
            self.assertEqual(self.produce(c, 2, topic, legacy_set(1, 0, msgs))[1], 0)
            # v0-2: partition_max_bytes holds, whole messages first
            for pm in (150, 400, 1000):
                err, _, recs = self.fetch(c, 2, topic, 0, part_max=pm)
                self.assertEqual(err, 0)
                self.assertLessEqual(len(recs), pm)
                self.assertEqual(len(legacy_messages(recs)), len(recs) // 136)
            # one message larger than partition_max_bytes: v2 answers it cut, as Kafka does
            err, _, recs = self.fetch(c, 2, topic, 0, part_max=50)
            self.assertEqual((err, len(recs), legacy_messages(recs)), (0, 50, []))
            # down-conversion off: UNSUPPORTED_VERSION before v4, v4 reads
            self.assertEqual(self.produce(c, 2, off_topic, legacy_set(1, 0, msgs[:2]))[1], 0)
            self.assertEqual(self.fetch(c, 3, off_topic, 0)[0], UNSUPPORTED_VERSION)
            r = c.request(1, 4, kwire.fetch_v4(off_topic, 0, 0, 1, 100))
            err, hw, recs = kwire.parse_fetch_v4(r)
            self.assertEqual((err, kwire.count_records(recs)), (0, 2))
        # zstd (produced by a v2 client) cannot go down to magic 0/1
        p = kc.producer(self.bootstrap, compression_type="zstd")
        kc.produce_all(p, z_topic, [{"value": b"z" * 1000, "partition": 0} for i in range(3)])
        with kwire.Conn.to(self.bootstrap) as c:
            r = c.request(1, 4, kwire.fetch_v4(z_topic, 0, 0, 1, 100))
            err, hw, recs = kwire.parse_fetch_v4(r)
            self.assertEqual((err, hw, recs[21 + 1] & 7), (0, 3, 4))  # stored as zstd
            self.assertEqual(self.fetch(c, 3, z_topic, 0)[0], UNSUPPORTED_COMPRESSION_TYPE)

    def test_request_conversion_bound(self):
        """One Fetch v3 converts a few MiB at most (4 MiB): partitions past it answer empty
        and the next fetches get them; everything is read exactly once."""
        topic = self.unique("bound")
        parts = 6
        kc.create_topic(self.bootstrap, topic, parts)
        p = kc.producer(self.bootstrap, batch_size=1 << 20)
        per = 6000
        kc.produce_all(p, topic, [{"key": b"%d-%d" % (q, i), "value": b"x" * 200, "partition": q}
                                  for q in range(parts) for i in range(per)])
        offs = [0] * parts
        rounds = 0
        with kwire.Conn.to(self.bootstrap, timeout=30) as c:
            while min(offs) < per and rounds < 100:
                rounds += 1
                body = (i32(-1) + i32(100) + i32(1) + i32(64 << 20) + i32(1) + string(topic)
                        + i32(parts) + b"".join(i32(q) + i64(offs[q]) + i32(2 << 20)
                                                for q in range(parts)))
                r = c.request(1, 3, body, timeout=30)
                r.i32()
                self.assertEqual(r.i32(), 1)
                r.string()
                total, empty = 0, 0
                for _ in range(r.i32()):
                    q, err, hw = r.i32(), r.i16(), r.i64()
                    self.assertEqual((err, hw), (0, per))
                    recs = bytes(r.take(r.i32()))
                    total += len(recs)
                    ms = legacy_messages(recs)
                    if not ms:
                        empty += 1
                        continue
                    self.assertEqual(ms[0][0], offs[q])
                    self.assertEqual([m[0] for m in ms], list(range(offs[q], offs[q] + len(ms))))
                    offs[q] += len(ms)
                r.end()
                self.assertLessEqual(total, (4 << 20) + 1000)
                if rounds == 1:
                    self.assertGreater(empty, 0, "the first fetch stopped converting at 4 MiB")
        self.assertEqual(offs, [per] * parts)
        # one partition read of 7 MiB (partition_max_bytes 16 MiB): converted 4 MiB at most
        big = self.unique("big")
        kc.create_topic(self.bootstrap, big, 1)
        n = 30000
        kc.produce_all(p, big, [{"key": b"%d" % i, "value": b"y" * 200, "partition": 0}
                                for i in range(n)])
        off, rounds = 0, 0
        with kwire.Conn.to(self.bootstrap, timeout=30) as c:
            while off < n and rounds < 100:
                rounds += 1
                err, hw, recs = self.fetch(c, 3, big, off, part_max=16 << 20)
                self.assertEqual((err, hw), (0, n))
                self.assertLessEqual(len(recs), (4 << 20) + 1000)
                ms = legacy_messages(recs)
                self.assertEqual(ms[0][0], off)
                off = ms[-1][0] + 1
        self.assertEqual(off, n)
        self.assertGreater(rounds, 1)

    def test_kafka_python_old_api_versions(self):
        """kafka-python forced to 0.9 (Produce v1 with magic 0, Fetch v1) and 0.10.1 (Produce
        v2 with magic 1, Fetch v3), every codec, consuming by assignment."""
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        for api in ((0, 9), (0, 10, 1)):
            for codec in (None, "gzip", "snappy", "lz4"):
                topic = self.unique("kp%d-%s" % (len(api), codec))
                kc.create_topic(self.bootstrap, topic, 1)
                prod = KafkaProducer(bootstrap_servers=self.bootstrap, api_version=api,
                                     compression_type=codec, linger_ms=5)
                for i in range(50):
                    prod.send(topic, key=b"k%d" % i, value=b"value %d" % i, partition=0)
                prod.flush(30)
                prod.close(10)
                cons = KafkaConsumer(bootstrap_servers=self.bootstrap, api_version=api,
                                     enable_auto_commit=False, consumer_timeout_ms=5000)
                tp = TopicPartition(topic, 0)
                cons.assign([tp])
                cons.seek(tp, 0)
                got = []
                deadline = time.monotonic() + 30
                while len(got) < 50 and time.monotonic() < deadline:
                    for recs in cons.poll(timeout_ms=500).values():
                        got += [(m.offset, m.key, m.value) for m in recs]
                cons.close()
                self.assertEqual(got, [(i, b"k%d" % i, b"value %d" % i) for i in range(50)],
                                 "%s %s" % (api, codec))


if __name__ == "__main__":
    from harness import main
    main()
