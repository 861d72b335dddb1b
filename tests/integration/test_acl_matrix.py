"""The ACL matrix (issue 22): every API the broker advertises in ApiVersions, sent by a
principal that holds exactly the ACLs the API needs and by one that does not, checking the
error Kafka answers in the field Kafka puts it in.

One broker with StandardAuthorizer, allow.everyone.if.no.acl.found off, a PLAINTEXT listener
whose User:ANONYMOUS is the super user that sets things up (topics, a group with a committed
offset, a transactional id, the ACLs of each row), and a SASL_PLAINTEXT listener where alice
and bob log in with PLAIN over the raw wire (kwire). The API keys come from the broker's own
ApiVersions at the start: a key without a row fails the test, so a new API cannot ship
without its check being decided here.

A row is (what the allowed principal is granted, the request, the error the denied principal
must get). Both directions are asserted: the allowed principal gets no authorization error
(and, where `effect` says so, error 0: the operation took effect), the denied one gets the
code in every field the row reads. Rows with `deny_grant` give the denied principal part of
what is needed, to check a second check (a group after its transactional id, a topic after
its group). A row marked `no_check` is one Kafka does not authorize either (the Kafka check is
cited beside each row, from core/src/main/scala/kafka/server/KafkaApis.scala). Each row's
grants are removed after it, so no row leans on another's ACLs."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire as w  # noqa: E402
from harness import Server, free_port, wait_until  # noqa: E402

PID = os.getpid()
TOPIC = "mx-%d" % PID          # one partition, one record, produced by the super user
GROUP = "mx-g-%d" % PID        # a group with a committed offset on TOPIC
TXN = "mx-tx-%d" % PID         # a transactional id with a producer id (state Empty)
USERS = {"alice": "alice-pw", "bob": "bob-pw"}
BOOT = ",".join("%s:SCRAM-SHA-512:%s" % u for u in USERS.items())

# Kafka's resource types, pattern types, operations, permissions (auth/acl.h)
TOPIC_R, GROUP_R, CLUSTER_R, TXN_R = 2, 3, 4, 5
LITERAL = 3
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
ALLOW = 3
CLUSTER = "kafka-cluster"

# Kafka's error codes
TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 29, 30, 31, 53
AUTH_ERRORS = {TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH, 65}
RETRIABLE = {5, 6, 14, 15, 16, 51}


def topic_acl(op, name=TOPIC):
    return (TOPIC_R, name, op)


def group_acl(op, name=GROUP):
    return (GROUP_R, name, op)


def cluster_acl(op):
    return (CLUSTER_R, CLUSTER, op)


def txn_acl(op, name=TXN):
    return (TXN_R, name, op)


class MatrixServer(Server):
    """PLAINTEXT (User:ANONYMOUS, the super user) on the usual port, SASL_PLAINTEXT on a
    second one."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.sasl_port = free_port()

    def command(self):
        self.sets["listeners"] = "PLAINTEXT://%s:%d,SASL_PLAINTEXT://%s:%d" % (
            self.host, self.port, self.host, self.sasl_port)
        self.sets["advertised.listeners"] = self.sets["listeners"]
        return super().command()


# ---- small codec pieces --------------------------------------------------------------------

s, cs, a, ca, T = w.string, w.compact_string, w.array, w.compact_array, w.TAGS_NONE


def one_batch():
    from cli_segment import batch
    return batch(0, [(None, b"matrix")])


def parts_v0(r, part):
    """[name, [part]] of a classic response: the list of what part returns."""
    out = []

    def topic(x):
        x.string()
        out.extend(x.array(part))
    r.array(topic)
    return out


def parts_flex(r, part):
    out = []

    def topic(x):
        x.compact_string()
        out.extend(x.compact_array(part))
        x.tags()
    r.compact_array(topic)
    return out


# ---- the requests: each returns the error codes the row reads --------------------------------

def produce(c):
    r = c.request(0, 3, w.produce_v3(TOPIC, 0, one_batch()))

    def part(x):
        x.i32()
        e = x.i16()
        x.i64(), x.i64()
        return e
    return parts_v0(r, part)


