"""Metadata changes sent to a broker that is not the active controller (issue 22): CreateAcls,
DeleteAcls, AlterUserScramCredentials and AlterClientQuotas are forwarded to the controller,
as Kafka's brokers forward them (KafkaApis.maybeForwardToController, KIP-590), so admin
clients that send them to any broker (Java's and kafka-python's least loaded node) succeed.

Three brokers (cluster.py), every request sent to a broker other than the controller: over
the raw wire (kwire) for all four, each change then seen by every broker; and with
kafka-python 2.0's KafkaAdminClient bootstrapped from that broker (Debian's confluent-kafka
1.7 has none of these four calls)."""

import hashlib
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire as w  # noqa: E402
from cluster import Cluster  # noqa: E402
from harness import wait_until  # noqa: E402

s, cs, a, ca, T = w.string, w.compact_string, w.array, w.compact_array, w.TAGS_NONE
PID = os.getpid()
TOPIC_R, LITERAL, READ, ALLOW, ANY = 2, 3, 3, 3, 1
ACL = (TOPIC_R, "fwd-%d" % PID, "User:carol")
USER = "fwd-%d" % PID


def create_acls(c):
    res, name, principal = ACL
    body = a([w.i8(res) + s(name) + w.i8(LITERAL) + s(principal) + s("*") + w.i8(READ) +
              w.i8(ALLOW)], bytes)
    r = c.request(30, 1, body)
    r.i32()
    return [e for e, _ in r.array(lambda x: (x.i16(), x.string()))]


def delete_acls(c):
    res, name, principal = ACL
    f = w.i8(res) + s(name) + w.i8(LITERAL) + s(principal) + s(None) + w.i8(ANY) + w.i8(ANY)
    r = c.request(31, 1, a([f], bytes))
    r.i32()

    def res_(x):
        e = x.i16()
        x.string()
        m = x.array(lambda y: (y.i16(), y.string(), y.i8(), y.string(), y.i8(), y.string(),
                               y.string(), y.i8(), y.i8()))
        return e, len(m)
    return r.array(res_)


def describe_acls(c):
    """The names of the LITERAL topic resources that have ACLs."""
    r = c.request(29, 1, w.i8(TOPIC_R) + s(None) + w.i8(LITERAL) + s(None) + s(None) +
                  w.i8(ANY) + w.i8(ANY))
    r.i32()
    assert r.i16() == 0
    r.string()

    def resource(x):
        x.i8()
        name = x.string()
        x.i8()
        x.array(lambda y: (y.string(), y.string(), y.i8(), y.i8()))
        return name
    return r.array(resource)


def alter_scram(c):
    salt = b"forwarded-salt"
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    up = (cs(USER) + w.i8(1) + w.i32(4096) + w.uvarint(len(salt) + 1) + salt +
          w.uvarint(len(salted) + 1) + salted + T)
    r = c.request(51, 0, w.uvarint(1) + ca([up], bytes) + T, flexible=True)
    r.i32()

    def res(x):
        x.compact_string()
        e = x.i16()
        x.compact_string()
        x.tags()
        return e
    return r.compact_array(res)


def describe_scram(c):
    r = c.request(50, 0, ca([USER], lambda u: cs(u) + T) + T, flexible=True)
    r.i32()
    r.i16()
    r.compact_string()

    def res(x):
        x.compact_string()
        e = x.i16()
        x.compact_string()
        x.compact_array(lambda y: (y.i8(), y.i32(), y.tags()))
        x.tags()
        return e
    return r.compact_array(res)


def alter_quota(c):
    entry = (a([s("user") + s(USER)], bytes) +
             a([s("producer_byte_rate") + struct.pack(">d", 1048576.0) + w.boolean(False)],
               bytes))
    r = c.request(49, 0, a([entry], bytes) + w.boolean(False))
    r.i32()
    return r.array(lambda x: (x.i16(), x.string(),
                              x.array(lambda y: (y.string(), y.string())))[0])


def describe_quota(c):
    """{key: value} of the user's quota entity."""
    r = c.request(48, 0, a([s("user") + w.i8(0) + s(USER)], bytes) + w.boolean(True))
    r.i32()
    assert r.i16() == 0
    r.string()
    out = {}

    def entry(x):
        x.array(lambda y: (y.string(), y.string()))
        for k, v in x.array(lambda y: (y.string(), struct.unpack(">d", y.take(8))[0])):
            out[k] = v
    r.array(entry)
    return out


TOPIC = "fwd-cfg-%d" % PID


def create_topic(c):
    t = s(TOPIC) + w.i32(1) + w.i16(1) + w.i32(0) + w.i32(0)
    r = c.request(19, 2, a([t], bytes) + w.i32(15000) + w.boolean(False), timeout=20)
    r.i32()
    return [e for _, e, _ in r.array(lambda x: (x.string(), x.i16(), x.string()))]


