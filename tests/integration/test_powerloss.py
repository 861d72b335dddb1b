"""Power loss (issue 10): an acknowledged record survives a power cut, not just a kill -9.

A kill -9 leaves the page cache in place, so it cannot catch a missing fsync. Here the broker's
log.dirs is a dropfs mount (tests/tools/dropfs.c): a FUSE pass-through file system that, on
command, drops every byte written since its file's last fsync/fdatasync and undoes every
create/mkdir/rename/unlink/rmdir not followed by an fsync of its directory, as a power cut
would.

The scenario: topics with several partitions and small segments (so segments roll and new
files appear), an acks=all producer recording every acknowledged record, and a few rounds of:
produce, kill -9 the broker mid-load, cut the power (drop what is not durable), unmount and
mount again (fresh kernel caches), restart the broker, and check every acknowledged record is
still there at its offset, exactly once. Each round also creates a new topic. Each cut must
have dropped something (dropfs's own counters), or the round proves nothing.

    test_powerloss.py [--caching]      (or STRATA_POWERLOSS_CACHING=1)

--caching runs the same scenario with write.caching=true and a one-hour flush interval: the
broker then acknowledges before syncing, and the test must fail (acknowledged records lost),
which shows it can.

Exits 77 (CTest's skip) when /dev/fuse, fusermount3 or the dropfs binary is missing, or when
mounting is not permitted here. Environment: STRATA_DROPFS, the dropfs binary (set by CTest).
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
import kclients as kc  # noqa: E402
from harness import Server, wait_until  # noqa: E402

SKIP = 77
CACHING = os.environ.get("STRATA_POWERLOSS_CACHING") == "1"
if "--caching" in sys.argv:
    sys.argv.remove("--caching")
    CACHING = True

CUTS = 4                  # power cuts in the scenario
ROUND_RECORDS = 3000      # acknowledged records to reach in each round before the cut
ROUND_SECONDS = 6.0       # ... or this long, whichever comes first
SEGMENT_BYTES = 16384     # small segments: several rolls per partition per round
TEST_BUDGET = 55.0        # seconds for the whole scenario


def dropfs_binary():
    p = os.environ.get("STRATA_DROPFS")
    if p:
        return p
    for b in ("build-test", "build-it", "build"):
        c = os.path.join(harness.SRC, b, "tests", "dropfs")
        if os.access(c, os.X_OK):
            return c
    return None


class MountRefused(Exception):
    pass


class DropFS:
    """One dropfs process serving `backing` at `mnt`; mount() again after unmount()."""

    def __init__(self, backing, mnt, log_path, options=()):
        self.backing, self.mnt, self.log_path = backing, mnt, log_path
        self.options = list(options)
        self.proc = None
        self.ctl = os.path.join(mnt, ".dropfs")

    def mount(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([dropfs_binary()] + self.options + [self.backing, self.mnt],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        try:
            wait_until(lambda: self.proc.poll() is not None or os.path.exists(self.ctl), 10,
                       "dropfs mounted at %s" % self.mnt)
        except harness.WaitTimeout:
            self.close()
            raise
        if self.proc.poll() is not None:
            text = self.log_text()
            self.proc = None
            if "permitted" in text or "Permission denied" in text:
                raise MountRefused(text.strip().splitlines()[-1])
            raise AssertionError("dropfs exited at mount:\n%s" % text[-2000:])

    def stats(self):
        """The control file's counters as a dict, and its "cut: ..." lines as 'log'."""
        with open(self.ctl) as f:
            text = f.read()
        out = {"log": []}
        for line in text.splitlines():
            if line.startswith("cut: "):
                out["log"].append(line)
            else:
                k, v = line.split()
                out[k] = int(v)
        return out

    def cut(self):
        """Power cut: wait until no handle is open (a killed process's last requests are
        done), drop what is not durable, return the counters."""
        wait_until(lambda: self.stats()["open_files"] == 0, 15,
                   "the killed broker's files closed on the dropfs mount")
        with open(self.ctl, "w") as f:
            f.write("cut")
        return self.stats()

    def unmount(self):
        def gone():
            r = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
            return r.returncode == 0
        wait_until(gone, 15, "fusermount3 -u %s" % self.mnt)
        rc = self.proc.wait(10)
        self.proc = None
        if rc != 0:
            raise AssertionError("dropfs exited with status %d\n%s" % (rc, self.log_text()[-3000:]))

    def close(self):
        """Last resort: lazy unmount, end the process."""
        if self.proc is not None:
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


