"""Power loss between PrepareCommit and the markers (issue 21): the commit completes after the
restart.

No hook in the broker cuts it at that point; the network does. One broker, its log.dirs on a
dropfs mount (tests/tools/dropfs.c, as test_powerloss.py uses it), a fault proxy
(tests/tools/faultproxy.py) in front of its Kafka listener, and the proxy's address advertised:
every client reaches the broker through the proxy, and so does the transaction coordinator's
own WriteTxnMarkers to the partitions' leader (this same broker, over its advertised listener,
as Kafka sends markers to itself). The test's clients have client ids starting "it-"; the
proxy drops the traffic of every other connection (skip="^it-"), i.e. the markers.

Then: a transactional producer writes records to two partitions and commits. EndTxn is answered
once PrepareCommit is durable (Kafka answers before the markers are written); the markers
cannot arrive: DescribeTransactions says PrepareCommit, the partitions' LSO stays below the high
watermark and a read_committed reader sees nothing. Power cut now (SIGSTOP, dropfs cut, kill
-9, remount), the proxy healed, the broker restarted: the coordinator loads PrepareCommit from
__transaction_state and writes the markers again; the LSO reaches the high watermark on both
partitions, read_committed sees every record and DescribeTransactions says CompleteCommit.

Exits 77 (skipped) where dropfs cannot be mounted, as test_powerloss.py does.
"""

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT_IT = HERE if os.path.exists(os.path.join(HERE, "harness.py")) else os.path.dirname(HERE)
sys.path.insert(0, ROOT_IT)
sys.path.insert(0, os.path.join(os.path.dirname(ROOT_IT), "tools"))
import faultproxy  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import test_powerloss as pl  # noqa: E402
import txnlib  # noqa: E402
from harness import Server, wait_until  # noqa: E402

RECORDS = 10


class TxnPowerLossTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()
        self.tmp = tempfile.mkdtemp(prefix="strata-it-txn-powerloss-")
        backing, mnt = os.path.join(self.tmp, "backing"), os.path.join(self.tmp, "mnt")
        os.makedirs(backing)
        os.makedirs(mnt)
        self.fs = pl.DropFS(backing, mnt, os.path.join(self.tmp, "dropfs.log"))
        self.server = Server(smp=2, data_dir=mnt, name="txn-powerloss", sets={
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "3",
            "auto.create.topics.enable": "false"})
        # Ports fixed before the start so the proxy and advertised.listeners can name them.
        self.server.port = harness.free_port()
        self.server.admin_port = harness.free_port()
        self.proxy = faultproxy.FaultProxy(("127.0.0.1", self.server.port),
                                           name="faultproxy-txn").start()
        self.server.sets["advertised.listeners"] = "PLAINTEXT://127.0.0.1:%d" % self.proxy.port
        self.fs.mount()

    def tearDown(self):
        try:
            if self.server.alive():
                if self.server.proc is not None:
                    try:
                        os.kill(self.server.proc.pid, signal.SIGCONT)
                    except OSError:
                        pass
                self.server.stop()
        finally:
            self.server.close()
            self.proxy.close()
            try:
                if self.fs.proc is not None:
                    self.fs.unmount()
            finally:
                self.fs.close()
                if not os.environ.get("STRATA_IT_KEEP"):
                    shutil.rmtree(self.tmp, ignore_errors=True)

    def test_commit_completes_after_power_loss_before_markers(self):
        from confluent_kafka import Producer
        direct = self.server.bootstrap            # the real listener, not the proxy
        self.server.start()
        topic, tid = "txn-pl", "txn-pl-tid"
        kc.create_topic("127.0.0.1:%d" % self.proxy.port, topic, 2)
        p = Producer({"bootstrap.servers": "127.0.0.1:%d" % self.proxy.port,
                      "client.id": "it-txn-pl", "transactional.id": tid, "linger.ms": 0,
                      "transaction.timeout.ms": 60000})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(RECORDS):
            p.produce(topic, value=b"v%d" % i, partition=i % 2)
        self.assertEqual(p.flush(30), 0)
        # From here on, only the test's own connections get through: the coordinator's markers
        # (to this broker's advertised listener) are dropped.
        self.proxy.set(drop="both", skip="^it-")
        done = {}

        def commit():
            try:
                p.commit_transaction(30)
                done["ok"] = True
            except Exception as e:   # reported below
                done["error"] = e
        th = threading.Thread(target=commit, daemon=True)
        th.start()
        th.join(35)
        self.assertEqual(done, {"ok": True}, "EndTxn(commit) not answered while the markers "
                         "cannot be written (Kafka answers once PrepareCommit is durable)")
        d = txnlib.describe_transactions(direct, [tid])[tid]
        self.assertEqual(d["state"], "PrepareCommit", d)
        for q in range(2):
            lso, hw = txnlib.lso_and_hw(direct, topic, q)
            self.assertEqual((lso, hw), (0, RECORDS // 2), "partition %d before the cut" % q)
        # Power cut.
        os.kill(self.server.proc.pid, signal.SIGSTOP)
        st = self.fs.cut()
        self.server.kill9()
        self.fs.unmount()
        self.fs.mount()
        self.proxy.heal()
        self.proxy.reset()
        t0 = time.monotonic()
        self.server.start()
        wait_until(lambda: all(txnlib.lso_and_hw(direct, topic, q) == (RECORDS // 2 + 1,) * 2
                               for q in range(2)), 30,
                   "the COMMIT marker on both partitions after the restart")
        took = time.monotonic() - t0
        got = txnlib.read_topic("127.0.0.1:%d" % self.proxy.port, topic, 2, "read_committed")
        self.assertEqual(sorted(v for _, _, _, v in got), sorted(b"v%d" % i
                                                                for i in range(RECORDS)))
        d = txnlib.describe_transactions(direct, [tid])[tid]
        self.assertEqual(d["state"], "CompleteCommit", d)
        print("power cut in PrepareCommit (dropfs dropped %d bytes, undid %d directory changes); "
              "the commit completed %.1fs after the restart" % (
                  st["last_dropped_bytes"], st["last_undone_dirops"], took))
        self.assertEqual(st["undo_errors"], 0)
        self.server.stop()


if __name__ == "__main__":
    why = pl.skip_reason()
    if why:
        print("SKIP: %s" % why)
        print("0 passed, 0 failed, 1 skipped", flush=True)
        sys.exit(pl.SKIP)
    harness.main()
