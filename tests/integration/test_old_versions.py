"""The request versions Kafka 4.0 removed (KIP-896) and Strata accepts again (issue 27), raw on
the wire: one request -> answer check per version added, each answer parsed field by field
with an exact end check, or compared whole with the bytes the protocol reference (Kafka 3.9's
message definitions) gives for it. ApiVersions v0 advertises the full ranges.

Layouts (classic encoding: int16-length strings, int32-count arrays, no tagged fields):
  ListOffsets v0        req  replica_id topics[name partitions[index timestamp max_num_offsets]]
                        resp topics[name partitions[index error old_style_offsets[int64]]]
  OffsetCommit v0       req  group topics[name partitions[index offset metadata]]
               v1       req  group generation member topics[name partitions[index offset
                             commit_timestamp metadata]]
               v2       req  group generation member retention_ms topics[...as v0]
               v0-v2    resp topics[name partitions[index error]]
  OffsetFetch v0        as v1: req group topics[name partitions[int32]], resp topics[name
                             partitions[index offset metadata error]]
  JoinGroup v0          req  group session_timeout member protocol_type protocols[name metadata]
            v1          req  + rebalance_timeout after session_timeout
            v0-v1       resp error generation protocol_name leader member members[id metadata]
  CreateTopics v0       req  topics[name partitions rf assignments[] configs[name value]] timeout
               v1       req  + validate_only; resp v0 topics[name error], v1 + error_message
  DeleteTopics v0       req  names[] timeout; resp responses[name error]
  DescribeConfigs v0    resp throttle results[error message type name configs[name value
                             read_only is_default is_sensitive]]
  OffsetForLeaderEpoch v0  resp topics[topic partitions[error partition end_offset]],
                       v1  + leader_epoch before end_offset
  DescribeAcls/CreateAcls/DeleteAcls v0: the v1 layouts without any pattern type.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_segment  # noqa: E402
import harness  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402
from kwire import array, boolean, i8, i16, i32, i64, string  # noqa: E402

PRODUCE, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH = 0, 2, 8, 9
FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS = 15, 16
CREATE_TOPICS, DELETE_TOPICS, OFFSET_FOR_LEADER_EPOCH = 19, 20, 23
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_CONFIGS = 29, 30, 31, 32

UNKNOWN_TOPIC_OR_PARTITION, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 3, 22, 25
UNSUPPORTED_VERSION, TOPIC_ALREADY_EXISTS = 35, 36

# The highest version Kafka 3.9 accepted of each API Strata serves (the lowest was 0 for
# every one). Strata must accept at least these; Produce and Fetch keep Kafka 4.0's minimum
# here (their older versions are a separate change).
KAFKA_39_MAX = {0: 11, 1: 17, 2: 9, 3: 12, 8: 9, 9: 9, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 15: 5,
                16: 5, 17: 1, 18: 4, 19: 7, 20: 6, 21: 2, 22: 5, 23: 4, 24: 5, 25: 4, 26: 4,
                27: 1, 28: 4, 29: 3, 30: 3, 31: 3, 32: 4, 33: 2, 36: 2, 37: 3, 42: 2, 43: 2,
                44: 1, 45: 0, 46: 0, 47: 0, 48: 1, 49: 1, 50: 0, 51: 0, 60: 1, 61: 0, 65: 0,
                66: 1}

BASE_TS = 1700000000000
RECORDS = 5


def body(conn, key, version, req):
    """The answer's body (after the v0 response header) as bytes."""
    r = conn.request(key, version, req)
    return bytes(r.b[r.p:])


def create_topics_v0(names_configs, partitions=1, timeout=30000):
    def topic(nc):
        name, configs = nc
        return (string(name) + i32(partitions) + i16(1) + array([], None)
                + array(sorted(configs.items()), lambda kv: string(kv[0]) + string(kv[1])))
    return array(names_configs, topic) + i32(timeout)


