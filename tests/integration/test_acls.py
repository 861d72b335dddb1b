"""ACLs (issue 22, authorization): CreateAcls, DescribeAcls and DeleteAcls driven by
kafka-python's admin client (Debian python3-kafka 2.0.2) against a broker with
authorizer.class.name set, and the decisions they make for real clients.

The principal here is User:ANONYMOUS (a PLAINTEXT listener). allow.everyone.if.no.acl.found is
on, so the first client may write the first ACLs; once an ACL names a resource, only what the
ACLs allow is allowed. Checked: filters (ANY, MATCH, LITERAL, PREFIXED, principal, operation),
idempotent creation, invalid ACLs refused with INVALID_REQUEST, deletion reporting what it
matched, the ACLs surviving a restart (they are in the metadata log), a principal without
ALTER on the cluster refused CLUSTER_AUTHORIZATION_FAILED, and the authorizer's decisions on
Produce, Fetch, Metadata, CreateTopics, groups and the idempotent producer."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ServerTestCase  # noqa: E402

ANON = "User:ANONYMOUS"


def admin(bootstrap):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000,
                            client_id="it-acls")


def acl(name, op, perm="ALLOW", rtype="TOPIC", pattern="LITERAL", principal=ANON, host="*"):
    from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourceType)
    return ACL(principal=principal, host=host, operation=getattr(ACLOperation, op),
               permission_type=getattr(ACLPermissionType, perm),
               resource_pattern=ResourcePattern(getattr(ResourceType, rtype), name,
                                                getattr(ACLResourcePatternType, pattern)))


def acl_filter(name=None, rtype="ANY", pattern="ANY", principal=None, op="ANY", perm="ANY"):
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePatternFilter, ResourceType)
    return ACLFilter(principal=principal, host=None, operation=getattr(ACLOperation, op),
                     permission_type=getattr(ACLPermissionType, perm),
                     resource_pattern=ResourcePatternFilter(
                         getattr(ResourceType, rtype), name,
                         getattr(ACLResourcePatternType, pattern)))


def is_error(e, cls):
    """kafka-python reports a failed ACL with the error class itself, or an instance."""
    return e is cls or isinstance(e, cls)


def key(a):
    p = a.resource_pattern
    return (p.resource_type.name, p.resource_name, p.pattern_type.name, a.principal, a.host,
            a.operation.name, a.permission_type.name)


class AclApiTest(ServerTestCase):
    SETS = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true"}

    def describe(self, a, f):
        acls, err = a.describe_acls(f)
        self.assertEqual(err.errno, 0, err)
        return sorted(key(x) for x in acls)

    def test_create_describe_delete(self):
        a = admin(self.bootstrap)
        try:
            t = self.unique("acl")
            made = [acl(t, "READ"), acl(t, "WRITE", perm="DENY", principal="User:eve"),
                    acl(t[:6], "ALL", pattern="PREFIXED"),
                    acl("g-" + t, "READ", rtype="GROUP"),
                    acl("*", "DESCRIBE", principal="User:*")]
            res = a.create_acls(made)
            self.assertEqual(res["failed"], [], res)
            self.assertEqual(len(res["succeeded"]), len(made))
            # Creating the same ACL again succeeds and stores it once.
            self.assertEqual(a.create_acls([made[0]])["failed"], [])
            everything = self.describe(a, acl_filter())
            for m in made:
                self.assertIn(key(m), everything)
            self.assertEqual(len([k for k in everything if k == key(made[0])]), 1)
            # Filters: exact literal name; MATCH (literal, prefixed and wildcard that apply);
            # prefixed only; by principal; by operation.
            self.assertEqual(self.describe(a, acl_filter(t, "TOPIC", "LITERAL")),
                             sorted([key(made[0]), key(made[1])]))
            self.assertEqual(self.describe(a, acl_filter(t, "TOPIC", "MATCH")),
                             sorted([key(made[0]), key(made[1]), key(made[2]), key(made[4])]))
            self.assertEqual(self.describe(a, acl_filter(rtype="TOPIC", pattern="PREFIXED")),
                             [key(made[2])])
            self.assertEqual(self.describe(a, acl_filter(principal="User:eve")), [key(made[1])])
            self.assertEqual(self.describe(a, acl_filter(rtype="GROUP", op="READ")),
                             [key(made[3])])
            # Delete by filter: the answer lists what matched; it is gone after.
            out = a.delete_acls([acl_filter(t, "TOPIC", "LITERAL")])
            self.assertEqual(len(out), 1)
            _, matched, err = out[0][0], out[0][1], out[0][2]
            self.assertEqual(err.errno, 0)
            self.assertEqual(sorted(key(m[0]) for m in matched),
                             sorted([key(made[0]), key(made[1])]))
            self.assertEqual(self.describe(a, acl_filter(t, "TOPIC", "LITERAL")), [])
            self.assertEqual(self.describe(a, acl_filter(rtype="TOPIC", pattern="PREFIXED")),
                             [key(made[2])])
            # A second delete of the same filter matches nothing.
            out = a.delete_acls([acl_filter(t, "TOPIC", "LITERAL")])
            self.assertEqual(out[0][1], [])
            a.delete_acls([acl_filter()])
            self.assertEqual(self.describe(a, acl_filter()), [])
        finally:
            a.close()

    def test_invalid_acl_refused(self):
        from kafka.errors import InvalidRequestError
        a = admin(self.bootstrap)
        try:
            res = a.create_acls([acl("kafka-cluster", "ALTER", rtype="CLUSTER",
                                     pattern="PREFIXED"),
                                 acl("ok-" + self.unique(), "READ", principal="nobody")])
            self.assertEqual(res["succeeded"], [])
            self.assertEqual(len(res["failed"]), 2)
            for _, e in res["failed"]:
                self.assertTrue(is_error(e, InvalidRequestError), e)
        finally:
            a.close()

    def test_acls_survive_restart(self):
        a = admin(self.bootstrap)
        t = self.unique("keep")
        try:
            self.assertEqual(a.create_acls([acl(t, "READ")])["failed"], [])
        finally:
            a.close()
        self.server.restart()
        a = admin(self.server.bootstrap)
        try:
            self.assertEqual(self.describe(a, acl_filter(t, "TOPIC", "LITERAL")),
                             [key(acl(t, "READ"))])
            a.delete_acls([acl_filter()])
        finally:
            a.close()


class AclClusterAuthTest(ServerTestCase):
    """Without the no-ACL escape (allow.everyone.if.no.acl.found false) and no super user,
    User:ANONYMOUS may neither describe nor change ACLs."""
    SETS = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}

    def test_cluster_authorization_failed(self):
        from kafka.errors import ClusterAuthorizationFailedError
        a = admin(self.bootstrap)
        try:
            res = a.create_acls([acl("x", "READ")])
            self.assertEqual(len(res["failed"]), 1)
            self.assertTrue(is_error(res["failed"][0][1], ClusterAuthorizationFailedError), res)
            with self.assertRaises(ClusterAuthorizationFailedError):
                a.describe_acls(acl_filter())
        finally:
            a.close()
        self.assertIn("is Denied operation = Alter", self.server.stderr_text())

    def test_cluster_and_txn_apis_wire(self):
        """The APIs no installed client drives, checked in raw bytes (kwire): ElectLeaders and
        ListPartitionReassignments need ALTER / DESCRIBE on the cluster, EndTxn WRITE on the
        transactional id, DescribeUserScramCredentials DESCRIBE on the cluster."""
        import kwire as w
        with w.Conn.to(self.bootstrap) as c:
            # ElectLeaders v1: election_type, topic_partitions (null: all), timeout_ms
            r = c.request(43, 1, w.i8(0) + w.i32(-1) + w.i32(5000))
            r.i32()
            self.assertEqual(r.i16(), 31)  # CLUSTER_AUTHORIZATION_FAILED
            # ListPartitionReassignments v0 (flexible): timeout_ms, topics (null)
            r = c.request(46, 0, w.i32(5000) + w.uvarint(0) + w.uvarint(0), flexible=True)
            r.i32()
            self.assertEqual(r.i16(), 31)
            # InitProducerId v0 without a transactional id: IDEMPOTENT_WRITE on the cluster or
            # WRITE on some topic (KIP-679), neither allowed here
            r = c.request(22, 0, w.string(None) + w.i32(60000))
            r.i32()
            self.assertEqual(r.i16(), 31)
            # EndTxn v0: transactional_id, producer_id, producer_epoch, committed
            r = c.request(26, 0, w.string("tx-1") + w.i64(1) + w.i16(0) + w.boolean(True))
            r.i32()
            self.assertEqual(r.i16(), 53)  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            # DescribeUserScramCredentials v0 (flexible): users (null: all) -> DESCRIBE on the
            # cluster
            r = c.request(50, 0, w.uvarint(0) + w.uvarint(0), flexible=True)
            r.i32()
            self.assertEqual(r.i16(), 31)
            # DescribeTransactions v0 (flexible): DESCRIBE on each transactional id
            r = c.request(65, 0, w.compact_array(["tx-1"], w.compact_string) + w.uvarint(0),
                          flexible=True)
            r.i32()
            self.assertEqual(r.uvarint(), 2)  # one state (compact: n + 1)
            self.assertEqual(r.i16(), 53)
            # DescribeProducers v0 (flexible): READ on the topic, per partition
            topic = w.compact_string("t") + w.compact_array([0], w.i32) + w.uvarint(0)
            r = c.request(61, 0, w.uvarint(2) + topic + w.uvarint(0), flexible=True)
            r.i32()
            self.assertEqual(r.uvarint(), 2)
            self.assertEqual(r.compact_string(), "t")
            self.assertEqual(r.uvarint(), 2)
            self.assertEqual(r.i32(), 0)   # partition 0
            self.assertEqual(r.i16(), 29)  # TOPIC_AUTHORIZATION_FAILED
            # AddPartitionsToTxn v3 (flexible): WRITE on the transactional id
            r = c.request(24, 3, w.compact_string("tx-1") + w.i64(1) + w.i16(0) + w.uvarint(2) +
                          topic + w.uvarint(0), flexible=True)
            r.i32()
            self.assertEqual(r.uvarint(), 2)
            self.assertEqual(r.compact_string(), "t")
            self.assertEqual(r.uvarint(), 2)
            self.assertEqual(r.i32(), 0)
            self.assertEqual(r.i16(), 53)
            # TxnOffsetCommit v0: transactional_id, group_id, producer_id, epoch, topics
            part = w.i32(0) + w.i64(5) + w.string(None)
            r = c.request(28, 0, w.string("tx-1") + w.string("g") + w.i64(1) + w.i16(0) +
                          w.array([w.string("t") + w.array([part], bytes)], bytes))
            r.i32()
            self.assertEqual(r.i32(), 1)
            self.assertEqual(r.string(), "t")
            self.assertEqual(r.i32(), 1)
            self.assertEqual(r.i32(), 0)
            self.assertEqual(r.i16(), 53)


class AclEnforcementTest(ServerTestCase):
    """The authorizer's decisions on real clients' requests (confluent-kafka, librdkafka
    2.0.2), as User:ANONYMOUS: ACLs name some resources, the others stay open
    (allow.everyone.if.no.acl.found)."""
    SETS = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true", "num.partitions": "1"}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        u = "%d" % os.getpid()
        cls.open_t, cls.secret, cls.hidden = "open-" + u, "secret-" + u, "hidden-" + u
        cls.denied_group = "g-denied-" + u
        cls.desc_group = "g-desc-" + u
        from confluent_kafka.admin import AdminClient, NewTopic
        ac = AdminClient({"bootstrap.servers": cls.bootstrap})
        for f in ac.create_topics([NewTopic(t, 1, 1) for t in
                                   (cls.open_t, cls.secret, cls.hidden)]).values():
            f.result(30)
        a = admin(cls.bootstrap)
        try:
            res = a.create_acls([
                acl("kafka-cluster", "ALTER", rtype="CLUSTER"),
                acl("kafka-cluster", "DESCRIBE", rtype="CLUSTER"),
                acl(cls.open_t, "WRITE"), acl(cls.open_t, "READ"),
                acl(cls.secret, "WRITE", perm="DENY"), acl(cls.secret, "READ", perm="DENY"),
                acl(cls.secret, "DESCRIBE"),
                acl(cls.hidden, "DESCRIBE", perm="DENY"),
                acl(cls.denied_group, "READ", perm="DENY", rtype="GROUP"),
                acl(cls.desc_group, "DESCRIBE", rtype="GROUP"),
                acl("nocreate-", "CREATE", perm="DENY", pattern="PREFIXED")])
            assert res["failed"] == [], res
        finally:
            a.close()

    def produce(self, topic, **conf):
        from confluent_kafka import Producer
        c = {"bootstrap.servers": self.bootstrap, "message.timeout.ms": 10000}
        c.update(conf)
        p = Producer(c)
        out = []
        p.produce(topic, b"v", on_delivery=lambda err, m: out.append(err))
        p.flush(20)
        self.assertEqual(len(out), 1)
        return out[0]

    def test_produce(self):
        from confluent_kafka import KafkaError
        self.assertIsNone(self.produce(self.open_t))
        err = self.produce(self.secret)
        self.assertIsNotNone(err)
        self.assertEqual(err.code(), KafkaError.TOPIC_AUTHORIZATION_FAILED)
        # An idempotent producer: no IDEMPOTENT_WRITE on the cluster, but WRITE on a topic
        self.assertIsNone(self.produce(self.open_t, **{"enable.idempotence": True}))
        # refused by Produce itself (DESCRIBE is allowed: the client has its metadata)
        self.assertIn("is Denied operation = Write from host = 127.0.0.1 on resource = "
                      "Topic:LITERAL:%s (api key 0)" % self.secret, self.server.stderr_text())

    def consume_error(self, topic, group):
        from confluent_kafka import Consumer
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
        c.subscribe([topic])
        deadline = harness.time.monotonic() + 20
        try:
            while harness.time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                return m.error()
        finally:
            c.close()
        self.fail("no message and no error from %s" % topic)

    def test_fetch_and_groups(self):
        from confluent_kafka import KafkaError
        self.assertIsNone(self.produce(self.open_t))
        self.assertIsNone(self.consume_error(self.open_t, self.unique("g")))
        err = self.consume_error(self.secret, self.unique("g"))
        self.assertIsNotNone(err)
        self.assertEqual(err.code(), KafkaError.TOPIC_AUTHORIZATION_FAILED)
        err = self.consume_error(self.open_t, self.denied_group)
        self.assertIsNotNone(err)
        self.assertEqual(err.code(), KafkaError.GROUP_AUTHORIZATION_FAILED)
        # DescribeGroups: DESCRIBE on each group (wire: FindCoordinator refuses first otherwise)
        import kwire as w
        with w.Conn.to(self.bootstrap) as c:
            r = c.request(15, 0, w.array([self.denied_group], w.string))
            r.i32()  # one group
            self.assertEqual(r.i16(), 30)  # GROUP_AUTHORIZATION_FAILED
            self.assertEqual(r.string(), self.denied_group)
            # OffsetFetch v3: DESCRIBE on the group; a refused group answers no topics
            r = c.request(9, 3, w.string(self.denied_group) + w.i32(-1))
            r.i32()  # throttle
            self.assertEqual(r.i32(), 0)  # topics
            self.assertEqual(r.i16(), 30)
        # DeleteGroups: DELETE, which DESCRIBE does not give
        from kafka.errors import GroupAuthorizationFailedError
        a = admin(self.bootstrap)
        try:
            self.assertEqual(len(a.describe_consumer_groups([self.desc_group])), 1)
            out = dict(a.delete_consumer_groups([self.desc_group]))
            self.assertTrue(is_error(out[self.desc_group], GroupAuthorizationFailedError), out)
        finally:
            a.close()

    def test_metadata(self):
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import AdminClient
        ac = AdminClient({"bootstrap.servers": self.bootstrap})
        md = ac.list_topics(timeout=10)
        self.assertIn(self.open_t, md.topics)
        self.assertIn(self.secret, md.topics)  # WRITE and READ denied, DESCRIBE allowed
        self.assertNotIn(self.hidden, md.topics)
        md = ac.list_topics(self.hidden, timeout=10)
        self.assertEqual(md.topics[self.hidden].error.code(),
                         KafkaError.TOPIC_AUTHORIZATION_FAILED)

    def test_topic_admin_apis(self):
        """CreatePartitions (ALTER), DescribeConfigs (DESCRIBE_CONFIGS), AlterConfigs
        (ALTER_CONFIGS) on a topic ACLs name without allowing them; an open topic is served."""
        from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions
        a = admin(self.bootstrap)
        try:
            from kafka.errors import TopicAuthorizationFailedError
            with self.assertRaises(TopicAuthorizationFailedError):
                a.create_partitions({self.secret: NewPartitions(2)})
            from kafka.admin import NewTopic
            free = self.unique("cfg")  # no ACL names it: open (allow.everyone.if.no.acl.found)
            a.create_topics([NewTopic(free, 1, 1)])
            # open_t's ACLs allow READ and WRITE, which do not imply DESCRIBE_CONFIGS
            res = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, self.secret),
                                      ConfigResource(ConfigResourceType.TOPIC, self.open_t),
                                      ConfigResource(ConfigResourceType.TOPIC, free)])
            errs = {x[3]: x[0] for resp in res for x in resp.resources}
            self.assertEqual(errs, {self.secret: 29, self.open_t: 29, free: 0})
            out = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, self.secret,
                                                  configs={"retention.ms": "1000"}),
                                   ConfigResource(ConfigResourceType.TOPIC, free,
                                                  configs={"retention.ms": "100000"})])
            self.assertEqual([x[0] for x in out.resources], [29, 0])
        finally:
            a.close()

    def test_create_topics(self):
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic
        ac = AdminClient({"bootstrap.servers": self.bootstrap})
        ok, no = self.unique("new"), "nocreate-" + self.unique("x")
        fs = ac.create_topics([NewTopic(ok, 1, 1), NewTopic(no, 1, 1)])
        fs[ok].result(30)
        with self.assertRaises(KafkaException) as e:
            fs[no].result(30)
        self.assertEqual(e.exception.args[0].code(), KafkaError.TOPIC_AUTHORIZATION_FAILED)


if __name__ == "__main__":
    harness.main()
