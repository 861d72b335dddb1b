"""Security end to end (issue 22): one broker whose only Kafka listener is SASL_SSL (TLS with a
certificate made by the test's own CA, SCRAM and PLAIN users from sasl.bootstrap.users), with
ACLs on (authorizer.class.name, super.users=User:admin). The walk-through of docs/security.md,
as users run it:

  - admin (a super user) creates a topic and ACLs with the admin clients over SASL_SSL;
  - alice, allowed WRITE and READ on the topic and READ on her group, produces with an
    idempotent acks=all producer and reads every record back in her consumer group;
  - bob, authenticated but named by no ACL, is refused TOPIC_AUTHORIZATION_FAILED for the same
    topic, and the authorizer's log names him;
  - a wrong password is an authentication failure, and a client that speaks plaintext to the
    TLS port gets nothing: the broker has no plaintext port at all.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Server  # noqa: E402
from test_tls import Pki  # noqa: E402

USERS = {"admin": ("SCRAM-SHA-512", "admin-secret"), "alice": ("SCRAM-SHA-256", "alice-pw"),
         "bob": ("SCRAM-SHA-512", "bob-pw")}


class SaslSslServer(Server):
    """A Server whose one Kafka listener (its usual port) is SASL_SSL."""

    def command(self):
        ls = "SASL_SSL://%s:%d" % (self.host, self.port)
        self.sets["listeners"] = ls
        self.sets["advertised.listeners"] = ls
        return super().command()


def conf(srv, ca, user, password=None, mech=None, **extra):
    m, pw = USERS[user]
    c = {"bootstrap.servers": srv.bootstrap, "security.protocol": "SASL_SSL",
         "ssl.ca.location": ca, "sasl.mechanism": mech or m, "sasl.username": user,
         "sasl.password": password or pw}
    c.update(extra)
    return c


@unittest.skipUnless(shutil.which("openssl"), "the openssl CLI is needed (scripts/deps.sh test)")
class SecurityTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="strata-it-security-")
        cls.pki = Pki(cls.tmp)
        _, _, keystore = cls.pki.issue("server", "/CN=localhost")
        boot = ",".join("%s:%s:%s" % (u, m, p) for u, (m, p) in USERS.items())
        cls.srv = SaslSslServer(name="security", sets={
            "ssl.keystore.location": keystore, "sasl.bootstrap.users": boot,
            # the broker's own client (transaction markers, over this listener) logs in as admin
            "ssl.truststore.location": cls.pki.ca,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                'org.apache.kafka.common.security.scram.ScramLoginModule required '
                'username="admin" password="%s";' % USERS["admin"][1],
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin", "num.partitions": "2"})
        try:
            cls.srv.start()
        except BaseException:
            cls.srv.close()
            raise
        cls.topic = "orders-%d" % os.getpid()
        cls.group = "billing-%d" % os.getpid()
        from confluent_kafka.admin import AdminClient, NewTopic
        ac = AdminClient(conf(cls.srv, cls.pki.ca, "admin"))
        ac.create_topics([NewTopic(cls.topic, 2, 1)])[cls.topic].result(30)
        from kafka.admin import (KafkaAdminClient, ACL, ACLOperation, ACLPermissionType,
                                 ACLResourcePatternType, ResourcePattern, ResourceType)
        m, pw = USERS["admin"]
        ka = KafkaAdminClient(bootstrap_servers=cls.srv.bootstrap, security_protocol="SASL_SSL",
                              ssl_cafile=cls.pki.ca, sasl_mechanism=m,
                              sasl_plain_username="admin", sasl_plain_password=pw,
                              request_timeout_ms=15000)
        try:
            def allow(op, rtype, name, pattern=ACLResourcePatternType.LITERAL):
                return ACL("User:alice", "*", op, ACLPermissionType.ALLOW,
                           ResourcePattern(rtype, name, pattern))
            res = ka.create_acls([
                allow(ACLOperation.WRITE, ResourceType.TOPIC, cls.topic),
                allow(ACLOperation.READ, ResourceType.TOPIC, cls.topic),
                allow(ACLOperation.READ, ResourceType.GROUP, "billing-",
                      ACLResourcePatternType.PREFIXED)])
            assert res["failed"] == [], res
        finally:
            ka.close()

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.srv.alive():
                cls.srv.stop()
        finally:
            cls.srv.close()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def produce(self, user, n, **kw):
        from confluent_kafka import Producer
        p = Producer(conf(self.srv, self.pki.ca, user, **kw, **{
            "enable.idempotence": True, "acks": "all", "message.timeout.ms": 15000}))
        errs = []
        for i in range(n):
            p.produce(self.topic, b"%s-%d" % (user.encode(), i), partition=i % 2,
                      on_delivery=lambda e, m: errs.append(e))
        p.flush(30)
        self.assertEqual(len(errs), n)
        return errs

    def test_allowed_user_produces_and_consumes(self):
        from confluent_kafka import Consumer
        self.assertEqual(self.produce("alice", 50), [None] * 50)
        c = Consumer(conf(self.srv, self.pki.ca, "alice", **{
            "group.id": self.group, "auto.offset.reset": "earliest"}))
        c.subscribe([self.topic])
        got = set()
        deadline = time.monotonic() + 30
        try:
            while len(got) < 50 and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                self.assertIsNone(m.error(), m.error())
                got.add(m.value())
            c.commit(asynchronous=False)
        finally:
            c.close()
        self.assertEqual(got, {b"alice-%d" % i for i in range(50)})

    def kadmin(self, user):
        from kafka.admin import KafkaAdminClient
        m, pw = USERS[user]
        return KafkaAdminClient(bootstrap_servers=self.srv.bootstrap, security_protocol="SASL_SSL",
                                ssl_cafile=self.pki.ca, sasl_mechanism=m,
                                sasl_plain_username=user, sasl_plain_password=pw,
                                request_timeout_ms=15000)

    def test_list_groups(self):
        """ListGroups shows a principal only the groups it may describe (after alice's group
        exists: test_allowed_user_produces_and_consumes runs first)."""
        names = {}
        for user in ("admin", "alice", "bob"):
            a = self.kadmin(user)
            try:
                names[user] = {g for g, _ in a.list_consumer_groups()}
            finally:
                a.close()
        self.assertIn(self.group, names["admin"])
        self.assertIn(self.group, names["alice"])  # READ on billing-* implies DESCRIBE
        self.assertNotIn(self.group, names["bob"])

    def test_other_user_refused(self):
        from confluent_kafka import KafkaError
        errs = self.produce("bob", 3)
        self.assertTrue(all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                            for e in errs), errs)
        self.assertIn("Principal = User:bob is Denied operation = Describe",
                      self.srv.stderr_text())

    def test_wrong_password_and_plaintext_refused(self):
        from confluent_kafka import KafkaError, Producer
        errs = []
        p = Producer(conf(self.srv, self.pki.ca, "alice", password="wrong",
                          error_cb=lambda e: errs.append(e)))
        deadline = time.monotonic() + 20
        while not errs and time.monotonic() < deadline:
            p.poll(0.2)
        self.assertTrue(any(e.code() == KafkaError._AUTHENTICATION for e in errs), errs)
        self.assertIn("invalid credentials", str(errs[0]))
        # kcat over plaintext to the TLS port: no answer, a clean failure, the broker lives on
        r = subprocess.run(["kcat", "-L", "-b", self.srv.bootstrap, "-m", "3"],
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue(self.srv.alive())


if __name__ == "__main__":
    harness.main()