def txn_batch():
    """One record in a transactional batch (attributes bit 0x10) of producer 1, epoch 0."""
    import struct
    from cli_segment import _record, crc32c
    recs = _record(0, 0, None, b"matrix")
    ts = 1700000000000
    after_crc = struct.pack(">hiqqqhii", 0x10, 0, ts, ts, 1, 0, 0, 1) + recs
    after_len = struct.pack(">ibI", 0, 2, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def produce_txn(c):
    body = (s(TXN) + w.i16(-1) + w.i32(10000) + w.i32(1) + s(TOPIC) + w.i32(1) + w.i32(0) +
            w.i32(len(txn_batch())) + txn_batch())
    r = c.request(0, 3, body)

    def part(x):
        x.i32()
        e = x.i16()
        x.i64(), x.i64()
        return e
    return parts_v0(r, part)


def fetch(c):
    r = c.request(1, 4, w.fetch_v4(TOPIC, 0, 0, 1, 0))
    return [w.parse_fetch_v4(r)[0]]


def list_offsets(c):
    body = w.i32(-1) + a([s(TOPIC) + a([w.i32(0) + w.i64(-1)], bytes)], bytes)
    r = c.request(2, 1, body)

    def part(x):
        x.i32()
        e = x.i16()
        x.i64(), x.i64()
        return e
    return parts_v0(r, part)


def metadata_named(c):
    return [t["error"] for t in w.metadata(c, 1, [TOPIC])["topics"]]


def metadata_all(c):
    return [t["name"] for t in w.metadata(c, 1, None)["topics"]]


def metadata_ops(c):
    """Metadata v8 asking for the authorized operations: (topic error, topic's, cluster's)."""
    body = a([TOPIC], s) + w.boolean(False) + w.boolean(True) + w.boolean(True)
    r = c.request(3, 8, body)
    r.i32()
    r.array(lambda x: (x.i32(), x.string(), x.i32(), x.string()))
    r.string(), r.i32()

    def topic(x):
        e = x.i16()
        x.string(), x.boolean()
        x.array(lambda y: (y.i16(), y.i32(), y.i32(), y.i32(), y.array(lambda z: z.i32()),
                           y.array(lambda z: z.i32()), y.array(lambda z: z.i32())))
        return e, x.i32()
    (e, ops), = r.array(topic)
    return e, ops, r.i32()


def offset_commit(c):
    body = (s(GROUP) + w.i32(-1) + s("") + w.i64(-1) +
            a([s(TOPIC) + a([w.i32(0) + w.i64(1) + s(None)], bytes)], bytes))
    r = c.request(8, 2, body)

    def part(x):
        x.i32()
        return x.i16()
    return parts_v0(r, part)


def offset_fetch_v3(c):
    """The older form: (top-level error, [(partition error, offset)])."""
    r = c.request(9, 3, s(GROUP) + a([s(TOPIC) + a([0], w.i32)], bytes))
    r.i32()

    def part(x):
        x.i32()
        off = x.i64()
        x.string()
        return (x.i16(), off)
    ps = parts_v0(r, part)
    return r.i16(), ps


def offset_fetch_v8(c, topics=True):
    """The groups form (v8): (group error, [(topic, partition error, offset)])."""
    ts = ca([TOPIC], lambda t: cs(t) + ca([0], w.i32) + T) if topics else w.uvarint(0)
    r = c.request(9, 8, ca([GROUP], lambda g: cs(g) + ts + T) + w.boolean(False) + T,
                  flexible=True)
    r.i32()
    out = []

    def topic(x):
        name = x.compact_string()

        def part(y):
            y.i32()
            off = y.i64()
            y.i32()
            y.compact_string()
            e = y.i16()
            y.tags()
            out.append((name, e, off))
        x.compact_array(part)
        x.tags()

    def group(x):
        x.compact_string()
        x.compact_array(topic)
        e = x.i16()
        x.tags()
        return e
    errs = r.compact_array(group)
    return errs[0], out


def find_coordinator(key_type):
    def run(c):
        r = c.request(10, 1, s(GROUP if key_type == 0 else TXN) + w.i8(key_type))
        r.i32()
        return [r.i16()]
    return run


def join_group(c):
    meta = w.i16(0) + a([TOPIC], s) + w.i32(-1)
    body = (s(GROUP) + w.i32(6000) + w.i32(6000) + s("") + s("consumer") +
            a([s("range") + w.i32(len(meta)) + meta], bytes))
    r = c.request(11, 2, body, timeout=20)
    r.i32()
    return [r.i16()]


def heartbeat(c):
    r = c.request(12, 0, s(GROUP) + w.i32(1) + s("nobody"))
    return [r.i16()]


def leave_group(c):
    r = c.request(13, 0, s(GROUP) + s("nobody"))
    return [r.i16()]


def sync_group(c):
    r = c.request(14, 0, s(GROUP) + w.i32(1) + s("nobody") + w.i32(0))
    return [r.i16()]


def consumer_group_heartbeat(c):
    """ConsumerGroupHeartbeat v0 (KIP-848) of an unknown member of GROUP (a classic group)."""
    body = (w.compact_string(GROUP) + w.compact_string("nobody") + w.i32(1)
            + w.compact_string(None) + w.compact_string(None) + w.i32(-1) + w.uvarint(0)
            + w.compact_string(None) + w.uvarint(0) + w.TAGS_NONE)
    r = c.request(68, 0, body, flexible=True)
    r.i32()
    return [r.i16()]


def consumer_group_describe(c):
    """ConsumerGroupDescribe v0 of GROUP: each group's error."""
    r = c.request(69, 0, w.compact_array([GROUP], w.compact_string) + w.boolean(False)
                  + w.TAGS_NONE, flexible=True)
    r.i32()
    n = r.uvarint() - 1
    return [r.i16() for _ in range(min(n, 1))]


def describe_groups(c):
    r = c.request(15, 0, a([GROUP], s))

    def group(x):
        e = x.i16()
        x.string(), x.string(), x.string(), x.string()
        x.array(lambda y: (y.string(), y.string(), y.string(), y.take(y.i32()),
                           y.take(y.i32())))
        return e
    return r.array(group)


def describe_groups_ops(c):
    """DescribeGroups v3 asking for the authorized operations: [(error, operations)]."""
    r = c.request(15, 3, a([GROUP], s) + w.boolean(True))
    r.i32()

    def group(x):
        e = x.i16()
        x.string(), x.string(), x.string(), x.string()
        x.array(lambda y: (y.string(), y.string(), y.string(), y.take(y.i32()),
                           y.take(y.i32())))
        return e, x.i32()
    return r.array(group)


def list_groups(c):
    r = c.request(16, 0, b"")
    r.i16()
    return [g for g, _ in r.array(lambda x: (x.string(), x.string()))]


def sasl_handshake(c):
    r = c.request(17, 1, s("PLAIN"))
    return [r.i16()]


def api_versions(c):
    return [w.api_versions(c)[0]]


def create_topics(name):
    def run(c):
        t = s(name) + w.i32(1) + w.i16(1) + w.i32(0) + w.i32(0)
        r = c.request(19, 2, a([t], bytes) + w.i32(15000) + w.boolean(False), timeout=20)
        r.i32()
        return [e for _, e, _ in r.array(lambda x: (x.string(), x.i16(), x.string()))]
    return run


def delete_topics(name):
    def run(c):
        r = c.request(20, 1, a([name], s) + w.i32(15000), timeout=20)
        r.i32()
        return [e for _, e in r.array(lambda x: (x.string(), x.i16()))]
    return run


def delete_records(c):
    body = a([s(TOPIC) + a([w.i32(0) + w.i64(0)], bytes)], bytes) + w.i32(15000)
    r = c.request(21, 0, body)
    r.i32()

    def part(x):
        x.i32()
        x.i64()
        return x.i16()
    return parts_v0(r, part)


def init_producer_id(tid):
    def run(c):
        r = c.request(22, 0, s(tid) + w.i32(60000), timeout=20)
        r.i32()
        return [r.i16()]
    return run


def offset_for_leader_epoch(c):
    body = a([s(TOPIC) + a([w.i32(0) + w.i32(-1) + w.i32(0)], bytes)], bytes)
    r = c.request(23, 2, body)
    r.i32()

    def part(x):
        e = x.i16()
        x.i32(), x.i32(), x.i64()
        return e
    return parts_v0(r, part)


def add_partitions_to_txn_v3(c):
    topics = ca([TOPIC], lambda t: cs(t) + ca([0], w.i32) + T)
    r = c.request(24, 3, cs(TXN) + w.i64(1) + w.i16(0) + topics + T, flexible=True)
    r.i32()

    def part(x):
        x.i32()
        e = x.i16()
        x.tags()
        return e
    return parts_flex(r, part)


def add_partitions_to_txn_v4(c):
    topics = ca([TOPIC], lambda t: cs(t) + ca([0], w.i32) + T)
    txn = cs(TXN) + w.i64(1) + w.i16(0) + w.boolean(True) + topics + T
    r = c.request(24, 4, ca([txn], bytes) + T, flexible=True)
    r.i32()
    return [r.i16()]


def add_offsets_to_txn(c):
    r = c.request(25, 0, s(TXN) + w.i64(1) + w.i16(0) + s(GROUP))
    r.i32()
    return [r.i16()]


def end_txn(c):
    r = c.request(26, 0, s(TXN) + w.i64(1) + w.i16(0) + w.boolean(False))
    r.i32()
    return [r.i16()]


def write_txn_markers(c):
    topics = ca([TOPIC], lambda t: cs(t) + ca([0], w.i32) + T)
    marker = w.i64(999999) + w.i16(0) + w.boolean(False) + topics + w.i32(0) + T
    r = c.request(27, 1, ca([marker], bytes) + T, flexible=True)

    def part(x):
        x.i32()
        e = x.i16()
        x.tags()
        return e

    out = []

    def m(x):
        x.i64()
        out.extend(parts_flex(x, part))
        x.tags()
    r.compact_array(m)
    return out


def txn_offset_commit(c):
    part = w.i32(0) + w.i64(5) + s(None)
    r = c.request(28, 0, s(TXN) + s(GROUP) + w.i64(1) + w.i16(0) +
                  a([s(TOPIC) + a([part], bytes)], bytes))
    r.i32()

    def p(x):
        x.i32()
        return x.i16()
    return parts_v0(r, p)


def acl_body(res, name, principal, op):
    return (w.i8(res) + s(name) + w.i8(LITERAL) + s(principal) + s("*") + w.i8(op) +
            w.i8(ALLOW))


def describe_acls(c):
    r = c.request(29, 1, w.i8(1) + s(None) + w.i8(1) + s(None) + s(None) + w.i8(1) + w.i8(1))
    r.i32()
    return [r.i16()]


def create_acls(c):
    body = a([acl_body(TOPIC_R, "mx-made-%d" % PID, "User:carol", READ)], bytes)
    r = c.request(30, 1, body)
    r.i32()
    return [e for e, _ in r.array(lambda x: (x.i16(), x.string()))]


def delete_acls(c):
    f = (w.i8(TOPIC_R) + s("mx-made-%d" % PID) + w.i8(LITERAL) + s("User:carol") + s(None) +
         w.i8(1) + w.i8(1))
    r = c.request(31, 1, a([f], bytes))
    r.i32()

    def res(x):
        e = x.i16()
        x.string()
        x.array(lambda y: (y.i16(), y.string(), y.i8(), y.string(), y.i8(), y.string(),
                           y.string(), y.i8(), y.i8()))
        return e
    return r.array(res)


def describe_configs(rtype, name):
    def run(c):
        r = c.request(32, 1, a([w.i8(rtype) + s(name) + w.i32(-1)], bytes) + w.boolean(False))
        r.i32()

        def res(x):
            e = x.i16()
            x.string(), x.i8(), x.string()
            x.array(lambda y: (y.string(), y.string(), y.boolean(), y.i8(), y.boolean(),
                               y.array(lambda z: (z.string(), z.string(), z.i8()))))
            return e
        return r.array(res)
    return run


def alter_configs(rtype, name, key, value):
    def run(c):
        res = w.i8(rtype) + s(name) + a([s(key) + s(value)], bytes)
        r = c.request(33, 0, a([res], bytes) + w.boolean(False))
        r.i32()
        return [e for e, _, _, _ in
                r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string()))]
    return run


