"""Client quotas (issue 22): AlterClientQuotas / DescribeClientQuotas over the wire (kwire:
kafka-python 2.0.2's admin client has no quota API), and their enforcement on real clients.

Checked: Kafka's answers (entities user / client-id / the default, filters EXACT, DEFAULT,
SPECIFIED and strict, validate_only, INVALID_REQUEST for an unknown key or entity type, a
fractional byte rate or a value of 0, UNSUPPORTED_VERSION for an unknown type in a filter);
a producer whose client id has producer_byte_rate Q produces at about Q over a measured
window, its responses carrying throttle_time_ms (confluent-kafka's throttle_cb) and the
broker counting the throttles (/metrics), while another client id is not throttled; a
consumer with consumer_byte_rate likewise; the quotas surviving a restart (metadata log);
both APIs refused CLUSTER_AUTHORIZATION_FAILED to a principal without the cluster's
DESCRIBE_CONFIGS / ALTER_CONFIGS. request_percentage: a client with a tiny share gets
throttle_time_ms (raw Metadata requests, confluent-kafka's throttle_cb) and far fewer requests
answered than a client without one, ApiVersions exempt. controller_mutation_rate: CreateTopics
v7 past the bucket answered THROTTLING_QUOTA_EXCEEDED per topic until it refills, v5 throttled
without the error. ip entities (connection_creation_rate) and max.connections.per.ip with an
override, from several loopback addresses (Linux answers all of 127/8).

Rates: Kafka measures over quota.window.num (11) samples of 1 s and counts a young window as
10 s, so a client may take up to 10 s of its quota at once before it is throttled; each
measured window below starts at the client's first request and lasts 10 s, where the total
allowed is about 10 s of quota."""

import os
import re
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import kwire as kw  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402

DESCRIBE_QUOTAS, ALTER_QUOTAS = 48, 49
INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
Q = 200_000          # bytes per second
WINDOW_S = 10.0      # the measured window (see above)


def f64(v):
    return struct.pack(">d", v)


def alter(conn, entries, validate_only=False):
    """entries: [({type: name-or-None}, [(key, value, remove)])] -> [(error, message)]."""
    def entity(kv):
        return kw.compact_string(kv[0]) + kw.compact_string(kv[1]) + kw.TAGS_NONE

    def op(o):
        return kw.compact_string(o[0]) + f64(o[1]) + kw.boolean(o[2]) + kw.TAGS_NONE

    def entry(e):
        return (kw.compact_array(list(e[0].items()), entity) +
                kw.compact_array(list(e[1]), op) + kw.TAGS_NONE)
    body = kw.compact_array(entries, entry) + kw.boolean(validate_only) + kw.TAGS_NONE
    r = conn.request(ALTER_QUOTAS, 1, body, flexible=True)
    r.i32()

    def result(x):
        err, msg = x.i16(), x.compact_string()
        x.compact_array(lambda y: (y.compact_string(), y.compact_string(), y.tags()))
        x.tags()
        return err, msg
    out = r.compact_array(result)
    r.tags()
    r.end()
    return out


def describe(conn, components, strict=False):
    """components: [(type, match_type, match)] -> (error, message, {entity: {key: value}})
    with entity a sorted tuple of (type, name-or-None)."""
    def comp(c):
        return kw.compact_string(c[0]) + kw.i8(c[1]) + kw.compact_string(c[2]) + kw.TAGS_NONE
    body = kw.compact_array(components, comp) + kw.boolean(strict) + kw.TAGS_NONE
    r = conn.request(DESCRIBE_QUOTAS, 1, body, flexible=True)
    r.i32()
    err, msg = r.i16(), r.compact_string()

    def ent(x):
        t, n = x.compact_string(), x.compact_string()
        x.tags()
        return t, n

    def val(x):
        k = x.compact_string()
        v = struct.unpack(">d", bytes(x.take(8)))[0]
        x.tags()
        return k, v

    def entry(x):
        e = x.compact_array(ent)
        vs = x.compact_array(val)
        x.tags()
        return tuple(sorted(e)), dict(vs)
    entries = r.compact_array(entry)
    r.tags()
    r.end()
    return err, msg, dict(entries) if entries is not None else None


