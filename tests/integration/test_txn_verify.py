"""KIP-890 part 1 (issue 21): a transaction's first batch on a partition is appended only once
the transaction coordinator confirms the partition is in the transaction, so a stray or late
batch cannot open a transaction nobody will end (a hanging transaction holds the last stable
offset back for ever).

Over the raw wire, one broker (coordinator and partition leader both), a producer that follows
the protocol by hand: InitProducerId with a transactional id, Produce before and after
AddPartitionsToTxn, EndTxn, a new incarnation. Checks the Produce errors Kafka answers
(INVALID_TXN_STATE for a partition not in the transaction, INVALID_PRODUCER_EPOCH for a fenced
producer) and that nothing refused was written (the log end does not move)."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from kwire import array, i16, i32, i64, i8, string  # noqa: E402
import test_txn_partition  # noqa: E402
from test_txn_partition import produce, txn_batch  # noqa: E402

NOT_ENOUGH_REPLICAS = 19
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
RETRIABLE = {14, 15, 16, 51}  # load in progress, not available, not coordinator, concurrent


def list_latest(c, topic, isolation):
    """The latest offset of partition 0 at the isolation level (1: the LSO)."""
    err, offset = test_txn_partition.list_latest(c, topic, isolation)
    assert err == 0, err
    return offset


def retry(call, what, timeout=20):
    """call() until it answers something but a retriable error; returns that answer."""
    deadline = time.time() + timeout
    while True:
        out = call()
        err = out[0] if isinstance(out, tuple) else out
        if err not in RETRIABLE and err != NOT_ENOUGH_REPLICAS:
            return out
        if time.time() > deadline:
            raise AssertionError("%s: still error %d after %ds" % (what, err, timeout))
        time.sleep(0.05)


def find_coordinator(c, txn_id):
    """FindCoordinator v1, key type 1 (creates __transaction_state on first use): its error."""
    r = c.request(10, 1, string(txn_id) + i8(1), timeout=15)
    r.i32()
    return r.i16()


def init_producer_id(c, txn_id):
    """InitProducerId v1: (error, producer id, epoch)."""
    r = c.request(22, 1, string(txn_id) + i32(60000), timeout=15)
    r.i32()
    return r.i16(), r.i64(), r.i16()


def add_partitions(c, txn_id, pid, epoch, topic, partition=0):
    """AddPartitionsToTxn v1 for one partition: its error."""
    body = (string(txn_id) + i64(pid) + i16(epoch)
            + array([topic], lambda t: string(t) + array([partition], i32)))
    r = c.request(24, 1, body, timeout=15)
    r.i32()
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    return r.i16()


def end_txn(c, txn_id, pid, epoch, commit):
    r = c.request(26, 1, string(txn_id) + i64(pid) + i16(epoch) + i8(1 if commit else 0),
                  timeout=15)
    r.i32()
    return r.i16()


class TxnVerifyTest(ServerTestCase):
    SMP = 2
    SETS = {"num.partitions": "1"}

    def test_first_batch_needs_the_coordinator(self):
        topic = self.unique("txv")
        txn_id = self.unique("txv-id")
        with kwire.Conn.to(self.bootstrap) as c:
            harness.wait_until(
                lambda: kwire.metadata(c, 12, [topic], auto_create=True)["topics"][0]["error"] == 0,
                15, "topic %s created" % topic)
            self.assertEqual(retry(lambda: find_coordinator(c, txn_id), "FindCoordinator"), 0)
            err, pid, epoch = retry(lambda: init_producer_id(c, txn_id), "InitProducerId")
            self.assertEqual(err, 0)

            # not added to the transaction: refused, nothing written
            err, _ = retry(lambda: produce(c, topic, txn_batch(pid, epoch, 0, [b"stray"]),
                                           txn_id), "stray produce")
            self.assertEqual(err, INVALID_TXN_STATE)
            self.assertEqual(list_latest(c, topic, 0), 0)

            # added: the first batch goes in, and the next one needs no new word
            self.assertEqual(retry(lambda: add_partitions(c, txn_id, pid, epoch, topic),
                                   "AddPartitionsToTxn"), 0)
            self.assertEqual(produce(c, topic, txn_batch(pid, epoch, 0, [b"a", b"b"]), txn_id),
                             (0, 0))
            self.assertEqual(produce(c, topic, txn_batch(pid, epoch, 2, [b"c"]), txn_id), (0, 2))
            self.assertEqual(list_latest(c, topic, 1), 0)  # LSO held by the open transaction

            # aborted: the marker ends it, and a batch after it opens nothing on its own
            self.assertEqual(retry(lambda: end_txn(c, txn_id, pid, epoch, False), "EndTxn"), 0)
            harness.wait_until(lambda: list_latest(c, topic, 1) == list_latest(c, topic, 0), 15,
                               "the ABORT marker written (LSO = HW)")
            end = list_latest(c, topic, 0)
            err, _ = retry(lambda: produce(c, topic, txn_batch(pid, epoch, 3, [b"late"]), txn_id),
                           "late produce")
            self.assertEqual(err, INVALID_TXN_STATE)
            self.assertEqual(list_latest(c, topic, 0), end)

            # a new incarnation fences the old epoch's first batches
            err, pid2, epoch2 = retry(lambda: init_producer_id(c, txn_id), "InitProducerId again")
            self.assertEqual((err, pid2), (0, pid))
            self.assertGreater(epoch2, epoch)
            err, _ = retry(lambda: produce(c, topic, txn_batch(pid, epoch, 4, [b"zombie"]),
                                           txn_id), "zombie produce")
            self.assertEqual(err, INVALID_PRODUCER_EPOCH)
            self.assertEqual(list_latest(c, topic, 0), end)


if __name__ == "__main__":
    harness.main()
