"""A broker keeps serving while it opens many partitions (issue 23).

One CreateTopics of PARTITIONS partitions makes the broker's shard open them all (create the
directory and files of each). The shard does it in slices and serves between them
(broker/adopt.h), so requests on a connection to the same shard are answered while the
creation is in flight: this asserts that ApiVersions answers arrive between the CreateTopics
request and its answer, that the broker logs the opening as more than one slice, and that every
partition is led and takes a record once the answer came. With one shard (SMP = 1) every
partition and every connection is on that shard. Timing targets are not asserted here: they are
bench/cluster_partitions.py's.

A stop that comes while the shard is still opening them (SIGTERM once the admin API shows some
of the partitions and not all) must still be clean. So that the stop cannot miss the middle on a
fast machine (the admin API's snapshot is a second old at most, and a fast disk opens 1,000
partitions in less: a CI failure), the disk is made slow first: POST /v1/debug/sync-delay (test
builds) makes each slice's syncfs return SLOW_SYNC_MS late, and at most two slices wait for
theirs (broker/adopt.h), so the opening takes seconds. The stop must be clean: the adoption in flight finishes (opening
nothing more) before any shard closes its logs, so no log is opened after the close and nothing
the adoption holds is left behind (the sanitizer build reports a leak as an abort, exit -6: this
was a CI failure), and the restarted broker has the whole topic, which the quorum had committed.
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import kclients as kc  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402

PARTITIONS = 600
STOP_PARTITIONS = 1000
CREATE_TIMEOUT = 120
SLOW_SYNC_MS = 1500


class AdoptManyTest(ServerTestCase):
    SMP = 1

    def test_serves_while_creating_many_partitions(self):
        from confluent_kafka import Producer
        from confluent_kafka.admin import NewTopic
        name = self.unique()
        a = kc.admin(self.bootstrap)
        done = threading.Event()
        result = {}

        def create():
            try:
                fs = a.create_topics([NewTopic(name, PARTITIONS, 1)],
                                     operation_timeout=CREATE_TIMEOUT,
                                     request_timeout=CREATE_TIMEOUT)
                fs[name].result(timeout=CREATE_TIMEOUT + 5)
                result["ok"] = True
            except Exception as e:  # reported by the assertion below
                result["error"] = e
            finally:
                result["answered"] = time.monotonic()
                done.set()

        # The connection is open (and its first answer in) before the creation starts.
        with kwire.Conn.to(self.bootstrap) as c:
            c.request(18, 0, b"").i16()
            answers = []
            t = threading.Thread(target=create, daemon=True)
            sent = time.monotonic()
            t.start()
            deadline = sent + CREATE_TIMEOUT + 10
            while not done.is_set() and time.monotonic() < deadline:
                err = c.request(18, 0, b"", timeout=CREATE_TIMEOUT).i16()
                self.assertEqual(err, 0)
                answers.append(time.monotonic())
                time.sleep(0.005)  # pacing of the probe, not a wait for a condition
            t.join(10)
        self.assertTrue(done.is_set(), "CreateTopics not answered in %ds" % CREATE_TIMEOUT)
        self.assertTrue(result.get("ok"), "CreateTopics failed: %r" % result.get("error"))
        during = [x for x in answers if x < result["answered"]]
        log = self.server.stderr_text()
        slices = [line for line in log.splitlines()
                  if "adopted: %d partition(s) opened in" % PARTITIONS in line]
        self.assertTrue(slices, "no adoption line for %d partitions in the log" % PARTITIONS)
        nslices = int(slices[-1].split(" opened in ")[1].split()[0])
        self.assertGreater(nslices, 1, slices[-1])
        # Served while it opened: answers between the request and its answer. With the opening
        # in one piece there are none past the first moments (the shard answers nothing until
        # it is done).
        self.assertGreaterEqual(len(during), 3,
                                "%d ApiVersions answers while %d partitions were opened in "
                                "%.2fs (%s)" % (len(during), PARTITIONS,
                                                result["answered"] - sent, slices[-1]))

        # Every partition is there, led, and takes a record.
        kc.wait_topic(self.bootstrap, name, PARTITIONS, a, timeout=60)
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5})
        acked = []
        for i in range(PARTITIONS):
            p.produce(name, value=b"v%d" % i, partition=i,
                      on_delivery=lambda err, m: acked.append(err))
            p.poll(0)
        wait_until(lambda: p.flush(0.5) == 0, 60, "every record acknowledged")
        self.assertEqual(len(acked), PARTITIONS)
        self.assertEqual([e for e in acked if e is not None], [])

    def test_stop_while_creating_many_partitions(self):
        from confluent_kafka.admin import NewTopic
        name = self.unique()
        a = kc.admin(self.bootstrap)
        s = self.server
        status, _, body = ac.http_get(s.admin_port, "/v1/debug/sync-delay?ms=%d" % SLOW_SYNC_MS,
                                      "POST")
        self.assertEqual(status, 200, body)
        a.create_topics([NewTopic(name, STOP_PARTITIONS, 1)], request_timeout=CREATE_TIMEOUT)

        def opened():
            ps = ac.get_json(s.admin_port, "/v1/partitions")["partitions"]
            # listed from the metadata; offsets once the owner shard has the partition open
            return len([p for p in ps if p["topic"] == name and p["log_end_offset"] is not None])
        seen = []
        deadline = time.monotonic() + CREATE_TIMEOUT
        while time.monotonic() < deadline:
            n = opened()
            seen.append(n)
            if 0 < n < STOP_PARTITIONS:
                break
            self.assertLess(n, STOP_PARTITIONS, "all %d partitions opened before the stop "
                            "could come in the middle (polls saw %s)" % (n, seen[-20:]))
            time.sleep(0.01)  # poll interval
        else:
            self.fail("no partition of %s opened in %ds" % (name, CREATE_TIMEOUT))
        s.stop()  # asserts exit 0 and no sanitizer report
        self.assertNotIn("still open at its end", s.stderr_text())
        s.start()
        kc.wait_topic(self.bootstrap, name, STOP_PARTITIONS, kc.admin(self.bootstrap), timeout=60)
        wait_until(lambda: opened() == STOP_PARTITIONS, 60,
                   "every partition of the topic open after the restart")


if __name__ == "__main__":
    unittest.main()
