"""Hostile bytes on the Kafka port (issues 2 and 4): truncated frames, lying lengths, a size
prefix above socket.request.max.bytes, huge counts, unknown API keys and versions. Each gets
an error answer or a closed connection — never a crash or a hang — while a well-behaved
client on another connection keeps being served throughout."""

import os
import random
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from kwire import i16, i32, frame, request_header, string, compact_string, uvarint  # noqa: E402
from harness import ServerTestCase  # noqa: E402

CLOSE_WITHIN = 10.0    # seconds the server may take to drop a bad connection


class HostileTest(ServerTestCase):
    SMP = 2

    def setUp(self):
        super().setUp()
        self.good = kwire.Conn.to(self.bootstrap)

    def tearDown(self):
        # After every probe: the well-behaved connection opened before it still works, a
        # new one works, and the process is alive.
        try:
            self.assert_served(self.good)
            with kwire.Conn.to(self.bootstrap) as c:
                self.assert_served(c)
        finally:
            self.good.close()
        self.assertTrue(self.server.external or self.server.alive(),
                        "server died\n%s" % self.server.stderr_tail())

    def assert_served(self, c):
        err, keys = kwire.api_versions(c, 3)
        self.assertEqual(err, 0)
        md = kwire.metadata(c, 12)
        self.assertEqual(len(md["brokers"]), 1)

    def hostile(self, payload, want="close", half_close=False):
        """Send payload on a fresh connection. want='close': the server must close it.
        want='close_or_error': either closed, or one answer frame arrives (an error)."""
        c = kwire.Conn.to(self.bootstrap)
        try:
            c.send_raw(payload)
            if half_close:
                c.sock.shutdown(1)   # SHUT_WR: we will send no more
            closed = c.closed_by_peer(CLOSE_WITHIN)
            self.assertTrue(closed, "server kept the connection open after %r..."
                            % payload[:40])
        finally:
            c.close()

    # ---- framing ----------------------------------------------------------------------

    def test_truncated_frame_then_eof(self):
        body = request_header(3, 1, 1) + i32(-1)
        self.hostile(frame(body)[:7], half_close=True)

    def test_truncated_frame_left_open_does_not_block_others(self):
        """A half-sent frame held open must not stop the shard from serving others."""
        stuck = [kwire.Conn.to(self.bootstrap) for _ in range(8)]
        try:
            for s in stuck:
                s.send_raw(i32(100) + b"\x00\x03")
            for _ in range(3):
                self.assert_served(self.good)
        finally:
            for s in stuck:
                s.close()

    def test_size_prefix_above_max_request_bytes(self):
        # socket.request.max.bytes defaults to 100 MiB: refuse at once, without waiting for
        # (or allocating) the announced bytes.
        for size in (100 * 1024 * 1024 + 1, 0x7FFFFFFF):
            t0 = time.monotonic()
            self.hostile(i32(size) + request_header(18, 0, 1))
            self.assertLess(time.monotonic() - t0, 5.0, "refusal should be immediate")

    def test_negative_and_tiny_size_prefix(self):
        self.hostile(i32(-1) + b"\x00" * 8)
        self.hostile(i32(-2147483648))
        self.hostile(i32(0) + b"\x00" * 8)      # an empty frame cannot hold a header
        self.hostile(i32(3) + b"\x00\x12\x00")  # shorter than the fixed header

    def test_lying_length_inside_request(self):
        # client_id string claims 30000 bytes; the frame holds 5.
        hdr = i16(18) + i16(0) + i32(1) + i16(30000) + b"hello"
        self.hostile(frame(hdr))
        # Metadata v1 topic name claims more than the frame.
        body = request_header(3, 1, 2) + i32(1) + i16(5000) + b"abc"
        self.hostile(frame(body))
        # Flexible Metadata v12: compact array count beyond the bytes left.
        body = request_header(3, 12, 3, flexible=True) + uvarint(0x0FFFFFFF)
        self.hostile(frame(body))
        # Flexible header whose tagged-field section lies about its size.
        body = i16(3) + i16(12) + i32(4) + string("x") + uvarint(1) + uvarint(0) + uvarint(9999)
        self.hostile(frame(body))

    def test_huge_counts(self):
        # Metadata v1 with 2^31-1 topics in a 20-byte frame: no allocation of that size.
        body = request_header(3, 1, 5) + i32(0x7FFFFFFF) + i16(1) + b"a"
        self.hostile(frame(body))
        body = request_header(3, 0, 6) + i32(0x7FFFFFFF)
        self.hostile(frame(body))
        # A varint that never ends.
        body = request_header(3, 12, 7, flexible=True) + b"\xff" * 12
        self.hostile(frame(body))

    def test_unknown_api_key(self):
        for key in (9999 % 32768, 32767, -1):
            self.hostile(frame(request_header(key, 0, 8)))

    def test_unknown_version_of_other_api(self):
        self.hostile(frame(request_header(3, 999, 9) + i32(-1)))
        self.hostile(frame(request_header(3, -1, 10) + i32(-1)))

    def test_api_versions_unsupported_version_answers_35(self):
        with kwire.Conn.to(self.bootstrap) as c:
            c.send_raw(frame(request_header(18, 777, 42)))
            r = kwire.Reader(c.recv_frame())
            self.assertEqual(r.i32(), 42)
            err, keys = kwire.parse_api_versions(r, 0)
            self.assertEqual(err, 35)
            self.assertIn(18, keys)

    def test_trailing_garbage_after_valid_request(self):
        # A valid ApiVersions v0 with junk after the body: an error or a closed
        # connection are both acceptable; a crash or hang is not.
        c = kwire.Conn.to(self.bootstrap)
        try:
            c.send_raw(frame(request_header(18, 0, 11) + b"\xde\xad\xbe\xef" * 4))
            try:
                c.recv_frame(CLOSE_WITHIN)   # answered (Kafka ignores trailing bytes at v0)
            except (EOFError, ConnectionResetError):
                pass                        # or dropped
        finally:
            c.close()

    def test_random_garbage(self):
        """A bounded batch of random frames with plausible headers; the server survives."""
        rnd = random.Random(1234)
        for i in range(60):
            key = rnd.choice([0, 1, 2, 3, 8, 9, 10, 11, 12, 18, 19, 20, rnd.randrange(-5, 100)])
            ver = rnd.randrange(-2, 20)
            junk = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 64)))
            payload = frame(i16(key) + i16(ver) + i32(i) + string("fz") + junk)
            if rnd.random() < 0.3:
                payload = payload[:rnd.randrange(1, len(payload))]
            c = kwire.Conn.to(self.bootstrap)
            try:
                c.send_raw(payload)
                c.sock.shutdown(1)
                c.closed_by_peer(CLOSE_WITHIN)
            except OSError:
                pass
            finally:
                c.close()
        self.assert_served(self.good)

    def test_client_disconnects_mid_response(self):
        """Clients that vanish with requests in flight do not disturb the server."""
        for _ in range(20):
            c = kwire.Conn.to(self.bootstrap)
            c.send_raw(b"".join(frame(request_header(3, 12, n, flexible=True)
                                      + kwire.metadata_request(12)) for n in range(20)))
            c.sock.setsockopt(__import__("socket").SOL_SOCKET,
                              __import__("socket").SO_LINGER, struct.pack("ii", 1, 0))
            c.close()   # RST with responses pending


if __name__ == "__main__":
    harness.main()