def alter_config(c, incremental, value):
    if incremental:
        res = w.i8(2) + s(TOPIC) + a([s("retention.ms") + w.i8(0) + s(value)], bytes)
    else:
        res = w.i8(2) + s(TOPIC) + a([s("retention.ms") + s(value)], bytes)
    r = c.request(44 if incremental else 33, 0, a([res], bytes) + w.boolean(False))
    r.i32()
    return [e for e, _, _, _ in r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string()))]


def retention(c):
    r = c.request(32, 1, a([w.i8(2) + s(TOPIC) + a(["retention.ms"], s)], bytes) +
                  w.boolean(False))
    r.i32()
    out = []

    def res(x):
        assert x.i16() == 0
        x.string(), x.i8(), x.string()
        for name, value, *_ in x.array(lambda y: (
                y.string(), y.string(), y.boolean(), y.i8(), y.boolean(),
                y.array(lambda z: (z.string(), z.string(), z.i8())))):
            out.append(value)
    r.array(res)
    return out


class AclForwardTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster(3, name="aclfwd")
        try:
            cls.c.start()
            cls.ctrl = cls.c.wait_for_quorum(60)
        except BaseException:
            cls.c.close()
            raise
        cls.other = next(n for n in cls.c.voters if n != cls.ctrl)

    @classmethod
    def tearDownClass(cls):
        cls.c.stop_all()

    def conn(self, nid):
        return w.Conn.to(self.c.nodes[nid].bootstrap, timeout=20)

    def on_every_broker(self, what, fn):
        def ok():
            for n in self.c.voters:
                with self.conn(n) as k:
                    if not fn(k):
                        return False
            return True
        wait_until(ok, 15, what)

    def test_wire_to_a_non_controller(self):
        with self.conn(self.other) as k:
            self.assertEqual(create_acls(k), [0])
            self.on_every_broker("the ACL", lambda x: ACL[1] in describe_acls(x))
            self.assertEqual(alter_scram(k), [0])
            self.on_every_broker("the credential", lambda x: describe_scram(x) == [0])
            self.assertEqual(alter_quota(k), [0])
            self.on_every_broker("the quota", lambda x: describe_quota(x) == {
                "producer_byte_rate": 1048576.0})
            self.assertEqual(delete_acls(k), [(0, 1)])
            self.on_every_broker("the ACL gone", lambda x: ACL[1] not in describe_acls(x))

    def test_configs_to_a_non_controller(self):
        """AlterConfigs and IncrementalAlterConfigs of a topic, each checked per resource here
        and forwarded."""
        with self.conn(self.ctrl) as k:
            self.assertEqual(create_topic(k), [0])
        self.on_every_broker("the topic", lambda x: retention(x) != [])
        with self.conn(self.other) as k:
            self.assertEqual(alter_config(k, False, "7200000"), [0])
            self.on_every_broker("AlterConfigs", lambda x: retention(x) == ["7200000"])
            self.assertEqual(alter_config(k, True, "3600000"), [0])
            self.on_every_broker("IncrementalAlterConfigs",
                                 lambda x: retention(x) == ["3600000"])

    def test_kafka_python_admin(self):
        """kafka-python sends CreateAcls and DeleteAcls to its least loaded broker, bootstrapped
        here from a non-controller."""
        from kafka.admin import (ACL as KACL, ACLFilter, ACLOperation, ACLPermissionType,
                                 ACLResourcePatternType, KafkaAdminClient, ResourcePattern,
                                 ResourcePatternFilter, ResourceType)
        name = "fwd-kp-%d" % PID
        adm = KafkaAdminClient(bootstrap_servers=self.c.nodes[self.other].bootstrap,
                               request_timeout_ms=15000, client_id="it-acl-forward")
        try:
            acl = KACL(principal="User:dave", host="*", operation=ACLOperation.READ,
                       permission_type=ACLPermissionType.ALLOW,
                       resource_pattern=ResourcePattern(ResourceType.TOPIC, name,
                                                        ACLResourcePatternType.LITERAL))
            for _ in range(3):   # each to the least loaded broker, controller or not
                res = adm.create_acls([acl])
                self.assertEqual(res["failed"], [], res)
            self.on_every_broker("kafka-python's ACL", lambda x: name in describe_acls(x))
            f = ACLFilter(principal="User:dave", host=None, operation=ACLOperation.ANY,
                          permission_type=ACLPermissionType.ANY,
                          resource_pattern=ResourcePatternFilter(
                              ResourceType.TOPIC, name, ACLResourcePatternType.LITERAL))
            out = adm.delete_acls([f])
            self.assertEqual(out[0][2].errno, 0, out)
            self.assertEqual(len(out[0][1]), 1, out)
        finally:
            adm.close()


if __name__ == "__main__":
    harness.main()
