"""test_data_dir_lock.py — a data directory belongs to one strata-server at a time (issue 19):
a second broker started on a live log.dirs is refused with one line before it reads or writes
anything, the first keeps serving, and once the first has stopped the directory opens again
with everything the first wrote.
"""
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

from confluent_kafka import Consumer, Producer  # noqa: E402


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for v in values:
        p.produce(topic, v.encode())
    assert p.flush(30) == 0, "records not delivered within 30 s"


def consume_all(bootstrap, topic, n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lock-check",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


class DataDirLockTest(unittest.TestCase):
    def test_second_broker_refused(self):
        a = harness.Server(smp=1)
        a.start()
        try:
            produce(a.bootstrap, "locked", ["one", "two"])
            listing = sorted(os.listdir(a.data_dir))
            b = harness.Server(smp=1, data_dir=a.data_dir, name="second")
            b.port, b.admin_port = harness.free_port(), harness.free_port()
            r = subprocess.run(b.command(), stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=30, env=harness.sanitizer_env(dict(os.environ)))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("is in use by another process", r.stderr)
            self.assertIn(".lock", r.stderr)
            self.assertEqual(sorted(os.listdir(a.data_dir)), listing,
                             "the refused broker changed the data directory")
            produce(a.bootstrap, "locked", ["three"])
            self.assertEqual(consume_all(a.bootstrap, "locked", 3), ["one", "two", "three"])
        finally:
            a.stop()
        # the lock went with the first process: the directory opens again, records kept
        c = harness.Server(smp=1, data_dir=a.data_dir, name="after")
        c.start()
        try:
            self.assertEqual(consume_all(c.bootstrap, "locked", 3), ["one", "two", "three"])
        finally:
            c.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
