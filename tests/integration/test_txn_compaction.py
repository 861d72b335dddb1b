"""Compaction of a topic with transactions (issue 21), Kafka's rules.

A compacted topic (small segments, min.cleanable.dirty.ratio 0.01) gets ROUNDS rounds of: a
committed transaction writing every key, then an aborted one writing every key again (so the
newest record of each key in the log is an aborted one), then plain records of another key
until the segment rolls. After the cleaner ran:

  - read_committed (and read_uncommitted: nothing aborted is left to see) reads exactly the
    latest committed value of each key: an aborted record is never taken as a key's latest;
  - `strata debug dump-log --records` finds no record of an aborted transaction in any segment
    (the cleaner removes them), and every control batch still there (delete.retention.ms has
    not passed: a marker stays).

With delete.retention.ms small, a later clean removes the markers whose transactions have no
record left (the ABORT markers, and the COMMIT markers of transactions compacted away), and
keeps the COMMIT marker of the transaction whose records are the keys' latest, and the last
ABORT marker: as Kafka's cleaner does, the last batch of a producer still active is kept (its
records gone) for the producer's state, and an abort marker stays while a batch of its
transaction does.
"""

import glob
import os
import re
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE if os.path.exists(os.path.join(HERE, "harness.py"))
                else os.path.dirname(HERE))
import harness  # noqa: E402
import kclients as kc  # noqa: E402
import txnlib  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402
from test_compaction import cleaner  # noqa: E402

ROUNDS = 4
KEYS = 20
SEGMENT = 16384
COMPACT = {"cleanup.policy": "compact", "internal.segment.bytes": str(SEGMENT),
           "min.cleanable.dirty.ratio": "0.01"}
CLI = os.environ.get("STRATA_CLI") or next(
    (p for p in (os.path.join(harness.SRC, b, "strata") for b in ("build-dev", "build-test",
                                                                   "build"))
     if os.access(p, os.X_OK)), None)
BATCH_RE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) .* producerId: (-?\d+) .*"
                      r"transactional: (true|false) control: (true|false)$")
RECORD_RE = re.compile(r'^  \| offset: (\d+) .* key: (null|"(?:[^"\\]|\\.)*") value: '
                       r'(null|"(?:[^"\\]|\\.)*")$')