def metric(port, name, typ):
    body = ac.http_get(port, "/metrics")[2]
    total = 0
    for m in re.finditer(r'^%s\{([^}]*)\} (\S+)$' % name, body, re.M):
        if 'type="%s"' % typ in m.group(1):
            total += float(m.group(2))
    return total


class QuotaApiTest(ServerTestCase):

    def conn(self):
        return kw.Conn.to(self.server.bootstrap)

    def test_alter_describe(self):
        u = self.unique("u")
        with self.conn() as c:
            self.assertEqual(alter(c, [
                ({"user": u}, [("producer_byte_rate", 1024, False),
                               ("request_percentage", 12.5, False)]),
                ({"user": u, "client-id": None}, [("consumer_byte_rate", 2048, False)]),
                ({"user": None}, [("controller_mutation_rate", 3, False)]),
            ]), [(0, None)] * 3)
            err, _, got = describe(c, [("user", EXACT, u)])
            self.assertEqual(err, 0)
            self.assertEqual(got, {
                (("user", u),): {"producer_byte_rate": 1024, "request_percentage": 12.5},
                (("client-id", None), ("user", u)): {"consumer_byte_rate": 2048}})
            # strict: only entities made of exactly the filter's types
            self.assertEqual(list(describe(c, [("user", EXACT, u)], strict=True)[2]),
                             [(("user", u),)])
            # DEFAULT and SPECIFIED
            self.assertEqual(describe(c, [("user", DEFAULT, None)])[2],
                             {(("user", None),): {"controller_mutation_rate": 3}})
            both = describe(c, [("user", SPECIFIED, None), ("client-id", SPECIFIED, None)])[2]
            self.assertIn((("client-id", None), ("user", u)), both)
            self.assertNotIn((("user", u),), both)
            # removal of one key keeps the others; of the last, the entity goes
            self.assertEqual(alter(c, [({"user": u}, [("request_percentage", 0, True)]),
                                       ({"user": u, "client-id": None},
                                        [("consumer_byte_rate", 0, True)]),
                                       ({"user": None}, [("controller_mutation_rate", 0, True)])]),
                             [(0, None)] * 3)
            self.assertEqual(describe(c, [("user", EXACT, u)])[2],
                             {(("user", u),): {"producer_byte_rate": 1024}})
            self.assertEqual(describe(c, [("user", DEFAULT, None)])[2], {})
            # validate_only: answered, not stored
            self.assertEqual(alter(c, [({"client-id": u}, [("producer_byte_rate", 5, False)])],
                                   validate_only=True), [(0, None)])
            self.assertEqual(describe(c, [("client-id", EXACT, u)])[2], {})
            alter(c, [({"user": u}, [("producer_byte_rate", 0, True)])])

    def test_invalid(self):
        u = self.unique("bad")
        with self.conn() as c:
            res = alter(c, [
                ({"user": u}, [("producer_byte_rate", 5, False), ("no_such_key", 1, False)]),
                ({"group": u}, [("producer_byte_rate", 5, False)]),
                ({"client-id": u}, [("consumer_byte_rate", 1.5, False)]),
                ({"client-id": u}, [("request_percentage", 0, False)]),
                ({}, [("producer_byte_rate", 5, False)]),
                ({"user": ""}, [("producer_byte_rate", 5, False)]),
                # ip: alone, an address, connection_creation_rate only (and only there)
                ({"ip": "127.0.0.1", "user": u}, [("connection_creation_rate", 5, False)]),
                ({"ip": "not-an-ip"}, [("connection_creation_rate", 5, False)]),
                ({"ip": "127.0.0.1"}, [("producer_byte_rate", 5, False)]),
                ({"ip": "127.0.0.1"}, [("connection_creation_rate", 1.5, False)]),
                ({"user": u}, [("connection_creation_rate", 5, False)]),
            ])
            self.assertEqual([e for e, _ in res], [INVALID_REQUEST] * 11, res)
            self.assertIn("no_such_key", res[0][1])
            # nothing of a refused entry was stored, not even its valid key
            self.assertEqual(describe(c, [("user", EXACT, u)])[2], {})
            self.assertEqual(describe(c, [("client-id", EXACT, u)])[2], {})
            err, msg, got = describe(c, [("group", EXACT, u)])
            self.assertEqual((err, got), (UNSUPPORTED_VERSION, None), msg)
            err, msg, got = describe(c, [("user", EXACT, None)])
            self.assertEqual((err, got), (INVALID_REQUEST, None), msg)
            err, msg, got = describe(c, [("user", DEFAULT, None), ("user", SPECIFIED, None)])
            self.assertEqual(err, INVALID_REQUEST, msg)

    def test_ip_entities(self):
        with self.conn() as c:
            self.assertEqual(alter(c, [({"ip": "10.1.2.3"}, [("connection_creation_rate", 7, False)]),
                                       ({"ip": "0:0::a"}, [("connection_creation_rate", 8, False)]),
                                       ({"ip": None}, [("connection_creation_rate", 9, False)])]),
                             [(0, None)] * 3)
            self.assertEqual(describe(c, [("ip", EXACT, "10.1.2.3")])[2],
                             {(("ip", "10.1.2.3"),): {"connection_creation_rate": 7}})
            # one spelling per address
            self.assertEqual(describe(c, [("ip", EXACT, "::a")])[2],
                             {(("ip", "::a"),): {"connection_creation_rate": 8}})
            self.assertEqual(describe(c, [("ip", DEFAULT, None)])[2],
                             {(("ip", None),): {"connection_creation_rate": 9}})
            self.assertEqual(len(describe(c, [("ip", SPECIFIED, None)])[2]), 3)
            # a user filter never shows an ip entity; ip with user in one filter is refused
            self.assertEqual(describe(c, [("user", SPECIFIED, None)], strict=True)[2], {})
            self.assertEqual(describe(c, [("ip", SPECIFIED, None), ("user", SPECIFIED, None)])[0],
                             INVALID_REQUEST)
            alter(c, [({"ip": "::a"}, [("connection_creation_rate", 0, True)]),
                      ({"ip": None}, [("connection_creation_rate", 0, True)])])

    def test_quotas_survive_restart(self):
        u = self.unique("keep")
        with self.conn() as c:
            self.assertEqual(alter(c, [({"user": u, "client-id": "app"},
                                        [("producer_byte_rate", 4096, False)]),
                                       ({"client-id": None}, [("consumer_byte_rate", 8192, False)]),
                                       ({"client-id": u}, [("request_percentage", 50, False),
                                                           ("controller_mutation_rate", 5, False)]),
                                       ({"ip": "10.9.9.9"}, [("connection_creation_rate", 3, False)])]),
                             [(0, None)] * 4)
        self.server.restart()
        with kw.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(describe(c, [("user", EXACT, u)])[2],
                             {(("client-id", "app"), ("user", u)): {"producer_byte_rate": 4096}})
            self.assertEqual(describe(c, [("client-id", DEFAULT, None)], strict=True)[2],
                             {(("client-id", None),): {"consumer_byte_rate": 8192}})
            self.assertEqual(describe(c, [("client-id", EXACT, u)])[2],
                             {(("client-id", u),): {"request_percentage": 50,
                                                    "controller_mutation_rate": 5}})
            self.assertEqual(describe(c, [("ip", EXACT, "10.9.9.9")])[2],
                             {(("ip", "10.9.9.9"),): {"connection_creation_rate": 3}})
            alter(c, [({"user": u, "client-id": "app"}, [("producer_byte_rate", 0, True)]),
                      ({"client-id": None}, [("consumer_byte_rate", 0, True)]),
                      ({"client-id": u}, [("request_percentage", 0, True),
                                          ("controller_mutation_rate", 0, True)]),
                      ({"ip": "10.9.9.9"}, [("connection_creation_rate", 0, True)])])