def incremental_alter_configs(rtype, name, key, value):
    def run(c):
        res = w.i8(rtype) + s(name) + a([s(key) + w.i8(0) + s(value)], bytes)
        r = c.request(44, 0, a([res], bytes) + w.boolean(False))
        r.i32()
        return [e for e, _, _, _ in
                r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string()))]
    return run


def sasl_authenticate(c):
    tok = b"\0alice\0alice-pw"
    r = c.request(36, 0, w.i32(len(tok)) + tok)
    return [r.i16()]


def create_partitions(c):
    body = a([s(TOPIC) + w.i32(2) + w.i32(-1)], bytes) + w.i32(15000) + w.boolean(True)
    r = c.request(37, 0, body)
    r.i32()
    return [e for _, e, _ in r.array(lambda x: (x.string(), x.i16(), x.string()))]


def delete_groups(name):
    def run(c):
        r = c.request(42, 0, a([name], s))
        r.i32()
        return [e for _, e in r.array(lambda x: (x.string(), x.i16()))]
    return run


def elect_leaders(c):
    return [w.elect_leaders(c, 1, 0, {TOPIC: [0]}, 5000)[0]]


def alter_reassignments(c):
    return [w.alter_partition_reassignments(c, 0, {TOPIC: {0: None}}, timeout_ms=5000)["error"]]


def list_reassignments(c):
    return [w.list_partition_reassignments(c, None, 5000)[0]]