class OldVersionsTest(ServerTestCase):
    SMP = 2
    SETS = {"group.initial.rebalance.delay.ms": "0",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true"}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.topic = "old-versions-%d" % os.getpid()
        with kwire.Conn.to(cls.bootstrap) as c:
            got = body(c, CREATE_TOPICS, 0, create_topics_v0([(cls.topic, {"retention.ms": "555"})],
                                                            partitions=2))
            assert got == array([cls.topic], lambda n: string(n) + i16(0)), got
            def ready():
                t = kwire.metadata(c, 4, [cls.topic])["topics"][0]
                return t["error"] == 0 and all(p["leader"] >= 0 for p in t["partitions"])
            wait_until(ready, 30, "the topic's leaders")
            recs = cli_segment.batch(0, [(b"k", b"v%d" % i) for i in range(RECORDS)], BASE_TS)
            r = c.request(PRODUCE, 3, kwire.produce_v3(cls.topic, 0, recs))   # acks=all
            r.i32()
            r.string()
            r.i32()
            assert r.i32() == 0 and r.i16() == 0, "produce failed"

    def conn(self):
        return kwire.Conn.to(self.bootstrap)

    # ---- ApiVersions v0 ----

    def test_api_versions_v0_full_ranges(self):
        with self.conn() as c:
            err, keys = kwire.api_versions(c, 0)   # the v0 layout, parsed to its exact end
        self.assertEqual(err, 0)
        for key, hi in KAFKA_39_MAX.items():
            self.assertIn(key, keys)
            lo, top = keys[key]
            if key not in (0, 1):
                self.assertEqual(lo, 0, "api %d starts at v%d" % (key, lo))
            self.assertGreaterEqual(top, hi, "api %d" % key)
        for key, want in {2: (0, 11), 8: (0, 10), 9: (0, 10), 11: (0, 9), 19: (0, 7),
                          20: (0, 6), 23: (0, 4), 29: (0, 3), 30: (0, 3), 31: (0, 3),
                          32: (0, 4)}.items():
            self.assertEqual(keys[key], want, "api %d" % key)

    # ---- ListOffsets v0 ----

    def list_offsets_v0(self, c, partition, ts, max_num=1):
        req = i32(-1) + array([self.topic], lambda t: string(t) + array(
            [partition], lambda p: i32(p) + i64(ts) + i32(max_num)))
        return body(c, LIST_OFFSETS, 0, req)

    def offsets_answer(self, partition, error, offsets):
        return array([self.topic], lambda t: string(t) + array(
            [partition], lambda p: i32(p) + i16(error) + array(offsets, i64)))

    def test_list_offsets_v0(self):
        with self.conn() as c:
            for ts, want in ((-1, [RECORDS]), (-2, [0]), (BASE_TS + 2, [2]), (BASE_TS, [0]),
                             (BASE_TS + 10**9, [RECORDS])):
                self.assertEqual(self.list_offsets_v0(c, 0, ts), self.offsets_answer(0, 0, want),
                                 "timestamp %d" % ts)
            self.assertEqual(self.list_offsets_v0(c, 1, -1), self.offsets_answer(1, 0, [0]))
            self.assertEqual(self.list_offsets_v0(c, 0, -1, max_num=0),
                             self.offsets_answer(0, 0, []))
            # v0 knows only -1 and -2 among the special times (Kafka 3.9)
            self.assertEqual(self.list_offsets_v0(c, 0, -3),
                             self.offsets_answer(0, UNSUPPORTED_VERSION, []))
            self.assertEqual(self.list_offsets_v0(c, 9, -1),
                             self.offsets_answer(9, UNKNOWN_TOPIC_OR_PARTITION, []))

    # ---- OffsetCommit v0-v2, OffsetFetch v0 ----

    def commit_answer(self, partition, error):
        return array([self.topic], lambda t: string(t) + array(
            [partition], lambda p: i32(p) + i16(error)))

    def fetch_v0(self, c, group, partition, version=0):
        return kwire.offset_fetch_classic(c, version, group, self.topic, [partition])[partition]

    def test_offset_commit_v0_v1_v2_and_fetch_v0(self):
        group = self.unique("oc")
        with self.conn() as c:
            req = string(group) + array([self.topic], lambda t: string(t) + array(
                [0], lambda p: i32(p) + i64(3) + string("m0")))
            self.assertEqual(body(c, OFFSET_COMMIT, 0, req), self.commit_answer(0, 0))
            self.assertEqual(self.fetch_v0(c, group, 0), (3, "m0", 0))
            self.assertEqual(self.fetch_v0(c, group, 0, version=1), (3, "m0", 0))
            self.assertEqual(self.fetch_v0(c, group, 1), (-1, "", 0))   # none committed

            # v1: generation -1 and no member id commit from outside the group; a commit time
            req = string(group) + i32(-1) + string("") + array(
                [self.topic], lambda t: string(t) + array(
                    [0], lambda p: i32(p) + i64(4) + i64(BASE_TS) + string("m1")))
            self.assertEqual(body(c, OFFSET_COMMIT, 1, req), self.commit_answer(0, 0))
            self.assertEqual(self.fetch_v0(c, group, 0), (4, "m1", 0))
            # a generation from a member the group does not have
            req = string(group) + i32(5) + string("ghost") + array(
                [self.topic], lambda t: string(t) + array(
                    [0], lambda p: i32(p) + i64(9) + i64(-1) + string("")))
            self.assertEqual(body(c, OFFSET_COMMIT, 1, req),
                             self.commit_answer(0, UNKNOWN_MEMBER_ID))

            # v2: retention_time_ms, no commit timestamp
            req = string(group) + i32(-1) + string("") + i64(3600000) + array(
                [self.topic], lambda t: string(t) + array(
                    [1], lambda p: i32(p) + i64(2) + string(None)))
            self.assertEqual(body(c, OFFSET_COMMIT, 2, req), self.commit_answer(1, 0))
            self.assertEqual(self.fetch_v0(c, group, 1), (2, "", 0))
            self.assertEqual(self.fetch_v0(c, group, 0), (4, "m1", 0))

    # ---- JoinGroup v0-v1 with SyncGroup, Heartbeat, LeaveGroup, FindCoordinator v0 ----

    def join(self, c, version, group, member="", rebalance=30000):
        req = string(group) + i32(10000)
        if version >= 1:
            req += i32(rebalance)
        req += string(member) + string("consumer") + array(
            [("range", b"\x00\x01meta")], lambda p: string(p[0]) + i32(len(p[1])) + p[1])
        r = c.request(JOIN_GROUP, version, req, timeout=30)
        out = {"error": r.i16(), "generation": r.i32(), "protocol": r.string(),
               "leader": r.string(), "member": r.string()}
        out["members"] = r.array(lambda rr: (rr.string(), bytes(rr.take(rr.i32()))))
        r.end()
        return out

    def test_join_group_v0_v1(self):
        for version in (0, 1):
            with self.subTest(version=version), self.conn() as c:
                group = self.unique("jg%d" % version)
                r = c.request(FIND_COORDINATOR, 0, string(group))
                self.assertEqual(r.i16(), 0)
                self.assertGreaterEqual(r.i32(), 0)
                r.string()
                r.i32()
                r.end()
                # no MEMBER_ID_REQUIRED before v4: the first join gets its id and the group
                j = self.join(c, version, group)
                self.assertEqual(j["error"], 0)
                self.assertEqual(j["generation"], 1)
                self.assertEqual(j["protocol"], "range")
                self.assertTrue(j["member"])
                self.assertEqual(j["leader"], j["member"])
                self.assertEqual(j["members"], [(j["member"], b"\x00\x01meta")])
                m, gen = j["member"], j["generation"]
                sync = string(group) + i32(gen) + string(m) + array(
                    [(m, b"assign")], lambda a: string(a[0]) + i32(len(a[1])) + a[1])
                self.assertEqual(body(c, SYNC_GROUP, 0, sync), i16(0) + i32(6) + b"assign")
                # DescribeGroups v0 and ListGroups v0 (served before; here for the v0 group)
                r = c.request(DESCRIBE_GROUPS, 0, array([group], string))

                def described(rr):
                    g = (rr.i16(), rr.string(), rr.string(), rr.string(), rr.string())
                    ms = rr.array(lambda q: (q.string(), q.string(), q.string(),
                                             bytes(q.take(q.i32())), bytes(q.take(q.i32()))))
                    return g, ms
                d = r.array(described)
                r.end()
                self.assertEqual(d[0][0], (0, group, "Stable", "consumer", "range"))
                self.assertEqual([(x[0], x[1], x[3], x[4]) for x in d[0][1]],
                                 [(m, "kwire", b"\x00\x01meta", b"assign")])
                r = c.request(LIST_GROUPS, 0, b"")
                self.assertEqual(r.i16(), 0)
                listed = r.array(lambda rr: (rr.string(), rr.string()))
                r.end()
                self.assertIn((group, "consumer"), listed)
                hb = string(group) + i32(gen) + string(m)
                self.assertEqual(body(c, HEARTBEAT, 0, hb), i16(0))
                self.assertEqual(body(c, HEARTBEAT, 0, string(group) + i32(gen + 1) + string(m)),
                                 i16(ILLEGAL_GENERATION))
                commit = string(group) + i32(gen) + string(m) + array(
                    [self.topic], lambda t: string(t) + array(
                        [0], lambda p: i32(p) + i64(1) + i64(-1) + string("")))
                self.assertEqual(body(c, OFFSET_COMMIT, 1, commit), self.commit_answer(0, 0))
                # the leader joining again starts a new generation (as in Kafka)
                again = self.join(c, version, group, member=m)
                self.assertEqual((again["error"], again["generation"]), (0, gen + 1))
                self.assertEqual(body(c, LEAVE_GROUP, 0, string(group) + string(m)), i16(0))
                self.assertEqual(body(c, HEARTBEAT, 0, hb), i16(UNKNOWN_MEMBER_ID))
                self.assertEqual(self.fetch_v0(c, group, 0), (1, "", 0))

    # ---- CreateTopics v0-v1, DeleteTopics v0 ----

    def test_create_topics_v0_v1_delete_topics_v0(self):
        t = self.unique("ct")
        with self.conn() as c:
            # v1 validate_only: checked, not created; v1's answer adds error_message
            req = create_topics_v0([(t, {})]) + boolean(True)
            self.assertEqual(body(c, CREATE_TOPICS, 1, req),
                             array([t], lambda n: string(n) + i16(0) + string(None)))
            self.assertEqual(kwire.metadata(c, 4, [t])["topics"][0]["error"],
                             UNKNOWN_TOPIC_OR_PARTITION)
            self.assertEqual(body(c, CREATE_TOPICS, 0, create_topics_v0([(t, {})])),
                             array([t], lambda n: string(n) + i16(0)))
            self.assertEqual(body(c, CREATE_TOPICS, 0, create_topics_v0([(t, {})])),
                             array([t], lambda n: string(n) + i16(TOPIC_ALREADY_EXISTS)))
            wait_until(lambda: kwire.metadata(c, 4, [t])["topics"][0]["error"] == 0, 30,
                       "the new topic in the metadata")
            req = array([t], string) + i32(30000)
            self.assertEqual(body(c, DELETE_TOPICS, 0, req),
                             array([t], lambda n: string(n) + i16(0)))
            self.assertEqual(body(c, DELETE_TOPICS, 0, req),
                             array([t], lambda n: string(n) + i16(UNKNOWN_TOPIC_OR_PARTITION)))

    # ---- DescribeConfigs v0 ----

    def test_describe_configs_v0(self):
        with self.conn() as c:
            req = array([self.topic], lambda n: i8(2) + string(n) + i32(-1))
            r = c.request(DESCRIBE_CONFIGS, 0, req)
            self.assertEqual(r.i32(), 0)   # throttle_time_ms

            def config(rr):
                return (rr.string(), (rr.string(), rr.boolean(), rr.boolean(), rr.boolean()))

            def result(rr):
                head = (rr.i16(), rr.string(), rr.i8(), rr.string())
                return head, dict(rr.array(config))

            res = r.array(result)
            r.end()
        self.assertEqual(len(res), 1)
        head, configs = res[0]
        self.assertEqual(head, (0, "", 2, self.topic))   # Kafka too: "" when no error
        # (value, read_only, is_default, is_sensitive)
        self.assertEqual(configs["retention.ms"], ("555", False, False, False))
        self.assertEqual(configs["cleanup.policy"], ("delete", False, True, False))
        self.assertEqual([k for k, v in configs.items() if not v[2]], ["retention.ms"])

    # ---- OffsetForLeaderEpoch v0-v1 ----

    def test_offset_for_leader_epoch_v0_v1(self):
        with self.conn() as c:
            epoch = kwire.metadata(c, 9, [self.topic])["topics"][0]["partitions"]
            epoch = {p["index"]: p["leader_epoch"] for p in epoch}[0]
            req = array([self.topic], lambda t: string(t) + array(
                [0], lambda p: i32(p) + i32(epoch)))
            self.assertEqual(body(c, OFFSET_FOR_LEADER_EPOCH, 0, req),
                             array([self.topic], lambda t: string(t) + array(
                                 [0], lambda p: i16(0) + i32(p) + i64(RECORDS))))
            self.assertEqual(body(c, OFFSET_FOR_LEADER_EPOCH, 1, req),
                             array([self.topic], lambda t: string(t) + array(
                                 [0], lambda p: i16(0) + i32(p) + i32(epoch) + i64(RECORDS))))

    # ---- DescribeAcls, CreateAcls, DeleteAcls v0 ----

    def test_acls_v0(self):
        name = self.unique("acl")
        binding = i8(2) + string(name) + string("User:alice") + string("*") + i8(3) + i8(3)
        filt = i8(2) + string(name) + string(None) + string(None) + i8(1) + i8(1)
        with self.conn() as c:
            self.assertEqual(body(c, CREATE_ACLS, 0, array([binding], lambda b: b)),
                             i32(0) + array([0], lambda e: i16(e) + string(None)))
            want = i32(0) + i16(0) + string(None) + array(
                [name], lambda n: i8(2) + string(n) + array(
                    [0], lambda _: string("User:alice") + string("*") + i8(3) + i8(3)))
            wait_until(lambda: body(c, DESCRIBE_ACLS, 0, filt) == want, 30,
                       "DescribeAcls v0 to show the ACL")
            self.assertEqual(body(c, DELETE_ACLS, 0, array([filt], lambda f: f)),
                             i32(0) + array([0], lambda _: i16(0) + string(None) + array(
                                 [0], lambda _: i16(0) + string(None) + binding)))
            wait_until(lambda: body(c, DESCRIBE_ACLS, 0, filt) ==
                       i32(0) + i16(0) + string(None) + array([], None), 30,
                       "DescribeAcls v0 to show none")


if __name__ == "__main__":
    harness.main()