class QuotaAuthorizationTest(ServerTestCase):
    """ACLs on, none granted: User:ANONYMOUS may neither describe nor alter quotas (Kafka:
    DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster)."""
    SETS = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false"}

    def test_denied(self):
        with kw.Conn.to(self.server.bootstrap) as c:
            self.assertEqual([e for e, _ in alter(c, [
                ({"user": "a"}, [("producer_byte_rate", 5, False)]),
                ({"client-id": None}, [("consumer_byte_rate", 5, False)])])],
                [31, 31])  # CLUSTER_AUTHORIZATION_FAILED
            err, _, got = describe(c, [])
            self.assertEqual((err, got), (31, None))


class QuotaEnforcementTest(ServerTestCase):
    """One shard, so that every connection of a client counts against one quota."""
    SMP = 1

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.topic = "quota-%d" % os.getpid()
        kc.create_topic(cls.server.bootstrap, cls.topic, partitions=1)

    def set_quota(self, client_id, key, value, remove=False):
        with kw.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(alter(c, [({"client-id": client_id}, [(key, value, remove)])]),
                             [(0, None)])

    def produce_for(self, client_id, seconds, batch=16384):
        """Produce 1000-byte values as fast as the broker lets client_id for `seconds`;
        returns (value bytes delivered within the window, throttle events [ms])."""
        from confluent_kafka import Producer
        throttles = []
        p = Producer({"bootstrap.servers": self.server.bootstrap, "client.id": client_id,
                      "linger.ms": 5, "batch.size": batch, "acks": 1,
                      "queue.buffering.max.kbytes": 256,
                      "throttle_cb": lambda ev: throttles.append(ev.throttle_time * 1000)})
        delivered = [0]
        start = time.monotonic()
        end = start + seconds

        def cb(err, m):
            if err is None and time.monotonic() <= end:
                delivered[0] += len(m.value())
        value = b"q" * 1000
        while time.monotonic() < end:
            try:
                p.produce(self.topic, value, on_delivery=cb)
            except BufferError:
                p.poll(0.01)
                continue
            p.poll(0)
        p.purge()
        p.flush(30)
        return delivered[0], throttles

    def test_producer_byte_rate(self):
        slow, fast = self.unique("slow"), self.unique("fast")
        self.set_quota(slow, "producer_byte_rate", Q)
        before = metric(self.server.admin_port, "strata_quota_throttled_total", "produce")
        got, throttles = self.produce_for(slow, WINDOW_S)
        rate = got / WINDOW_S
        print("producer_byte_rate %d: %.0f B/s (%.2fx) over %.0f s, %d throttles, max %.0f ms"
              % (Q, rate, rate / Q, WINDOW_S, len(throttles), max(throttles or [0])),
              file=sys.stderr)
        self.assertGreater(rate, 0.5 * Q)
        self.assertLess(rate, 1.5 * Q)
        self.assertTrue(any(t > 0 for t in throttles), "no throttle_time_ms reported")
        after = metric(self.server.admin_port, "strata_quota_throttled_total", "produce")
        self.assertGreater(after, before)
        self.assertGreater(metric(self.server.admin_port, "strata_quota_throttle_seconds_total",
                                  "produce"), 0)
        # another client id has no quota: not throttled, well above Q
        got, throttles = self.produce_for(fast, 3.0)
        print("no quota: %.0f B/s (%.1fx Q), %d throttles" % (got / 3.0, got / 3.0 / Q,
                                                              len(throttles)), file=sys.stderr)
        self.assertGreater(got / 3.0, 3 * Q)
        self.assertEqual(throttles, [])
        self.set_quota(slow, "producer_byte_rate", 0, remove=True)

    def test_consumer_byte_rate(self):
        from confluent_kafka import Consumer, TopicPartition
        slowc = self.unique("slowc")
        # enough data for more than the window at Q, produced without a quota
        need = int(1.8 * Q * WINDOW_S)
        # small batches: a fetch returns whole batches, so they bound what one fetch takes
        p = kc.producer(self.server.bootstrap, client_id=self.unique("fill"), batch_size=16384)
        n = need // 1000 + 1
        for i in range(n):
            while True:
                try:
                    p.produce(self.topic, b"c" * 1000)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        self.assertEqual(p.flush(60), 0)
        self.set_quota(slowc, "consumer_byte_rate", Q)
        throttles = []
        c = Consumer({"bootstrap.servers": self.server.bootstrap, "client.id": slowc,
                      "group.id": self.unique("g"), "enable.auto.commit": False,
                      "fetch.max.bytes": 65536, "message.max.bytes": 65536,
                      "max.partition.fetch.bytes": 32768,
                      "queued.max.messages.kbytes": 64,
                      "throttle_cb": lambda ev: throttles.append(ev.throttle_time * 1000)})
        try:
            c.assign([TopicPartition(self.topic, 0, 0)])
            got = 0
            start = None
            deadline = time.monotonic() + WINDOW_S + 20
            while time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is None or m.error():
                    continue
                now = time.monotonic()
                if start is None:
                    start = now
                if now - start > WINDOW_S:
                    break
                got += len(m.value())
            self.assertIsNotNone(start, "nothing consumed")
        finally:
            c.close()
        rate = got / WINDOW_S
        print("consumer_byte_rate %d: %.0f B/s (%.2fx) over %.0f s, %d throttles, max %.0f ms"
              % (Q, rate, rate / Q, WINDOW_S, len(throttles), max(throttles or [0])),
              file=sys.stderr)
        self.assertGreater(rate, 0.5 * Q)
        self.assertLess(rate, 1.5 * Q)
        self.assertTrue(any(t > 0 for t in throttles), "no throttle_time_ms reported")
        self.assertGreater(metric(self.server.admin_port, "strata_quota_throttled_total",
                                  "fetch"), 0)
        self.set_quota(slowc, "consumer_byte_rate", 0, remove=True)