def offset_delete(c):
    r = c.request(47, 0, s("mx-od-%d" % PID) + a([s(TOPIC) + a([0], w.i32)], bytes))
    top = r.i16()
    r.i32()

    def part(x):
        x.i32()
        return x.i16()
    return top, parts_v0(r, part)


def describe_client_quotas(c):
    r = c.request(48, 0, a([s("user") + w.i8(0) + s("carol")], bytes) + w.boolean(False))
    r.i32()
    return [r.i16()]


def alter_client_quotas(c):
    import struct
    entry = (a([s("user") + s("carol")], bytes) +
             a([s("producer_byte_rate") + struct.pack(">d", 1048576.0) + w.boolean(False)],
               bytes))
    r = c.request(49, 0, a([entry], bytes) + w.boolean(True))
    r.i32()
    return r.array(lambda x: (x.i16(), x.string(),
                              x.array(lambda y: (y.string(), y.string())))[0])


def describe_scram(c):
    r = c.request(50, 0, w.uvarint(0) + T, flexible=True)
    r.i32()
    return [r.i16()]


def alter_scram(c):
    deletion = cs("nobody-%d" % PID) + w.i8(2) + T
    r = c.request(51, 0, ca([deletion], bytes) + w.uvarint(1) + T, flexible=True)
    r.i32()

    def res(x):
        x.compact_string()
        e = x.i16()
        x.compact_string()
        x.tags()
        return e
    return r.compact_array(res)


def describe_cluster(c):
    """DescribeCluster v0 asking for the cluster's authorized operations: (error, ops)."""
    r = c.request(60, 0, w.boolean(True) + T, flexible=True)
    r.i32()
    e = r.i16()
    r.compact_string(), r.compact_string(), r.i32()
    r.compact_array(lambda x: (x.i32(), x.compact_string(), x.i32(), x.compact_string(),
                               x.tags()))
    return e, r.i32()


def describe_producers(c):
    topics = ca([TOPIC], lambda t: cs(t) + ca([0], w.i32) + T)
    r = c.request(61, 0, topics + T, flexible=True)
    r.i32()

    def part(x):
        x.i32()
        e = x.i16()
        x.compact_string()
        x.compact_array(lambda y: (y.i64(), y.i32(), y.i32(), y.i64(), y.i32(), y.i64(),
                                   y.tags()))
        x.tags()
        return e
    return parts_flex(r, part)


def describe_transactions(c):
    r = c.request(65, 0, ca([TXN], cs) + T, flexible=True)
    r.i32()

    def state(x):
        e = x.i16()
        x.compact_string(), x.compact_string(), x.i32(), x.i64(), x.i64(), x.i16()
        x.compact_array(lambda y: (y.compact_string(), y.compact_array(lambda z: z.i32()),
                                   y.tags()))
        x.tags()
        return e
    return r.compact_array(state)


def list_transactions(c):
    r = c.request(66, 0, w.uvarint(1) + w.uvarint(1) + T, flexible=True)
    r.i32()
    r.i16()
    r.compact_array(lambda x: x.compact_string())

    def state(x):
        tid = x.compact_string()
        x.i64(), x.compact_string()
        x.tags()
        return tid
    return r.compact_array(state)


# ---- the matrix ----------------------------------------------------------------------------

class Row:
    def __init__(self, run, grant, denied, effect=False, deny_grant=(), no_check=False,
                 allowed_ok=None, denied_ok=None, why="", fresh=False):
        self.run, self.grant, self.denied, self.effect = run, list(grant), denied, effect
        self.fresh = fresh  # on a connection of its own (the SASL APIs may close it)
        self.deny_grant, self.no_check, self.why = list(deny_grant), no_check, why
        self.allowed_ok, self.denied_ok = allowed_ok, denied_ok


def has(x):
    return lambda got: x in got


def lacks(x):
    return lambda got: x not in got