def dump_log(data_dir, topic):
    """Every batch of partition 0's segments as `strata debug dump-log --records` prints them:
    [dict(base, last, pid, transactional, control, records=[(offset, key, value)])], keys and
    values as printed (quoted, escaped)."""
    out = []
    for f in sorted(glob.glob(os.path.join(data_dir, "%s-0" % topic, "*.log"))):
        r = subprocess.run([CLI, "debug", "dump-log", f, "--records"], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("dump-log %s: %s%s" % (f, r.stdout[-2000:], r.stderr))
        for line in r.stdout.splitlines():
            m = BATCH_RE.match(line)
            if m:
                out.append({"base": int(m.group(1)), "last": int(m.group(2)),
                            "pid": int(m.group(3)), "transactional": m.group(4) == "true",
                            "control": m.group(5) == "true", "records": [], "file": f})
                continue
            m = RECORD_RE.match(line)
            if m:
                out[-1]["records"].append((int(m.group(1)), m.group(2), m.group(3)))
    return out


def marker_type(batch):
    """"commit" or "abort" from a control batch's record key (version 0, type 1 or 0)."""
    key = batch["records"][0][1]
    return {'"\\x00\\x00\\x00\\x01"': "commit", '"\\x00\\x00\\x00\\x00"': "abort"}[key]


@unittest.skipUnless(CLI, "the strata tool is not built (STRATA_CLI)")
class TxnCompactionTest(ServerTestCase):
    SMP = 2
    SETS = {"transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "5"}

    def write_rounds(self, topic):
        """ROUNDS rounds of (committed txn over every key, aborted txn over every key, plain
        filler of key "roll" until the segment rolls). Returns {key: latest committed value}."""
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bootstrap, "client.id": "it-cmp-txn",
                      "transactional.id": self.unique("tid"), "linger.ms": 5,
                      "batch.size": 4096})
        p.init_transactions(30)
        plain = kc.producer(self.bootstrap, client_id="it-cmp-plain", batch_size=4096)
        latest = {}
        pad = b"." * 300
        for r in range(ROUNDS):
            for kind in ("c", "a"):
                p.begin_transaction()
                for i in range(KEYS):
                    p.produce(topic, key=b"k%02d" % i, value=b"%s%d-%02d" % (kind.encode(), r, i)
                              + pad, partition=0)
                    if kind == "c":
                        latest[b"k%02d" % i] = b"c%d-%02d" % (r, i) + pad
                if kind == "c":
                    p.commit_transaction(30)
                else:
                    self.assertEqual(p.flush(30), 0)
                    p.abort_transaction(30)
            # Enough plain records to close the segment holding this round.
            kc.produce_all(plain, topic, [{"key": b"roll", "value": b"r%d-%03d" % (r, j) + pad * 3,
                                           "partition": 0} for j in range(SEGMENT // 900 + 2)])
            latest[b"roll"] = b"r%d-%03d" % (r, SEGMENT // 900 + 1) + pad * 3
        return latest

    def wait_clean(self, topic, after=0):
        def done():
            c = cleaner(self.server, topic)
            return c if c and c["cleans"] > after and not c["in_progress"] else None
        return wait_until(done, 60, "a clean of %s (more than %d)" % (topic, after))

    def check_reads(self, topic, latest):
        for iso in ("read_committed", "read_uncommitted"):
            got = txnlib.read_topic(self.bootstrap, topic, 1, iso)
            last = {}
            for _, off, k, v in got:
                last[k] = v
            self.assertEqual(last, latest, "%s: each key's last value" % iso)
            aborted = [(off, k, v[:8]) for _, off, k, v in got if v.startswith(b"a")]
            self.assertEqual(aborted, [], "%s sees aborted records after cleaning" % iso)

    def test_aborted_records_removed_markers_kept(self):
        topic = self.unique("tcmp")
        kc.create_topic(self.bootstrap, topic, 1, config=COMPACT)
        latest = self.write_rounds(topic)
        lso, hw = txnlib.lso_and_hw(self.bootstrap, topic)
        self.assertEqual(lso, hw, "no transaction open")
        # The cleaner ran over the closed segments, which hold every transaction.
        wait_until(lambda: (cleaner(self.server, topic) or {}).get("dirty_ratio") == 0
                   and cleaner(self.server, topic)["cleans"] > 0
                   and not cleaner(self.server, topic)["in_progress"], 60,
                   "%s cleaned, nothing dirty" % topic)
        self.check_reads(topic, latest)
        batches = dump_log(self.server.data_dir, topic)
        aborted_left = [(b["base"], rec[0], rec[2][:10]) for b in batches if not b["control"]
                        for rec in b["records"] if rec[2].startswith('"a')]
        self.assertEqual(aborted_left, [], "records of aborted transactions left in the log")
        markers = [marker_type(b) for b in batches if b["control"]]
        self.assertEqual(sorted(markers), sorted(["commit", "abort"] * ROUNDS),
                         "markers before delete.retention.ms passed")
        # Only the last round's committed records remain of the transactional keys.
        txn_vals = sorted(rec[2][1:4] for b in batches if b["transactional"] and not b["control"]
                          for rec in b["records"])
        self.assertEqual(set(txn_vals), {"c%d-" % (ROUNDS - 1)})

    def test_markers_removed_after_delete_retention(self):
        topic = self.unique("tcmpm")
        kc.create_topic(self.bootstrap, topic, 1, config=dict(COMPACT, **{
            "delete.retention.ms": "300"}))
        latest = self.write_rounds(topic)
        st = self.wait_clean(topic)
        # Later cleans (the delete horizon of the emptied transactions has passed): more plain
        # records make the log dirty again.
        plain = kc.producer(self.bootstrap, client_id="it-cmp-plain", batch_size=4096)
        deadline = time.monotonic() + 60

        def markers():
            return [(b["base"], marker_type(b)) for b in dump_log(self.server.data_dir, topic)
                    if b["control"]]
        j = 0
        while True:
            ms = markers()
            if [t for _, t in ms] == ["commit", "abort"]:
                break
            self.assertLess(time.monotonic(), deadline, "markers left: %s" % ms)
            kc.produce_all(plain, topic, [{"key": b"roll", "value": b"x%05d" % (j + i) + b"." * 900,
                                           "partition": 0} for i in range(SEGMENT // 900 + 2)])
            latest[b"roll"] = b"x%05d" % (j + SEGMENT // 900 + 1) + b"." * 900
            j += SEGMENT // 900 + 2
            st = self.wait_clean(topic, st["cleans"])
        self.check_reads(topic, latest)


if __name__ == "__main__":
    harness.main()
