"""Protocol logging (issue 26): the decoded requests and responses of the connections a filter
picks, one JSON line each in the broker's log — from the start (`log.protocol`) or live for N
seconds through the admin API (POST /v1/protocol-log) — and nothing of the others'."""

import http.client
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402

TOPIC = "protolog"


def protocol_lines(text):
    """Every 'protocol {...}' line of a log, parsed (each must be one JSON object)."""
    out = []
    for ln in text.splitlines():
        i = ln.find(" protocol {")
        if i >= 0:
            out.append(json.loads(ln[i + len(" protocol "):]))
    return out


def post(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("POST", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def produce(bootstrap, client_id, n):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all"})
    acked = []
    for i in range(n):
        p.produce(TOPIC, value=b"v%d" % i, key=b"k", on_delivery=lambda e, m: acked.append(e))
    p.flush(20)
    return acked


class ProtocolLogTest(ServerTestCase):
    SMP = 2
    SETS = {"log.protocol": "client.id=logged-app"}

    @classmethod
    def setUpClass(cls):
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            raise unittest.SkipTest("confluent-kafka is missing")
        super().setUpClass()

    def test_1_setting_logs_one_client(self):
        self.assertEqual(produce(self.bootstrap, "other-app", 3), [None] * 3)
        self.assertEqual(produce(self.bootstrap, "logged-app", 3), [None] * 3)

        def lines():
            return [x for x in protocol_lines(self.server.stderr_text())
                    if x["client"] == "logged-app"]
        wait_until(lambda: any(x["api"] == "Produce" and x["dir"] == "response"
                               for x in lines()), 10, "the logged client's Produce answer")
        got = protocol_lines(self.server.stderr_text())
        self.assertEqual({x["client"] for x in got}, {"logged-app"}, "only the picked client")
        apis = {(x["api"], x["dir"]) for x in got}
        for api in ("ApiVersions", "Metadata", "Produce"):
            self.assertIn((api, "request"), apis)
            self.assertIn((api, "response"), apis)
        for x in got:
            self.assertEqual(x["listener"], "PLAINTEXT")
            self.assertEqual(x["principal"], "User:ANONYMOUS")
            self.assertTrue(x["peer"].startswith("127.0.0.1:"), x)
        # A request and its response share the correlation id; the body has the fields.
        reqs = [x for x in got if x["api"] == "Produce" and x["dir"] == "request"]
        resps = {x["corr"]: x for x in got if x["api"] == "Produce" and x["dir"] == "response"}
        self.assertTrue(reqs)
        for q in reqs:
            self.assertIn(q["corr"], resps)
            self.assertEqual(q["body"]["acks"], -1)
            self.assertEqual(q["body"]["topic_data"][0]["name"], TOPIC)
            a = resps[q["corr"]]
            self.assertGreaterEqual(a["ms"], 0)
            self.assertGreater(a["bytes"], 0)
            self.assertEqual(a["body"]["responses"][0]["partition_responses"][0]["error_code"],
                             0)

    def test_2_live_through_the_admin_api(self):
        port = self.server.admin_port
        self.assertEqual(post(port, "/v1/protocol-log?client_id=live-app&seconds=0")[0], 400)
        self.assertEqual(post(port, "/v1/protocol-log?seconds=soon")[0], 400)
        status, body = post(port, "/v1/protocol-log?client_id=live-app&seconds=3")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body), {"logging": True, "seconds": 3,
                                            "client_id": "live-app", "address": None})
        self.assertEqual(produce(self.bootstrap, "live-app", 2), [None] * 2)
        wait_until(lambda: any(x["client"] == "live-app" and x["api"] == "Produce"
                               for x in protocol_lines(self.server.stderr_text())), 10,
                   "the live-picked client logged")
        # The live filter replaced the setting's: the setting's client is not logged now.
        before = len([x for x in protocol_lines(self.server.stderr_text())
                      if x["client"] == "logged-app"])
        self.assertEqual(produce(self.bootstrap, "logged-app", 1), [None])
        self.assertEqual(len([x for x in protocol_lines(self.server.stderr_text())
                              if x["client"] == "logged-app"]), before)

        # Once its seconds are over, nothing more is logged for it.
        def expired():
            n = len(protocol_lines(self.server.stderr_text()))
            produce(self.bootstrap, "live-app", 1)
            return len(protocol_lines(self.server.stderr_text())) == n
        wait_until(expired, 15, "the live filter to expire")


if __name__ == "__main__":
    harness.main()