def matrix():
    new_topic, del_topic = "mx-new-%d" % PID, "mx-del-%d" % PID
    topic_read_desc = [group_acl(DESCRIBE), topic_acl(DESCRIBE)]
    return {
        # handleProduceRequest: WRITE on each topic (and on the transactional id)
        0: [Row(produce, [topic_acl(WRITE)], TOPIC_AUTH, effect=True),
            Row(produce_txn, [txn_acl(WRITE), topic_acl(WRITE)], TXN_AUTH,
                why="transactional"),
            Row(produce_txn, [txn_acl(WRITE), topic_acl(WRITE)], TOPIC_AUTH,
                deny_grant=[txn_acl(WRITE)], why="topic after id")],
        # handleFetchRequest: READ on each topic (followers: CLUSTER_ACTION)
        1: [Row(fetch, [topic_acl(READ)], TOPIC_AUTH, effect=True)],
        # handleListOffsetRequest: DESCRIBE on each topic
        2: [Row(list_offsets, [topic_acl(DESCRIBE)], TOPIC_AUTH, effect=True)],
        # handleTopicMetadataRequest: DESCRIBE on each topic; a full listing leaves it out
        3: [Row(metadata_named, [topic_acl(DESCRIBE)], TOPIC_AUTH, effect=True),
            Row(metadata_all, [topic_acl(DESCRIBE)], None, allowed_ok=has(TOPIC),
                denied_ok=lacks(TOPIC), why="listing"),
            # the authorized operations (v8): only what the grant gives; the cluster's 0
            # without DESCRIBE on it
            Row(metadata_ops, [topic_acl(DESCRIBE)], None,
                allowed_ok=lambda got: got == (0, 1 << DESCRIBE, 0),
                denied_ok=lambda got: got == (TOPIC_AUTH, -2 ** 31, 0), why="operations"),
            Row(metadata_ops, [topic_acl(WRITE), topic_acl(ALTER_CONFIGS),
                               cluster_acl(DESCRIBE)], None,
                allowed_ok=lambda got: got == (0, (1 << WRITE) | (1 << DESCRIBE) |
                                               (1 << ALTER_CONFIGS) | (1 << DESCRIBE_CONFIGS),
                                               1 << DESCRIBE),
                denied_ok=lambda got: got == (TOPIC_AUTH, -2 ** 31, 0),
                why="implied operations")],
        # handleOffsetCommitRequest: READ on the group, then READ on each topic
        8: [Row(offset_commit, [group_acl(READ), topic_acl(READ)], GROUP_AUTH, effect=True),
            Row(offset_commit, [group_acl(READ), topic_acl(READ)], TOPIC_AUTH,
                deny_grant=[group_acl(READ)], why="topic after group")],
        # handleOffsetFetchRequest: DESCRIBE on each group; offsets of topics the principal
        # may not DESCRIBE are TOPIC_AUTHORIZATION_FAILED (asked) or left out (all)
        9: [Row(lambda c: [offset_fetch_v3(c)[0]], topic_read_desc, GROUP_AUTH, effect=True),
            Row(lambda c: [e for e, _ in offset_fetch_v3(c)[1]], topic_read_desc, TOPIC_AUTH,
                deny_grant=[group_acl(DESCRIBE)], effect=True, why="v3 topic"),
            Row(lambda c: [e for _, e, _ in offset_fetch_v8(c)[1]], topic_read_desc,
                TOPIC_AUTH, deny_grant=[group_acl(DESCRIBE)], effect=True, why="v8 topic"),
            Row(lambda c: [t for t, _, _ in offset_fetch_v8(c, topics=False)[1]],
                topic_read_desc, None, deny_grant=[group_acl(DESCRIBE)],
                allowed_ok=has(TOPIC), denied_ok=lacks(TOPIC), why="v8 all")],
        # handleFindCoordinatorRequest: DESCRIBE on the group / the transactional id
        10: [Row(find_coordinator(0), [group_acl(DESCRIBE)], GROUP_AUTH, effect=True),
             Row(find_coordinator(1), [txn_acl(DESCRIBE)], TXN_AUTH, effect=True,
                 why="transaction")],
        # handleJoinGroupRequest: READ on the group
        11: [Row(join_group, [group_acl(READ)], GROUP_AUTH)],
        # handleHeartbeatRequest: READ on the group
        12: [Row(heartbeat, [group_acl(READ)], GROUP_AUTH)],
        # handleLeaveGroupRequest: READ on the group
        13: [Row(leave_group, [group_acl(READ)], GROUP_AUTH)],
        # handleSyncGroupRequest: READ on the group
        14: [Row(sync_group, [group_acl(READ)], GROUP_AUTH)],
        # handleDescribeGroupsRequest: DESCRIBE on each group
        15: [Row(describe_groups, [group_acl(DESCRIBE)], GROUP_AUTH, effect=True),
             Row(lambda c: [e for e, _ in describe_groups_ops(c)], [group_acl(READ)],
                 GROUP_AUTH, effect=True, why="v3"),
             Row(describe_groups_ops, [group_acl(READ)], None,
                 allowed_ok=lambda got: got == [(0, (1 << READ) | (1 << DESCRIBE))],
                 denied_ok=lambda got: got == [(GROUP_AUTH, -2 ** 31)], why="operations")],
        # handleConsumerGroupHeartbeat: READ on the group (GROUP is a classic group: an
        # allowed principal is told GROUP_ID_NOT_FOUND)
        68: [Row(consumer_group_heartbeat, [group_acl(READ)], GROUP_AUTH)],
        # handleConsumerGroupDescribe: DESCRIBE on each group
        69: [Row(consumer_group_describe, [group_acl(DESCRIBE)], GROUP_AUTH)],
        # handleListGroupsRequest: DESCRIBE on the cluster lists all, else DESCRIBE per group
        16: [Row(list_groups, [group_acl(DESCRIBE)], None, allowed_ok=has(GROUP),
                 denied_ok=lacks(GROUP)),
             Row(list_groups, [cluster_acl(DESCRIBE)], None, allowed_ok=has(GROUP),
                 denied_ok=lacks(GROUP), why="cluster")],
        # handleSaslHandshakeRequest: no authorization (a second handshake is a SASL state
        # error for everyone)
        17: [Row(sasl_handshake, [], None, no_check=True, fresh=True)],
        # handleApiVersionsRequest: no authorization
        18: [Row(api_versions, [], None, no_check=True, effect=True)],
        # handleCreateTopicsRequest: CREATE on the cluster, else on each topic
        19: [Row(create_topics(new_topic), [topic_acl(CREATE, new_topic)], TOPIC_AUTH,
                 effect=True),
             Row(create_topics(new_topic + "c"), [cluster_acl(CREATE)], TOPIC_AUTH,
                 effect=True, why="cluster")],
        # handleDeleteTopicsRequest: DESCRIBE and DELETE on each topic
        20: [Row(delete_topics(del_topic), [topic_acl(DELETE, del_topic)], TOPIC_AUTH,
                 effect=True)],
        # handleDeleteRecordsRequest: DELETE on each topic
        21: [Row(delete_records, [topic_acl(DELETE)], TOPIC_AUTH, effect=True)],
        # handleInitProducerIdRequest: WRITE on the transactional id; idempotent:
        # IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679)
        22: [Row(init_producer_id("mx-ip-%d" % PID), [txn_acl(WRITE, "mx-ip-%d" % PID)],
                 TXN_AUTH, effect=True),
             Row(init_producer_id(None), [cluster_acl(IDEMPOTENT_WRITE)], CLUSTER_AUTH,
                 effect=True, why="idempotent")],
        # handleOffsetForLeaderEpochRequest: CLUSTER_ACTION on the cluster, else DESCRIBE
        # on each topic
        23: [Row(offset_for_leader_epoch, [topic_acl(DESCRIBE)], TOPIC_AUTH, effect=True),
             Row(offset_for_leader_epoch, [cluster_acl(CLUSTER_ACTION)], TOPIC_AUTH,
                 effect=True, why="replica")],
        # handleAddPartitionsToTxnRequest: v0-3 WRITE on the transactional id, then WRITE on
        # each topic; v4+ CLUSTER_ACTION for the whole request
        24: [Row(add_partitions_to_txn_v3, [txn_acl(WRITE), topic_acl(WRITE)], TXN_AUTH),
             Row(add_partitions_to_txn_v3, [txn_acl(WRITE), topic_acl(WRITE)], TOPIC_AUTH,
                 deny_grant=[txn_acl(WRITE)], why="topic after id"),
             Row(add_partitions_to_txn_v4, [cluster_acl(CLUSTER_ACTION)], CLUSTER_AUTH,
                 why="v4")],
        # handleAddOffsetsToTxnRequest: WRITE on the transactional id, then READ on the group
        25: [Row(add_offsets_to_txn, [txn_acl(WRITE), group_acl(READ)], TXN_AUTH),
             Row(add_offsets_to_txn, [txn_acl(WRITE), group_acl(READ)], GROUP_AUTH,
                 deny_grant=[txn_acl(WRITE)], why="group after id")],
        # handleEndTxnRequest: WRITE on the transactional id
        26: [Row(end_txn, [txn_acl(WRITE)], TXN_AUTH)],
        # handleWriteTxnMarkersRequest: ALTER on the cluster, else CLUSTER_ACTION
        27: [Row(write_txn_markers, [cluster_acl(CLUSTER_ACTION)], CLUSTER_AUTH),
             Row(write_txn_markers, [cluster_acl(ALTER)], CLUSTER_AUTH, why="alter")],
        # handleTxnOffsetCommitRequest: WRITE on the id, READ on the group, READ on each topic
        28: [Row(txn_offset_commit, [txn_acl(WRITE), group_acl(READ), topic_acl(READ)],
                 TXN_AUTH),
             Row(txn_offset_commit, [txn_acl(WRITE), group_acl(READ), topic_acl(READ)],
                 GROUP_AUTH, deny_grant=[txn_acl(WRITE)], why="group after id"),
             Row(txn_offset_commit, [txn_acl(WRITE), group_acl(READ), topic_acl(READ)],
                 TOPIC_AUTH, deny_grant=[txn_acl(WRITE), group_acl(READ)],
                 why="topic after group")],
        # AclApis.handleDescribeAcls: DESCRIBE on the cluster
        29: [Row(describe_acls, [cluster_acl(DESCRIBE)], CLUSTER_AUTH, effect=True)],
        # AclApis.handleCreateAcls: ALTER on the cluster
        30: [Row(create_acls, [cluster_acl(ALTER)], CLUSTER_AUTH, effect=True)],
        # AclApis.handleDeleteAcls: ALTER on the cluster
        31: [Row(delete_acls, [cluster_acl(ALTER)], CLUSTER_AUTH, effect=True)],
        # ConfigHelper.handleDescribeConfigsRequest: DESCRIBE_CONFIGS on the topic, on the
        # cluster for a broker
        32: [Row(describe_configs(2, TOPIC), [topic_acl(DESCRIBE_CONFIGS)], TOPIC_AUTH,
                 effect=True),
             Row(describe_configs(4, "1"), [cluster_acl(DESCRIBE_CONFIGS)], CLUSTER_AUTH,
                 why="broker"),
             Row(describe_configs(32, GROUP), [group_acl(DESCRIBE_CONFIGS)], GROUP_AUTH,
                 why="group")],
        # handleAlterConfigsRequest: ALTER_CONFIGS on the topic, on the cluster for a broker
        33: [Row(alter_configs(2, TOPIC, "retention.ms", "7200000"),
                 [topic_acl(ALTER_CONFIGS)], TOPIC_AUTH, effect=True),
             Row(alter_configs(4, "1", "log.retention.ms", "1"),
                 [cluster_acl(ALTER_CONFIGS)], CLUSTER_AUTH, why="broker"),
             Row(alter_configs(32, GROUP, "consumer.session.timeout.ms", "45000"),
                 [group_acl(ALTER_CONFIGS)], GROUP_AUTH, why="group")],
        # handleSaslAuthenticateRequest: no authorization (after authentication it is a SASL
        # state error for everyone)
        36: [Row(sasl_authenticate, [], None, no_check=True, fresh=True)],
        # handleCreatePartitionsRequest: ALTER on each topic
        37: [Row(create_partitions, [topic_acl(ALTER)], TOPIC_AUTH, effect=True)],
        # handleDeleteGroupsRequest: DELETE on each group
        42: [Row(delete_groups("mx-dg-%d" % PID), [group_acl(DELETE, "mx-dg-%d" % PID)],
                 GROUP_AUTH)],
        # handleElectLeaders: ALTER on the cluster
        43: [Row(elect_leaders, [cluster_acl(ALTER)], CLUSTER_AUTH)],
        # handleIncrementalAlterConfigsRequest: ALTER_CONFIGS on the topic
        44: [Row(incremental_alter_configs(2, TOPIC, "retention.ms", "3600000"),
                 [topic_acl(ALTER_CONFIGS)], TOPIC_AUTH, effect=True),
             Row(incremental_alter_configs(4, "1", "log.retention.ms", "1"),
                 [cluster_acl(ALTER_CONFIGS)], CLUSTER_AUTH, why="broker"),
             Row(incremental_alter_configs(32, GROUP, "consumer.session.timeout.ms", "45000"),
                 [group_acl(ALTER_CONFIGS)], GROUP_AUTH, why="group")],
        # handleAlterPartitionReassignmentsRequest: ALTER on the cluster
        45: [Row(alter_reassignments, [cluster_acl(ALTER)], CLUSTER_AUTH)],
        # handleListPartitionReassignmentsRequest: DESCRIBE on the cluster
        46: [Row(list_reassignments, [cluster_acl(DESCRIBE)], CLUSTER_AUTH, effect=True)],
        # handleOffsetDeleteRequest: DELETE on the group, then READ on each topic
        47: [Row(lambda c: [offset_delete(c)[0]],
                 [group_acl(DELETE, "mx-od-%d" % PID), topic_acl(READ)], GROUP_AUTH),
             Row(lambda c: offset_delete(c)[1],
                 [group_acl(DELETE, "mx-od-%d" % PID), topic_acl(READ)], TOPIC_AUTH,
                 deny_grant=[group_acl(DELETE, "mx-od-%d" % PID)], why="topic after group")],
        # handleDescribeClientQuotasRequest: DESCRIBE_CONFIGS on the cluster
        48: [Row(describe_client_quotas, [cluster_acl(DESCRIBE_CONFIGS)], CLUSTER_AUTH,
                 effect=True)],
        # handleAlterClientQuotasRequest: ALTER_CONFIGS on the cluster
        49: [Row(alter_client_quotas, [cluster_acl(ALTER_CONFIGS)], CLUSTER_AUTH,
                 effect=True)],
        # handleDescribeUserScramCredentialsRequest: DESCRIBE on the cluster
        50: [Row(describe_scram, [cluster_acl(DESCRIBE)], CLUSTER_AUTH, effect=True)],
        # handleAlterUserScramCredentialsRequest: ALTER on the cluster
        51: [Row(alter_scram, [cluster_acl(ALTER)], CLUSTER_AUTH)],
        # handleDescribeCluster (AuthHelper.computeDescribeClusterResponse): no refusal;
        # DESCRIBE on the cluster decides the authorized operations (0 when denied)
        60: [Row(describe_cluster, [cluster_acl(DESCRIBE)], None,
                 allowed_ok=lambda got: got[0] == 0 and got[1] & (1 << DESCRIBE),
                 denied_ok=lambda got: got == (0, 0))],
        # handleDescribeProducersRequest: READ on each topic
        61: [Row(describe_producers, [topic_acl(READ)], TOPIC_AUTH, effect=True)],
        # handleDescribeTransactionsRequest: DESCRIBE on each transactional id
        65: [Row(describe_transactions, [txn_acl(DESCRIBE)], TXN_AUTH, effect=True)],
        # handleListTransactionsRequest: only the ids the principal may DESCRIBE
        66: [Row(list_transactions, [txn_acl(DESCRIBE)], None, allowed_ok=has(TXN),
                 denied_ok=lacks(TXN))],
    }


