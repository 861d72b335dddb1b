"""`strata txn list|describe|producers|abort` (issue 21) against a real broker: an ongoing
transaction of a confluent-kafka producer is listed and described with its partitions, a
partition's producers show where its transaction starts, and a hanging transaction (a producer
whose coordinator never heard of its partition: verification off, as on a broker before
KIP-890) is aborted by hand, which moves the last stable offset. Also: a refused connection
fails at once, an unknown transactional id is an error."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from admin_client import scrape  # noqa: E402
from harness import ServerTestCase, free_port, run_cmd  # noqa: E402
from test_txn_partition import list_latest, produce, txn_batch  # noqa: E402

CLI = os.environ.get("STRATA_CLI")


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class CliTxnTest(ServerTestCase):
    SMP = 2
    SETS = {"num.partitions": "1", "transaction.partition.verification.enable": "false"}

    def cli(self, *args, ok=True, timeout=30):
        r = run_cmd([CLI] + list(args) + ["-b", self.bootstrap, "--timeout", "15s"],
                    timeout=timeout)
        if ok:
            self.assertEqual(r.returncode, 0, "strata %s:\n%s%s" % (" ".join(args), r.stdout,
                                                                   r.stderr))
        return r

    def test_list_describe_producers_of_an_ongoing_transaction(self):
        from confluent_kafka import Producer
        topic = self.unique("clitx")
        txn_id = self.unique("clitx-id")
        self.cli("topic", "create", topic)
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": txn_id})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, value=b"open")
        self.assertEqual(p.flush(30), 0)
        try:
            out = self.cli("txn", "list").stdout
            row = [l.split() for l in out.splitlines() if l.startswith(txn_id)]
            self.assertEqual(len(row), 1, out)
            self.assertEqual(row[0][2], "Ongoing", out)
            out = self.cli("txn", "list", "--state", "CompleteCommit").stdout
            self.assertNotIn(txn_id, out)
            out = self.cli("txn", "describe", txn_id).stdout
            self.assertIn("state:            Ongoing", out)
            self.assertIn("%s-0" % topic, out)
            out = self.cli("txn", "producers", "--topic", topic, "--partition", "0").stdout
            rows = [l.split() for l in out.splitlines()[1:] if l.strip()]
            self.assertEqual(len(rows), 1, out)
            self.assertEqual(rows[0][-1], "0", out)  # its transaction starts at offset 0
        finally:
            p.commit_transaction(30)
        harness.wait_until(lambda: "CompleteCommit" in self.cli("txn", "describe", txn_id).stdout,
                           15, "the transaction completed")

    def test_abort_a_hanging_transaction(self):
        topic = self.unique("clihang")
        self.cli("topic", "create", topic)
        with kwire.Conn.to(self.bootstrap) as c:
            self.assertEqual(produce(c, topic, txn_batch(4242, 3, 0, [b"h1", b"h2"]), "ghost"),
                             (0, 0))
            self.assertEqual(list_latest(c, topic, 1), (0, 0))  # held at the hanging start

            # the hanging transaction is on /metrics (a dashboard shows it, and for how long)
            def part_metrics(want_open):
                m = scrape(self.server.admin_port)
                got = {n: m.value(n, topic=topic, partition=0) for n in (
                    "strata_partition_ongoing_transactions", "strata_partition_lso_lag",
                    "strata_partition_last_stable_offset",
                    "strata_partition_oldest_transaction_age_seconds")}
                ok = (got["strata_partition_ongoing_transactions"] == 1 and
                      got["strata_partition_oldest_transaction_age_seconds"] > 0
                      if want_open else
                      got["strata_partition_ongoing_transactions"] == 0)
                return got if ok else None
            got = harness.wait_until(lambda: part_metrics(True), 15, "the open transaction shown")
            self.assertEqual(got["strata_partition_last_stable_offset"], 0)
            self.assertEqual(got["strata_partition_lso_lag"], 2)
            # a group's lag: to the high watermark, and what read_committed can read (the LSO)
            from confluent_kafka import Consumer, TopicPartition
            group = self.unique("clihang-g")
            gc = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group})
            gc.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
            gc.close()

            def lags(want):
                m = scrape(self.server.admin_port)
                f = [m.find(n, group=group, topic=topic, partition=0) for n in (
                    "strata_group_lag", "strata_group_lag_read_committed")]
                got = tuple(x[0][1] for x in f if x)
                return got if got == want else None
            harness.wait_until(lambda: lags((2, 0)), 15, "lag 2 (HW), 0 (LSO) while it hangs")
            r = self.cli("txn", "abort", "--topic", topic, "--partition", "0",
                         "--start-offset", "7", ok=False)
            self.assertEqual(r.returncode, 1)
            self.assertIn("no open transaction starts at offset 7", r.stderr)
            out = self.cli("txn", "abort", "--topic", topic, "--partition", "0",
                           "--start-offset", "0").stdout
            self.assertIn("aborted producer 4242 (epoch 3)", out)
            self.assertEqual(list_latest(c, topic, 1), list_latest(c, topic, 0))
            self.assertEqual(list_latest(c, topic, 0), (0, 3))  # two records and the marker
            got = harness.wait_until(lambda: part_metrics(False), 15, "no open transaction shown")
            self.assertEqual(got["strata_partition_lso_lag"], 0)
            self.assertEqual(got["strata_partition_last_stable_offset"], 3)
            self.assertEqual(got["strata_partition_oldest_transaction_age_seconds"], 0)
            harness.wait_until(lambda: lags((3, 3)), 15, "lag 3 both ways once aborted")

    def test_errors(self):
        r = self.cli("txn", "describe", self.unique("nobody"), ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("TRANSACTIONAL_ID_NOT_FOUND", r.stderr)
        t0 = time.time()
        r = run_cmd([CLI, "txn", "list", "-b", "127.0.0.1:%d" % free_port(), "--timeout", "20s"],
                    timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Connection refused", r.stderr)
        self.assertLess(time.time() - t0, 10, "a refused connection must not wait the timeout")


if __name__ == "__main__":
    harness.main()
