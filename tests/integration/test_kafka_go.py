"""segmentio kafka-go 0.2 (issue 27), the Debian package built offline: it speaks only old
versions (Produce v2 with message format v1, Fetch v2, Metadata v1, ListOffsets v1). The topic is
created with another client (kafka-go's CreateTopics is v0); kafka-go's Writer produces with
each codec it has, its Reader consumes each partition by offset, every message exactly once and
in order, and confluent's consumer reads the same records (stored as v2 batches). The group
part (JoinGroup v1, SyncGroup v0, OffsetCommit v2) runs where the broker advertises JoinGroup
v1, and is skipped, saying so, where it does not.

Also Shopify sarama 1.22 (golang-github-shopify-sarama-dev), told the broker is Kafka 0.8.2
(Produce v0, message format v0) or 0.10.0 (Produce v2, format v1), produces with each codec it
allows there, and told 0.10.1 (ListOffsets v1, Fetch v3) consumes: every message, in order,
timestamps kept where format v1 carries them.

Needs go (golang-go) and golang-github-segmentio-kafka-go-dev (sarama's test: its package);
skipped without them."""

import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOPATH = "/usr/share/gocode"
PKG = os.path.join(GOPATH, "src/github.com/segmentio/kafka-go")
SARAMA = os.path.join(GOPATH, "src/github.com/Shopify/sarama")
N = 200


def build_dir():
    srv = os.environ.get("STRATA_SERVER")
    return os.path.dirname(os.path.abspath(srv)) if srv else HERE


class KafkaGoTest(ServerTestCase):
    SMP = 2

    @classmethod
    def setUpClass(cls):
        if not shutil.which("go") or not os.path.isdir(PKG):
            raise unittest.SkipTest("needs go and golang-github-segmentio-kafka-go-dev")
        out = os.path.join(build_dir(), "gocache")
        os.makedirs(out, exist_ok=True)
        env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH, GOCACHE=out, GOFLAGS="")

        def build(name):
            b = os.path.join(out, name)
            r = subprocess.run(["go", "build", "-o", b, os.path.join(HERE, "go", name + ".go")],
                               env=env, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise AssertionError("go build of %s failed:\n%s" % (name, r.stderr))
            return b
        cls.bin = build("kafkago")
        cls.sarama = build("sarama") if os.path.isdir(SARAMA) else None
        super().setUpClass()

    def kgo(self, *args, timeout=120, binary=None):
        r = subprocess.run([binary or self.bin] + [str(a) for a in args], capture_output=True,
                           text=True, timeout=timeout)
        self.assertEqual(r.returncode, 0, "kafkago %s: %s" % (" ".join(map(str, args)), r.stderr))
        return [tuple(line.split(" ")) for line in r.stdout.splitlines()]

    def test_produce_and_consume_by_partition(self):
        from confluent_kafka import Consumer, TopicPartition
        for codec in ("none", "gzip", "snappy", "lz4"):
            topic = self.unique("kgo-" + codec)
            kc.create_topic(self.bootstrap, topic, 2)
            self.kgo("produce", self.bootstrap, topic, N, codec)
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": topic})
            ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in (0, 1)]
            c.close()
            self.assertEqual(sum(ends), N, codec)
            seen = {}
            for p in (0, 1):
                if ends[p] == 0:
                    continue
                got = self.kgo("consume", self.bootstrap, topic, p, ends[p])
                self.assertEqual([int(g[1]) for g in got], list(range(ends[p])),
                                 "%s: partition %d in order" % (codec, p))
                for part, off, k, v in got:
                    self.assertEqual(k[1:], v[1:])
                    seen[k] = seen.get(k, 0) + 1
            self.assertEqual(seen, {"k%d" % i: 1 for i in range(N)}, codec)
            # a v2 client reads the same records
            msgs = kc.consume_partitions(self.bootstrap, topic, [0, 1], N)
            self.assertEqual(sorted(m.key() for m in msgs),
                             sorted(b"k%d" % i for i in range(N)))

    def test_sarama_old_formats(self):
        if not self.sarama:
            self.skipTest("needs golang-github-shopify-sarama-dev")
        for version in ("0.8.2.0", "0.10.0.0"):
            for codec in ("none", "gzip", "snappy", "lz4"):
                if codec == "lz4" and version == "0.8.2.0":
                    continue  # sarama allows lz4 from 0.10 (magic 0 lz4: test_legacy_formats)
                topic = self.unique("sarama-%s-%s" % (version[:4], codec))
                kc.create_topic(self.bootstrap, topic, 1)
                self.kgo("produce", version, self.bootstrap, topic, 100, codec,
                         binary=self.sarama)
                got = self.kgo("consume", "0.10.1.0", self.bootstrap, topic, 100,
                               binary=self.sarama)
                what = "%s %s" % (version, codec)
                self.assertEqual([(int(o), k, v) for o, k, v, _ in got],
                                 [(i, "k%d" % i, "v%d" % i) for i in range(100)], what)
                if version != "0.8.2.0":  # format v1 carries the producer's timestamps
                    self.assertEqual([int(t) for *_, t in got],
                                     [1700000000000 + i for i in range(100)], what)

    def test_group(self):
        with kwire.Conn.to(self.bootstrap) as c:
            apis = kwire.api_versions(c, 3)[1]
        if 11 not in apis or apis[11][0] > 1:
            self.skipTest("the broker does not advertise JoinGroup v1 (kafka-go's consumer "
                          "group needs it: issue 27's other part); advertised %s"
                          % (apis.get(11),))
        topic = self.unique("kgo-group")
        kc.create_topic(self.bootstrap, topic, 2)
        self.kgo("produce", self.bootstrap, topic, N, "none")
        got = self.kgo("group", self.bootstrap, topic, topic, N)
        self.assertEqual(sorted(g[2] for g in got), sorted("k%d" % i for i in range(N)))
        for p in ("0", "1"):
            offs = [int(g[1]) for g in got if g[0] == p]
            self.assertEqual(offs, sorted(offs))


if __name__ == "__main__":
    from harness import main
    main()