def skip_reason():
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    if not shutil.which("fusermount3"):
        return "fusermount3 is missing (Debian package fuse3)"
    if not dropfs_binary():
        return "dropfs is not built (STRATA_DROPFS unset; needs libfuse3-dev)"
    tmp = tempfile.mkdtemp(prefix="strata-it-dropfs-probe-")
    os.makedirs(os.path.join(tmp, "b"))
    os.makedirs(os.path.join(tmp, "m"))
    fs = DropFS(os.path.join(tmp, "b"), os.path.join(tmp, "m"), os.path.join(tmp, "log"))
    try:
        fs.mount()
        fs.unmount()
    except MountRefused as e:
        return "mounting FUSE is not permitted here (%s)" % e
    finally:
        fs.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return None


def read_all(bootstrap, topics, timeout=30):
    """Every record of the topics ({name: partitions}), from offset 0 to the high watermark:
    {(topic, partition): [(offset, value), ...]}."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "powerloss-reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.wait.max.ms": 50, "enable.partition.eof": False})
    try:
        want, out = {}, {}
        for t, n in topics.items():
            for p in range(n):
                lo, hi = c.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                out[(t, p)] = []
                if hi > lo:
                    want[(t, p)] = hi
        c.assign([TopicPartition(t, p, 0) for (t, p) in want])

        def done():
            for m in c.consume(1000, 0.2):
                if m.error() is not None:
                    raise AssertionError("consume error: %s" % m.error())
                out[(m.topic(), m.partition())].append((m.offset(), m.value()))
            return all(out[k] and out[k][-1][0] >= hi - 1 for k, hi in want.items())
        wait_until(done, timeout, "every partition read to its high watermark", interval=0)
        return out
    finally:
        c.close()


class DropfsModelTest(unittest.TestCase):
    """dropfs itself: after a cut and a remount, exactly the durable state is left."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="strata-it-dropfs-")
        self.backing = os.path.join(self.tmp, "backing")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(self.backing)
        os.makedirs(self.mnt)
        self.fs = None

    def tearDown(self):
        if self.fs is not None:
            self.fs.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def mount(self, *options):
        self.fs = DropFS(self.backing, self.mnt, os.path.join(self.tmp, "dropfs.log"), options)
        self.fs.mount()

    def path(self, name):
        return os.path.join(self.mnt, name)

    def write(self, name, data, sync=True, flags=os.O_CREAT | os.O_WRONLY):
        fd = os.open(self.path(name), flags, 0o644)
        try:
            os.write(fd, data)
            if sync:
                os.fdatasync(fd)
        finally:
            os.close(fd)

    def syncdir(self, name=""):
        fd = os.open(self.path(name) if name else self.mnt, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def tree(self):
        out = {}
        for root, dirs, files in os.walk(self.mnt):
            rel = os.path.relpath(root, self.mnt)
            for d in dirs:
                out[os.path.normpath(os.path.join(rel, d)) + "/"] = None
            for f in files:
                if rel == "." and f == ".dropfs":
                    continue
                with open(os.path.join(root, f), "rb") as fh:
                    out[os.path.normpath(os.path.join(rel, f))] = fh.read()
        return out

    def cut_and_remount(self):
        st = self.fs.cut()
        self.fs.unmount()
        self.fs.mount()
        return st

    def test_cut_leaves_the_durable_state(self):
        self.mount()
        # The durable state.
        self.write("a", b"durable")
        self.write("c", b"c")
        self.write("e", b"e-old")
        self.write("e2", b"e2-old")
        self.write("g", b"0123456789")
        self.write("h", b"h-old")
        os.mkdir(self.path("d"))
        os.mkdir(self.path("r"))
        self.syncdir()
        self.write("d/f", b"f")
        self.syncdir("d")
        durable = self.tree()
        self.assertEqual(self.fs.stats()["pending_dirops"], 0)
        # Changes that are not durable.
        self.write("a", b"+tail", sync=False, flags=os.O_WRONLY | os.O_APPEND)
        self.write("a", b"X", sync=False, flags=os.O_WRONLY)        # overwrites "d"
        self.write("b", b"synced data, unsynced name")             # entry never synced
        os.unlink(self.path("d/f"))
        os.rename(self.path("c"), self.path("c2"))
        os.rename(self.path("e"), self.path("e2"))                  # replaces e2
        os.truncate(self.path("g"), 3)
        self.write("h", b"new", sync=False, flags=os.O_WRONLY | os.O_TRUNC)
        os.mkdir(self.path("n"))
        self.write("n/x", b"x")
        self.syncdir("n")                              # n/x is durable in n, n is not
        os.rmdir(self.path("r"))
        self.assertNotEqual(self.tree(), durable)
        st = self.cut_and_remount()
        self.assertEqual(st["undo_errors"], 0, st["log"])
        self.assertGreater(st["last_dropped_bytes"], 0)
        self.assertEqual(st["last_undone_dirops"], 6, st["log"])  # n/x went with n
        self.assertEqual(self.tree(), durable)
        # Nothing is pending after a cut: a second one drops nothing.
        st = self.cut_and_remount()
        self.assertEqual((st["last_dropped_bytes"], st["last_undone_dirops"]), (0, 0))
        self.assertEqual(self.tree(), durable)

    def test_zero_tail_keeps_the_size(self):
        self.mount("--zero-tail")
        self.write("z", b"abc")
        self.syncdir()
        self.write("z", b"def", sync=False, flags=os.O_WRONLY | os.O_APPEND)
        self.cut_and_remount()
        self.assertEqual(self.tree(), {"z": b"abc\0\0\0"})

    def test_random_loses_some_pages(self):
        self.mount("--random", "7")
        self.write("p", b"A" * 4096 * 64)
        self.syncdir()
        self.write("p", b"B" * 4096 * 64, sync=False, flags=os.O_WRONLY)
        self.write("p", b"C" * 4096 * 64, sync=False, flags=os.O_WRONLY | os.O_APPEND)
        self.cut_and_remount()
        data = self.tree()["p"]
        self.assertEqual(len(data), 4096 * 128)
        pages = [data[i:i + 4096] for i in range(0, len(data), 4096)]
        head, tail = set(pages[:64]), set(pages[64:])
        self.assertEqual(head, {b"A" * 4096, b"B" * 4096})          # each page old or new
        self.assertEqual(tail, {b"C" * 4096, bytes(4096)})          # each page kept or zeroed



class PowerLossTest(unittest.TestCase):
    def setUp(self):
        harness.need_server_binary()
        self.tmp = tempfile.mkdtemp(prefix="strata-it-powerloss-")
        backing, mnt = os.path.join(self.tmp, "backing"), os.path.join(self.tmp, "mnt")
        os.makedirs(backing)
        os.makedirs(mnt)
        self.fs = DropFS(backing, mnt, os.path.join(self.tmp, "dropfs.log"))
        sets = {"log.segment.bytes": str(SEGMENT_BYTES), "num.partitions": "2",
                "auto.create.topics.enable": "false"}
        if CACHING:
            sets.update({"write.caching": "true", "log.flush.interval.ms": "3600000"})
        self.server = Server(smp=2, sets=sets, data_dir=mnt, name="powerloss")
        self.fs.mount()

    def tearDown(self):
        try:
            if self.server.alive():
                self.server.stop()
        finally:
            self.server.close()
            try:
                if self.fs.proc is not None:
                    self.fs.unmount()
            finally:
                self.fs.close()
                if not os.environ.get("STRATA_IT_KEEP"):
                    shutil.rmtree(self.tmp, ignore_errors=True)
                else:
                    print("kept %s" % self.tmp)

    def produce_round(self, topics, acked, seq0, deadline):
        """acks=all load over every partition of topics until ROUND_RECORDS more are
        acknowledged (or ROUND_SECONDS pass), then kill -9 the broker mid-stream while dropfs
        holds unsynced bytes. Acknowledged records go into acked {(t, p, offset): value}.
        Returns the next sequence number."""
        p = kc.producer(self.server.bootstrap, acks="all", linger_ms=1, retries=0,
                        message_timeout_ms=5000, queue_buffering_max_messages=2000)
        names = sorted(topics)
        start = len(acked)

        def cb(err, m):
            if err is None:
                acked[(m.topic(), m.partition(), m.offset())] = m.value()
        seq = seq0
        t_end = min(time.monotonic() + ROUND_SECONDS, deadline)
        killed = False
        while not killed:
            t = names[seq % len(names)]
            try:
                p.produce(t, b"%s/%08d" % (t.encode(), seq), partition=(seq // 7) % topics[t],
                          on_delivery=cb)
                seq += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)
            if len(acked) - start >= ROUND_RECORDS or time.monotonic() > t_end:
                # Kill while writes are in flight: dropfs must be holding unsynced bytes.
                if self.fs.stats()["pending_bytes"] > 0:
                    self.server.kill9()
                    killed = True
                elif time.monotonic() > t_end + 5:
                    self.fail("dropfs never held unsynced bytes under load")
        p.purge()
        p.flush(10)   # acknowledgements received before the kill still count
        return seq

    def verify(self, topics, acked):
        """Every acknowledged record at its offset; no record twice; offsets without gaps."""
        got = read_all(self.server.bootstrap, topics)
        lost = [(k, v) for k, v in acked.items() if dict(got.get(k[:2], [])).get(k[2]) != v]
        values = [v for recs in got.values() for _, v in recs]
        dups = len(values) - len(set(values))
        for (t, p), recs in got.items():
            offs = [o for o, _ in recs]
            self.assertEqual(offs, list(range(offs[0], offs[0] + len(offs))) if offs else [],
                             "offsets of %s/%d not contiguous" % (t, p))
        return lost, dups, sum(len(r) for r in got.values())

    def test_power_cuts_under_acks_all_load(self):
        t0 = time.monotonic()
        deadline = t0 + TEST_BUDGET
        self.server.start()
        topics = {"pl-base": 3}
        kc.create_topic(self.server.bootstrap, "pl-base", 3,
                        config={"segment.bytes": str(SEGMENT_BYTES)})
        acked, seq, figures = {}, 0, []
        for r in range(CUTS):
            name = "pl-new-%d" % r        # a topic created during the test, each round
            kc.create_topic(self.server.bootstrap, name, 2,
                            config={"segment.bytes": str(SEGMENT_BYTES)})
            topics[name] = 2
            before = len(acked)
            seq = self.produce_round(topics, acked, seq, deadline)
            st = self.fs.cut()
            self.fs.unmount()
            self.fs.mount()
            self.server.start()
            wait_until(lambda: all(kc.admin(self.server.bootstrap).list_topics(t, timeout=5)
                                   .topics[t].error is None for t in topics), 15,
                       "topics back after the restart")
            lost, dups, on_disk = self.verify(topics, acked)
            figures.append((len(acked) - before, st["last_dropped_bytes"],
                            st["last_dropped_files"], st["last_undone_dirops"], len(lost)))
            print("cut %d: %d acked this round (%d in all), %d records on disk; dropfs dropped "
                  "%d bytes in %d files and undid %d directory changes; %d acknowledged lost, "
                  "%d duplicated" % (r + 1, len(acked) - before, len(acked), on_disk,
                                     st["last_dropped_bytes"], st["last_dropped_files"],
                                     st["last_undone_dirops"], len(lost), dups), flush=True)
            self.assertEqual(st["undo_errors"], 0, "dropfs could not undo:\n%s"
                             % "\n".join(st["log"]))
            self.assertGreater(st["last_dropped_bytes"] + st["last_undone_dirops"], 0,
                               "the cut dropped nothing: the round did not exercise a power loss")
            if lost or dups:
                first = sorted(lost)[:5]
                self.fail("after cut %d (%s): %d of %d acknowledged records lost, %d duplicated; "
                          "first lost (topic, partition, offset): %s\ndropfs undid:\n%s"
                          % (r + 1, "write.caching" if CACHING else "strict", len(lost),
                             len(acked), dups, [k for k, _ in first], "\n".join(st["log"][:60])))
            self.assertLess(time.monotonic(), deadline + 30, "scenario ran far over its budget")
        self.server.stop()
        print("%d cuts, %d acknowledged records, none lost; %.1fs" % (
            CUTS, len(acked), time.monotonic() - t0))


if __name__ == "__main__":
    why = skip_reason()
    if why:
        print("SKIP: %s" % why)
        print("0 passed, 0 failed, 1 skipped", flush=True)
        sys.exit(SKIP)
    harness.main()