# ---- ACLs and logins -----------------------------------------------------------------------

def acls_change(c, principal, grants, create=True):
    """CreateAcls (or DeleteAcls of everything principal holds) as the super user."""
    if create:
        body = a([acl_body(res, name, principal, op) for res, name, op in grants], bytes)
        r = c.request(30, 1, body)
        r.i32()
        errs = [e for e, _ in r.array(lambda x: (x.i16(), x.string()))]
        assert errs == [0] * len(grants), errs
        return
    f = w.i8(1) + s(None) + w.i8(1) + s(principal) + s(None) + w.i8(1) + w.i8(1)
    r = c.request(31, 1, a([f], bytes))
    r.i32()

    def res(x):
        e = x.i16()
        x.string()
        x.array(lambda y: (y.i16(), y.string(), y.i8(), y.string(), y.i8(), y.string(),
                           y.string(), y.i8(), y.i8()))
        return e
    errs = r.array(res)
    assert errs == [0], errs


def login(port, user):
    """A raw connection to the SASL listener, authenticated with PLAIN as user. The
    credentials are made by the controller at start (sasl.bootstrap.users): retried, bounded,
    until they are there."""
    result = {}

    def attempt():
        c = w.Conn("127.0.0.1", port, timeout=20)
        r = c.request(17, 1, s("PLAIN"))
        if r.i16() != 0:
            c.close()
            return False
        tok = ("\0%s\0%s" % (user, USERS[user])).encode()
        r = c.request(36, 0, w.i32(len(tok)) + tok)
        if r.i16() != 0:
            c.close()
            return False
        result["c"] = c
        return True

    def ok():
        try:
            return attempt()
        except (EOFError, OSError):
            return False
    wait_until(ok, 30, "PLAIN login as %s" % user)
    return result["c"]


class AclMatrixTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.srv = MatrixServer(name="aclmx", sets={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS", "sasl.bootstrap.users": BOOT,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0"})
        cls.srv.start()
        try:
            cls.admin = w.Conn.to(cls.srv.bootstrap, timeout=20)
            cls.setup_fixtures()
            cls.alice = login(cls.srv.sasl_port, "alice")
            cls.bob = login(cls.srv.sasl_port, "bob")
        except BaseException:
            cls.srv.close()
            raise

    @classmethod
    def tearDownClass(cls):
        for c in ("admin", "alice", "bob"):
            if getattr(cls, c, None):
                getattr(cls, c).close()
        cls.srv.stop()

    @classmethod
    def until_ok(cls, what, fn):
        """fn(admin connection) -> error codes; retried while some are retriable."""
        got = {}

        def ok():
            got["e"] = fn(cls.admin)
            assert all(e in RETRIABLE or e == 0 for e in got["e"]), (what, got["e"])
            return all(e == 0 for e in got["e"])
        try:
            wait_until(ok, 30, what)
        except harness.WaitTimeout:
            raise AssertionError("%s: still %s" % (what, got.get("e")))

    @classmethod
    def setup_fixtures(cls):
        for t in (TOPIC, "mx-del-%d" % PID):
            cls.until_ok("create " + t, create_topics(t))
        cls.until_ok("produce", produce)
        cls.until_ok("group coordinator", find_coordinator(0))
        cls.until_ok("commit", offset_commit)
        cls.until_ok("commit to the OffsetDelete group", lambda c: offset_delete_commit(c))
        cls.until_ok("transaction coordinator", find_coordinator(1))
        cls.until_ok("transactional id", init_producer_id(TXN))

    def test_every_api_has_a_row(self):
        """ApiVersions (unauthenticated, on the SASL listener) names every API served; the
        matrix has a row for each, and every row's request version is served."""
        with w.Conn("127.0.0.1", self.srv.sasl_port) as c:
            err, keys = w.api_versions(c)
        self.assertEqual(err, 0)
        rows = matrix()
        self.assertEqual(sorted(set(keys) - set(rows)), [], "APIs without a matrix row")
        self.assertEqual(sorted(set(rows) - set(keys)), [], "rows for APIs not served")

    def test_matrix(self):
        failures, checked = [], 0
        rows = matrix()
        for key in sorted(rows):
            for row in rows[key]:
                label = "api %d%s" % (key, " (%s)" % row.why if row.why else "")
                try:
                    self.check_row(row)
                    checked += 1
                except AssertionError as e:
                    failures.append("%s: %s" % (label, e))
        print("ACL matrix: %d APIs, %d rows x 2 principals" % (len(rows), checked),
              file=sys.stderr)
        if failures:
            self.fail("%d rows failed:\n%s" % (len(failures), "\n".join(failures)))

    def as_user(self, row, user):
        if not row.fresh:
            return row.run(getattr(self, user))
        c = login(self.srv.sasl_port, user)
        try:
            return row.run(c)
        except (EOFError, OSError) as e:
            return ["closed: %s" % e.__class__.__name__]
        finally:
            c.close()

    def check_row(self, row):
        try:
            if row.deny_grant:
                acls_change(self.admin, "User:bob", row.deny_grant)
            denied = self.as_user(row, "bob")
        finally:
            if row.deny_grant:
                acls_change(self.admin, "User:bob", None, create=False)
        try:
            if row.grant:
                acls_change(self.admin, "User:alice", row.grant)
            allowed = self.as_user(row, "alice")
        finally:
            if row.grant:
                acls_change(self.admin, "User:alice", None, create=False)
        if row.no_check:
            assert not set(allowed) & AUTH_ERRORS, "no check, yet %s" % allowed
            assert denied == allowed, "no check, yet %s for bob, %s for alice" % (denied,
                                                                                 allowed)
        elif row.denied_ok:
            assert row.denied_ok(denied), "denied principal got %s" % (denied,)
            assert row.allowed_ok(allowed), "allowed principal got %s" % (allowed,)
            return
        else:
            assert denied and all(e == row.denied for e in denied), \
                "denied principal got %s, want %d" % (denied, row.denied)
            assert allowed and not set(allowed) & AUTH_ERRORS, \
                "allowed principal got %s" % allowed
        if row.effect:
            assert all(e == 0 for e in allowed), "allowed, but no effect: %s" % allowed

    def test_transaction_topics(self):
        check_transaction_topics(self)

    def test_offset_fetch_shows_offsets_only_to_describers(self):
        """The committed offset itself: the allowed principal reads it, one without DESCRIBE
        on the topic gets -1 with the error (Kafka's UNAUTHORIZED_PARTITION)."""
        acls_change(self.admin, "User:bob", [group_acl(DESCRIBE)])
        acls_change(self.admin, "User:alice", [group_acl(DESCRIBE), topic_acl(DESCRIBE)])
        try:
            self.assertEqual(offset_fetch_v3(self.alice), (0, [(0, 1)]))
            self.assertEqual(offset_fetch_v3(self.bob), (0, [(TOPIC_AUTH, -1)]))
            self.assertEqual(offset_fetch_v8(self.alice), (0, [(TOPIC, 0, 1)]))
            self.assertEqual(offset_fetch_v8(self.bob), (0, [(TOPIC, TOPIC_AUTH, -1)]))
            self.assertEqual(offset_fetch_v8(self.bob, topics=False), (0, []))
        finally:
            acls_change(self.admin, "User:bob", None, create=False)
            acls_change(self.admin, "User:alice", None, create=False)