CREATE_TOPICS, THROTTLING_QUOTA_EXCEEDED = 19, 89


def create_topics(conn, topics, version, client_id):
    """CreateTopics (v5+, flexible) of [(name, partitions)] -> (throttle_time_ms,
    [(name, error)])."""
    def topic(t):
        return (kw.compact_string(t[0]) + kw.i32(t[1]) + kw.i16(-1) + kw.compact_array([], None) +
                kw.compact_array([], None) + kw.TAGS_NONE)
    body = kw.compact_array(topics, topic) + kw.i32(10000) + kw.boolean(False) + kw.TAGS_NONE
    r = conn.request(CREATE_TOPICS, version, body, flexible=True, client_id=client_id,
                     timeout=15.0)
    throttle = r.i32()

    def result(x):
        name = x.compact_string()
        if version >= 7:
            x.uuid()
        err = x.i16()
        x.compact_string()
        x.i32()
        x.i16()
        x.compact_array(lambda y: (y.compact_string(), y.compact_string(), y.boolean(), y.i8(),
                                   y.boolean(), y.tags()))
        x.tags()
        return name, err
    out = r.compact_array(result)
    r.tags()
    r.end()
    return throttle, out


class RequestQuotaTest(ServerTestCase):
    """request_percentage and controller_mutation_rate (one shard: one quota per client)."""
    SMP = 1

    def set_quota(self, entity, key, value, remove=False):
        with kw.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(alter(c, [(entity, [(key, value, remove)])]), [(0, None)])

    def metadata_for(self, client_id, seconds):
        """Metadata v12 requests one after the other for `seconds` on one connection ->
        (requests answered, their throttle_time_ms)."""
        throttles = []
        end = time.monotonic() + seconds
        body = kw.compact_array([], None) + kw.boolean(False) + kw.boolean(False) + kw.TAGS_NONE
        with kw.Conn.to(self.server.bootstrap) as c:
            while time.monotonic() < end:
                r = c.request(3, 12, body, flexible=True, client_id=client_id, timeout=10.0)
                throttles.append(r.i32())
        return len(throttles), throttles

    def test_request_percentage(self):
        slow, fast = self.unique("busy"), self.unique("free")
        # 0.01 % of one shard: 1 ms of handling per 10 s window, so every request soon over
        self.set_quota({"client-id": slow}, "request_percentage", 0.01)
        n_fast, t_fast = self.metadata_for(fast, 3.0)
        n_slow, t_slow = self.metadata_for(slow, 3.0)
        print("request_percentage 0.01: %d requests in 3 s (max throttle %d ms); no quota: %d"
              % (n_slow, max(t_slow), n_fast), file=sys.stderr)
        self.assertTrue(any(t > 0 for t in t_slow), "no throttle_time_ms reported")
        # Kafka caps this throttle at one window (1 s)
        self.assertLessEqual(max(t_slow), 1000)
        # the first few fit in the 1 ms; after that muted up to 1 s after each response
        self.assertLess(n_slow, 100)
        self.assertEqual(max(t_fast), 0)
        self.assertGreater(n_fast, 10 * n_slow)
        # ApiVersions stays exempt: answered at once although the client id is over its quota
        with kw.Conn.to(self.server.bootstrap) as c:
            start = time.monotonic()
            for _ in range(5):
                c.request(18, 3, kw.compact_string("t") + kw.compact_string("1") + kw.TAGS_NONE,
                          flexible=True, client_id=slow, flexible_response=False)
            self.assertLess(time.monotonic() - start, 1.0)
        # a real client: confluent-kafka's producer reports the throttles (Produce carries
        # the request time's throttle too) and is held to a fraction of the free rate
        from confluent_kafka import Producer
        throttles = []
        p = Producer({"bootstrap.servers": self.server.bootstrap, "client.id": slow,
                      "linger.ms": 0, "acks": 1,
                      "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
        topic = self.unique("rqt")
        kc.create_topic(self.server.bootstrap, topic, partitions=1)
        delivered = [0]
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            try:
                p.produce(topic, b"r" * 100,
                          on_delivery=lambda e, m: delivered.__setitem__(0, delivered[0] + 1))
            except BufferError:
                pass
            p.poll(0.01)
        p.flush(15)
        print("confluent-kafka with request_percentage 0.01: %d throttle events, %d delivered"
              % (len(throttles), delivered[0]), file=sys.stderr)
        self.assertTrue(any(t > 0 for t in throttles), "throttle_cb never called")
        self.set_quota({"client-id": slow}, "request_percentage", 0, remove=True)
        # the quota removed: no longer throttled
        n, t = self.metadata_for(slow, 1.0)
        self.assertEqual(max(t), 0)

    def test_controller_mutation_rate(self):
        cid = self.unique("mut")
        # 1 partition a second: a burst of 11 (11 windows of 1 s)
        self.set_quota({"client-id": cid}, "controller_mutation_rate", 1)
        a, b, c2, d = (self.unique("m") for _ in range(4))
        with kw.Conn.to(self.server.bootstrap) as c:
            # within the burst (0 or more left), so accepted even beyond it: 11 - 12 = -1
            throttle, res = create_topics(c, [(a, 12)], 7, cid)
            self.assertEqual(res, [(a, 0)])
            # in debt: refused with the time the debt takes (1 s), topic by topic
            throttle, res = create_topics(c, [(b, 1), (c2, 1)], 7, cid)
            self.assertEqual(res, [(b, THROTTLING_QUOTA_EXCEEDED),
                                   (c2, THROTTLING_QUOTA_EXCEEDED)])
            self.assertGreater(throttle, 0)
            self.assertLessEqual(throttle, 1000)
            # accepted again once refilled (bounded wait)
            deadline = time.monotonic() + 15
            while True:
                throttle, res = create_topics(c, [(b, 1)], 7, cid)
                if res == [(b, 0)] or time.monotonic() > deadline:
                    break
                self.assertEqual(res, [(b, THROTTLING_QUOTA_EXCEEDED)])
                time.sleep(0.1)
            self.assertEqual(res, [(b, 0)])
            # v5 (before strict): never refused, the response throttled by the debt
            throttle, res = create_topics(c, [(c2, 12)], 5, cid)
            self.assertEqual(res, [(c2, 0)])
            throttle, res = create_topics(c, [(d, 1)], 5, cid)
            self.assertEqual(res, [(d, 0)])
            self.assertGreater(throttle, 0)
            # an existing topic costs nothing (refused by the controller, given back) and
            # another client id is not throttled
            throttle, res = create_topics(c, [(a, 100)], 7, self.unique("other"))
            self.assertEqual((throttle, res), (0, [(a, 36)]))  # TOPIC_ALREADY_EXISTS
        self.set_quota({"client-id": cid}, "controller_mutation_rate", 0, remove=True)


def connect_from(server, source_ip, timeout=3.0):
    """A kwire connection to the server from source_ip (Linux answers all of 127/8)."""
    host, port = server.bootstrap.rsplit(":", 1)
    c = kw.Conn.__new__(kw.Conn)
    c.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                      source_address=(source_ip, 0))
    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.corr = 0
    return c


def served(c, timeout=3.0):
    """Whether the server answers an ApiVersions on c within timeout (False: closed, or no
    answer)."""
    try:
        return _api_versions(c, timeout)[0] == 0
    except (EOFError, ConnectionResetError, BrokenPipeError, socket.timeout, OSError):
        return False


def _api_versions(c, timeout):
    body = kw.compact_string("strata-it") + kw.compact_string("1.0") + kw.TAGS_NONE
    r = c.request(18, 3, body, flexible=True, flexible_response=False, timeout=timeout)
    return kw.parse_api_versions(r, 3)


class ConnectionQuotaTest(ServerTestCase):
    """max.connections.per.ip (with an override) and the ip entity's connection_creation_rate,
    from several loopback addresses."""
    SMP = 2
    SETS = {"max.connections.per.ip": "4", "max.connections.per.ip.overrides": "127.0.0.5:2"}

    def open_until_refused(self, ip, most=12):
        conns, refused = [], 0
        for _ in range(most):
            c = connect_from(self.server, ip)
            if served(c):
                conns.append(c)
            else:
                c.close()
                refused += 1
                break
        return conns, refused

    def test_max_connections_per_ip(self):
        # 127.0.0.1 is the harness's own address too: at most 4 together, the excess closed
        ones, refused = self.open_until_refused("127.0.0.1")
        self.assertLessEqual(len(ones), 4)
        self.assertEqual(refused, 1)
        try:
            # another loopback address is not affected: its own 4
            twos, refused2 = self.open_until_refused("127.0.0.2")
            self.assertEqual((len(twos), refused2), (4, 1))
            # the override: 2
            fives, refused5 = self.open_until_refused("127.0.0.5")
            self.assertEqual((len(fives), refused5), (2, 1))
            # a closed connection frees its place (the close is seen asynchronously)
            twos.pop().close()
            c = None
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                c = connect_from(self.server, "127.0.0.2")
                if served(c):
                    break
                c.close()
                c = None
                time.sleep(0.05)
            self.assertIsNotNone(c, "a place freed by a close was not given back")
            twos.append(c)
        finally:
            for c in ones + twos + fives:
                c.close()

    def test_connection_creation_rate(self):
        with kw.Conn.to(self.server.bootstrap) as c:
            self.assertEqual(alter(c, [({"ip": "127.0.0.3"},
                                        [("connection_creation_rate", 1, False)])]), [(0, None)])
        try:
            # 1 a second over the (at least) 10 s window: about 10 at once, then throttled
            ok = held = 0
            for _ in range(30):
                c = connect_from(self.server, "127.0.0.3")
                start = time.monotonic()
                if served(c, timeout=3.0):
                    ok += 1
                else:
                    held += 1
                    # held unserved, then closed after the throttle (at most one window)
                    self.assertLess(time.monotonic() - start, 2.5)
                c.close()
                if held >= 3:
                    break
            print("connection_creation_rate 1: %d served, then %d throttled" % (ok, held),
                  file=sys.stderr)
            self.assertGreaterEqual(ok, 5)
            self.assertLessEqual(ok, 15)
            self.assertEqual(held, 3)
            # other addresses are not throttled
            for _ in range(5):
                c = connect_from(self.server, "127.0.0.4")
                self.assertTrue(served(c))
                c.close()
        finally:
            with kw.Conn.to(self.server.bootstrap) as c:
                alter(c, [({"ip": "127.0.0.3"}, [("connection_creation_rate", 0, True)])])


class MaxConnectionsTest(ServerTestCase):
    """max.connections: one more waits (unserved) until one closes, as Kafka's acceptor."""
    SMP = 2
    SETS = {"max.connections": "3"}

    def test_waits_for_a_slot(self):
        conns, waiting = [], None
        try:
            for _ in range(8):
                c = connect_from(self.server, "127.0.0.2")
                if served(c, timeout=1.0):
                    conns.append(c)
                else:
                    waiting = c
                    break
            # at most 3 with the harness's own, and the next one waits, not closed
            self.assertLessEqual(len(conns), 3)
            self.assertIsNotNone(waiting, "more than max.connections served")
            # a close frees a slot: the waiting connection's request is answered (bounded)
            conns.pop().close()
            waiting.sock.settimeout(5.0)
            r = kw.Reader(waiting.recv_frame(5.0))
            self.assertEqual(r.i32(), waiting.corr)
            conns.append(waiting)
            waiting = None
        finally:
            for c in conns + ([waiting] if waiting else []):
                c.close()


if __name__ == "__main__":
    harness.main()
