"""test_cli_dump_log.py — `strata debug dump-log` and `debug verify-index` on segment files
written here byte by byte (the server-written case is in pending/test_cli_server.py)."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_segment  # noqa: E402

CLI = os.environ.get("STRATA_CLI")


def run(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60)


@unittest.skipUnless(CLI, "STRATA_CLI not set (the strata tool is not built)")
class DumpLog(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.dir.name, "00000000000000000000.log")
        b1 = cli_segment.batch(0, [(b"k0", b"hello"), (None, b"world")])
        b2 = cli_segment.batch(2, [(b"k2", b"\x00\xffbin")])
        self.b2_pos = len(b1)
        self.data = bytearray(b1 + b2)
        with open(self.log, "wb") as f:
            f.write(self.data)

    def tearDown(self):
        self.dir.cleanup()

    def test_batches_and_records(self):
        r = run("debug", "dump-log", self.log, "--records")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("baseOffset: 0 lastOffset: 1 count: 2 position: 0", r.stdout)
        self.assertIn(f"baseOffset: 2 lastOffset: 2 count: 1 position: {self.b2_pos}", r.stdout)
        self.assertEqual(r.stdout.count("crcValid: true"), 2)
        self.assertIn('offset: 0 timestamp: 1700000000000 headers: 0 key: "k0" value: "hello"', r.stdout)
        self.assertIn('key: null value: "world"', r.stdout)
        self.assertIn('value: "\\x00\\xffbin"', r.stdout)

    def test_corrupt_crc_flagged(self):
        cli_segment.corrupt_crc(self.data, self.b2_pos)
        with open(self.log, "wb") as f:
            f.write(self.data)
        r = run("debug", "dump-log", self.log)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("crcValid: true", r.stdout)  # the first batch is fine
        self.assertIn("crcValid: false (CORRUPT)", r.stdout)
        self.assertIn("1 problem(s) found", r.stdout)

    def test_truncated_tail(self):
        with open(self.log, "wb") as f:
            f.write(self.data[:-5])
        r = run("debug", "dump-log", self.log)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"position {self.b2_pos}", r.stdout)
        self.assertIn("cannot be read as a batch", r.stdout)

    def test_missing_file_and_usage(self):
        r = run("debug", "dump-log", os.path.join(self.dir.name, "nope.log"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot read", r.stderr)
        self.assertIn("No such file", r.stderr)
        r = run("debug", "dump-log")
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: strata debug dump-log", r.stderr)

    def _write_indexes(self, index_entries, time_entries):
        base = self.log[:-4]
        with open(base + ".index", "wb") as f:
            for rel, pos in index_entries:
                f.write(struct.pack(">II", rel, pos))
        with open(base + ".timeindex", "wb") as f:
            for ts, rel in time_entries:
                f.write(struct.pack(">qI", ts, rel))

    def test_verify_index(self):
        self._write_indexes([(2, self.b2_pos)], [(1700000000001, 1), (1700000000002, 2)])
        r = run("debug", "verify-index", self.log)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("2 batches, consistent", r.stdout)

    def test_verify_index_bad_position(self):
        self._write_indexes([(2, self.b2_pos + 1)], [(1700000000001, 1)])
        r = run("debug", "verify-index", self.log)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("is not a batch start", r.stdout)

    def test_verify_index_offset_past_end(self):
        self._write_indexes([], [(1700000000001, 9)])
        r = run("debug", "verify-index", self.log)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("past the segment's last offset", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