def txn_topics(c, tid):
    """DescribeTransactions v0 of one id: (error, [topic names shown])."""
    r = c.request(65, 0, ca([tid], cs) + T, flexible=True)
    r.i32()

    def state(x):
        e = x.i16()
        x.compact_string(), x.compact_string(), x.i32(), x.i64(), x.i64(), x.i16()
        names = x.compact_array(lambda y: (y.compact_string(), y.compact_array(lambda z: z.i32()),
                                           y.tags())[0])
        x.tags()
        return e, names
    (got,) = r.compact_array(state)
    return got


def check_transaction_topics(self):
    """DescribeTransactions shows only the partitions of topics the principal may DESCRIBE
    (KafkaApis.handleDescribeTransactionsRequest)."""
    srv = self.srv
    tid = "mx-tx2-%d" % PID
    admin = w.Conn.to(srv.bootstrap, timeout=20)
    try:
        got = {}

        def init():
            r = admin.request(22, 0, s(tid) + w.i32(60000), timeout=20)
            r.i32()
            got["e"], got["pid"], got["epoch"] = r.i16(), r.i64(), r.i16()
            return got["e"] == 0
        wait_until(init, 30, "producer id")

        def add():
            topics = ca([TOPIC], lambda t: cs(t) + ca([0], w.i32) + T)
            r = admin.request(24, 3, cs(tid) + w.i64(got["pid"]) + w.i16(got["epoch"]) +
                              topics + T, flexible=True)
            r.i32()
            errs = parts_flex(r, lambda x: (x.i32(), x.i16(), x.tags())[1])
            assert all(e in (0, 51) for e in errs), errs
            return errs == [0]
        wait_until(add, 30, "partition added")
        self.assertEqual(txn_topics(admin, tid), (0, [TOPIC]))
        acls_change(admin, "User:alice", [txn_acl(DESCRIBE, tid)])
        acls_change(admin, "User:bob", [txn_acl(DESCRIBE, tid), topic_acl(DESCRIBE)])
        try:
            self.assertEqual(txn_topics(self.alice, tid), (0, []))
            self.assertEqual(txn_topics(self.bob, tid), (0, [TOPIC]))
        finally:
            acls_change(admin, "User:alice", None, create=False)
            acls_change(admin, "User:bob", None, create=False)
    finally:
        admin.close()


def offset_delete_commit(c):
    body = (s("mx-od-%d" % PID) + w.i32(-1) + s("") + w.i64(-1) +
            a([s(TOPIC) + a([w.i32(0) + w.i64(1) + s(None)], bytes)], bytes))
    r = c.request(8, 2, body)

    def part(x):
        x.i32()
        return x.i16()
    return parts_v0(r, part)


if __name__ == "__main__":
    harness.main()
