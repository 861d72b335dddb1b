"""Memory held by partially received frames is bounded per broker (issue 10).

Each connection may send frames up to socket.request.max.bytes; many connections each
sending most of a large frame and then stalling used to make the broker hold all of it.
queued.max.request.bytes bounds what the broker holds (split between shards): connections
whose frame does not fit stop being read and wait. Here 24 connections each send 23 of a
24 MiB Produce frame and stall; the broker's RSS stays within the budget plus slack, an
ordinary client is served meanwhile, and then the stalled clients either finish their frame
(and get an answer, as the waiting ones are read again once memory frees) or vanish."""

import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kwire  # noqa: E402
from harness import ServerTestCase  # noqa: E402
from kwire import frame, i16, i32, request_header, string  # noqa: E402

MIB = 1 << 20
CONNS = 24
FRAME = 24 * MIB
SENT = 23 * MIB
BUDGET = 64 * MIB            # queued.max.request.bytes: 32 MiB a shard
RSS_SLACK = 160 * MIB        # over the idle RSS; 24 x 23 MiB is 552 MiB


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def big_produce(topic, total):
    """A Produce v3 frame of exactly `total` bytes (with its size prefix): one partition,
    its records a run of junk bytes the broker refuses with a per-partition error."""
    head = request_header(0, 3, 7) + i16(-1) + i16(1) + i32(10000) + i32(1) + string(topic) \
        + i32(1) + i32(0)
    n = total - 4 - len(head) - 4
    return frame(head + i32(n) + b"\x00" * n)


class FramesMemoryTest(ServerTestCase):
    SMP = 2
    SETS = {"queued.max.request.bytes": str(BUDGET), "message.max.bytes": str(32 * MIB)}

    def served(self):
        with kwire.Conn.to(self.bootstrap, timeout=10) as c:
            err, _ = kwire.api_versions(c, 3)
            self.assertEqual(err, 0)
            self.assertEqual(len(kwire.metadata(c, 12)["brokers"]), 1)

    def push(self, socks, data, upto):
        """Sends data[sent:upto] on every socket, non-blocking, until each has sent `upto`
        bytes or none has made progress for a second (the broker stopped reading them).
        Returns {sock: bytes sent}."""
        sent = {s: 0 for s in socks}
        while True:
            todo = [s for s in socks if sent[s] < upto]
            if not todo:
                return sent
            _, w, _ = select.select([], todo, [], 1.0)
            if not w:
                return sent
            for s in w:
                try:
                    sent[s] += s.send(data[sent[s]:min(upto, sent[s] + 4 * MIB)])
                except BlockingIOError:
                    pass

    def test_stalled_large_frames_are_bounded(self):
        if self.server.external:
            self.skipTest("needs the broker's pid")
        pid = self.server.proc.pid
        topic = self.unique("fm")
        self.served()
        base = rss_bytes(pid)
        data = big_produce(topic, FRAME)
        socks = []
        try:
            for _ in range(CONNS):
                s = socket.create_connection((self.server.host, self.server.port), timeout=10)
                s.setblocking(False)
                socks.append(s)
            sent = self.push(socks, data, SENT)
            self.served()
            peak = rss_bytes(pid)
            self.assertLess(peak - base, RSS_SLACK,
                            "broker RSS grew by %d MiB holding partial frames (%d MiB sent)"
                            % ((peak - base) // MIB, sum(sent.values()) // MIB))
            # Half the stalled clients finish their frame: each gets its answer, in turn,
            # as the requests before it are answered and free the budget.
            finish, vanish = socks[: CONNS // 2], socks[CONNS // 2:]
            for s in vanish:
                s.close()
            deadline = time.monotonic() + 120
            left = {s: sent[s] for s in finish}
            answered = set()
            while len(answered) < len(finish) and time.monotonic() < deadline:
                want_w = [s for s in finish if left[s] < FRAME]
                want_r = [s for s in finish if s not in answered]
                r, w, _ = select.select(want_r, want_w, [], 1.0)
                for s in w:
                    try:
                        left[s] += s.send(data[left[s]:min(FRAME, left[s] + 4 * MIB)])
                    except BlockingIOError:
                        pass
                for s in r:
                    got = s.recv(65536)
                    self.assertTrue(got, "broker closed a connection whose frame was whole")
                    answered.add(s)
            self.assertEqual(len(answered), len(finish), "not every finished frame was answered")
            self.served()
            self.assertTrue(self.server.alive())
        finally:
            for s in socks:
                s.close()


if __name__ == "__main__":
    harness.main()
