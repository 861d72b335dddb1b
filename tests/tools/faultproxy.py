"""faultproxy.py — a TCP proxy that delays, black-holes or cuts traffic, for the failure tests.

A FaultProxy listens on a loopback port and forwards every connection to one target (a broker's
Kafka listener). The failure tests (issue 13) put one in front of each broker and advertise the
proxy's address (advertised.listeners), so every client and every follower reaches the broker
through it, while the controller traffic (the CONTROLLER listener: Raft over TCP, heartbeats
over UDP) does not: a fault set here cuts a leader off from its followers, not from the
controller.

Directions: "up" is what the connecting side (client, follower) sends to the target; "down" is
what the target sends back. Faults, set at run time, per direction:

    delay MS   every chunk is held MS milliseconds before it is forwarded (order is kept)
    drop       black hole: chunks are read and thrown away (the sender's writes succeed, the
               other side hears nothing). A connection that lost bytes has a hole in its byte
               stream: when its faults are lifted, it is closed (as a dead TCP connection would
               end), never resumed.

A fault can apply to some connections only, chosen by the Kafka client.id in the first request
header of the connection (parsed, not consumed): `only` (a regex the client id must match) and
`skip` (a regex it must not match). The failure tests give their own clients ids starting "it-"
and cut peers with skip="^it-": the brokers' fetchers lose their leader, the test's producer
and consumer do not.

Bounds: at most MAX_CONNS connections at a time (more are closed at once), at most MAX_QUEUED
bytes held per direction of a connection (reading pauses beyond that), a connect timeout to the
target. Loopback addresses only.

In process (the tests):

    p = FaultProxy(("127.0.0.1", broker_port)).start()    # p.port: where it listens
    p.set(drop="both", skip="^it-")   # followers' traffic vanishes both ways
    p.set(delay_ms=200, direction="down")
    p.heal()                          # no faults; connections that lost bytes are closed
    p.reset()                         # close every connection now
    p.stats()                         # counters and the client ids seen
    p.close()

Out of process: `faultproxy.py --listen 127.0.0.1:PORT --target 127.0.0.1:PORT
[--control 127.0.0.1:PORT]`; the control port takes one command per line and answers one line
("ok ..." or "error ..."):

    delay up|down|both MS     drop up|down|both     heal     reset     stats
    only REGEX|-              skip REGEX|-          (which connections the faults apply to)
"""

import argparse
import asyncio
import collections
import ipaddress
import json
import re
import socket
import struct
import sys
import threading
import time

MAX_CONNS = 512
MAX_QUEUED = 16 << 20          # bytes held per direction of one connection
CONNECT_TIMEOUT = 5.0
READ_CHUNK = 65536
HEADER_PEEK_MAX = 4096         # give up parsing the client id after this many bytes

DIRECTIONS = ("up", "down")


def _loopback(host):
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def _directions(direction):
    if direction in ("both", None):
        return DIRECTIONS
    if direction not in DIRECTIONS:
        raise ValueError("direction must be up, down or both, not %r" % (direction,))
    return (direction,)


def parse_client_id(buf):
    """The client.id of the Kafka request at the start of buf: a str, "" for a null id, None
    while the header is incomplete. Raises ValueError for bytes that are not a request."""
    # size i32, api_key i16, api_version i16, correlation_id i32, client_id nullable string
    if len(buf) < 14:
        return None
    size, api_key, _ver, _corr, n = struct.unpack_from(">ihhih", buf, 0)
    if size < 10 or api_key < 0 or n < -1:
        raise ValueError("not a Kafka request")
    if n == -1:
        return ""
    if len(buf) < 14 + n:
        return None
    return bytes(buf[14:14 + n]).decode("utf-8", "replace")


class Faults:
    """One immutable set of faults: per-direction delay and drop, and the connection filter."""

    def __init__(self, delay_ms=None, drop=None, only=None, skip=None):
        self.delay_ms = dict(delay_ms or {d: 0 for d in DIRECTIONS})
        self.drop = dict(drop or {d: False for d in DIRECTIONS})
        self.only = only
        self.skip = skip
        self._only = re.compile(only) if only else None
        self._skip = re.compile(skip) if skip else None

    def with_(self, **kw):
        a = dict(delay_ms=self.delay_ms, drop=self.drop, only=self.only, skip=self.skip)
        a.update(kw)
        return Faults(**a)

    def applies(self, client_id):
        """True if the faults apply to a connection with this client id (None: not known)."""
        cid = client_id or ""
        if self._only is not None and not self._only.search(cid):
            return False
        if self._skip is not None and self._skip.search(cid):
            return False
        return True

    def active(self):
        return any(self.delay_ms.values()) or any(self.drop.values())

    def describe(self):
        return {"delay_ms": self.delay_ms, "drop": self.drop, "only": self.only,
                "skip": self.skip}


class _Conn:
    """One proxied connection: two pipes, closed together."""

    def __init__(self, proxy, creader, cwriter):
        self.proxy = proxy
        self.creader, self.cwriter = creader, cwriter
        self.treader = self.twriter = None
        self.client_id = None          # from the first request header
        self.peek = bytearray()        # the first bytes up, until the client id is known
        self.peek_done = False
        self.damaged = False           # bytes were dropped: the stream has a hole
        self.closed = False
        self.tasks = []

    def faulted(self):
        """The faults in force if they apply to this connection, else None."""
        f = self.proxy.faults
        return f if f.applies(self.client_id) else None

    def note_up(self, data):
        if self.peek_done:
            return
        self.peek += data
        try:
            cid = parse_client_id(self.peek)
        except ValueError:
            cid = ""
        if cid is not None or len(self.peek) >= HEADER_PEEK_MAX:
            self.client_id = cid or ""
            self.peek_done = True
            self.peek = bytearray()
            self.proxy._seen(self.client_id)

    async def run(self):
        p = self.proxy
        try:
            self.treader, self.twriter = await asyncio.wait_for(
                asyncio.open_connection(*p.target), CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError):
            p.counters["connect_failures"] += 1
            self.close()
            return
        self.tasks = [asyncio.ensure_future(_Pipe(self, "up", self.creader,
                                                  self.twriter).run()),
                      asyncio.ensure_future(_Pipe(self, "down", self.treader,
                                                  self.cwriter).run())]
        await asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED)
        self.close()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for w in (self.cwriter, self.twriter):
            if w is not None:
                try:
                    w.transport.abort()
                except Exception:
                    pass
        for t in self.tasks:
            t.cancel()
        self.proxy.conns.discard(self)


class _Pipe:
    """One direction of a connection: a reader that applies the faults as chunks arrive and a
    writer that forwards them when their delay is over."""

    def __init__(self, conn, direction, reader, writer):
        self.conn, self.direction = conn, direction
        self.reader, self.writer = reader, writer
        self.queue = collections.deque()     # (deliver_at, bytes)
        self.queued = 0
        self.more = asyncio.Event()          # something queued, or the reader ended
        self.room = asyncio.Event()          # queued fell under MAX_QUEUED
        self.eof = False

    async def run(self):
        w = asyncio.ensure_future(self.write_loop())
        try:
            await self.read_loop()
            self.eof = True
            self.more.set()
            await w
        finally:
            w.cancel()

    async def read_loop(self):
        c, p, d = self.conn, self.conn.proxy, self.direction
        while not c.closed:
            try:
                data = await self.reader.read(READ_CHUNK)
            except (OSError, asyncio.IncompleteReadError):
                return
            if not data:
                return
            if d == "up":
                c.note_up(data)
            f = c.faulted()
            if f is not None and f.drop[d]:
                c.damaged = True
                p.counters["dropped_" + d] += len(data)
                continue
            if c.damaged and (f is None or not f.drop["up"] and not f.drop["down"]):
                c.close()            # a hole in the stream: end it rather than resume
                return
            delay = (f.delay_ms[d] / 1000.0) if f is not None else 0.0
            if delay:
                p.counters["delayed_" + d] += len(data)
            self.queue.append((time.monotonic() + delay, data))
            self.queued += len(data)
            self.more.set()
            while self.queued > MAX_QUEUED and not c.closed:
                self.room.clear()
                await self.room.wait()

    async def write_loop(self):
        c, p, d = self.conn, self.conn.proxy, self.direction
        while not c.closed:
            if not self.queue:
                if self.eof:
                    return
                self.more.clear()
                await self.more.wait()
                continue
            at, data = self.queue[0]
            f = p.faults
            wait = at - time.monotonic()
            if wait > 0 and f.applies(c.client_id) and f.delay_ms[d]:
                await asyncio.sleep(min(wait, 0.05))   # re-checked: lifting the delay ends it
                continue
            self.queue.popleft()
            self.queued -= len(data)
            self.room.set()
            try:
                self.writer.write(data)
                await self.writer.drain()
            except (OSError, ConnectionError):
                c.close()
                return
            p.counters["forwarded_" + d] += len(data)


class FaultProxy:
    """A loopback TCP proxy to `target` (host, port) with faults set at run time. The event
    loop runs on its own thread; every method here may be called from any thread."""

    def __init__(self, target, listen=("127.0.0.1", 0), control=None, name="faultproxy"):
        for host in (target[0], listen[0]) + ((control[0],) if control else ()):
            if not _loopback(host):
                raise ValueError("faultproxy serves loopback addresses only, not %r" % (host,))
        self.target = (target[0], int(target[1]))
        self.listen = (listen[0], int(listen[1]))
        self.control = (control[0], int(control[1])) if control else None
        self.name = name
        self.faults = Faults()
        self.conns = set()
        self.counters = collections.Counter()
        self.client_ids = collections.Counter()
        self.port = None
        self.control_port = None
        self._loop = None
        self._thread = None
        self._servers = []
        self._lock = threading.Lock()

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self, timeout=10.0):
        ready = threading.Event()
        err = []

        def main():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._open())
            except BaseException as e:
                err.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                for c in list(self.conns):
                    c.close()
                pending = asyncio.all_tasks(loop)
                for t in pending:
                    t.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.close()

        self._thread = threading.Thread(target=main, daemon=True, name=self.name)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError("%s did not start within %.0fs" % (self.name, timeout))
        if err:
            raise err[0]
        return self

    async def _open(self):
        s = await asyncio.start_server(self._accept, self.listen[0], self.listen[1],
                                       reuse_address=True)
        self._servers.append(s)
        self.port = s.sockets[0].getsockname()[1]
        if self.control:
            cs = await asyncio.start_server(self._control, self.control[0], self.control[1],
                                            reuse_address=True)
            self._servers.append(cs)
            self.control_port = cs.sockets[0].getsockname()[1]

    def close(self, timeout=10.0):
        """Stop listening, close every connection, end the thread (bounded)."""
        if self._loop is None or self._thread is None:
            return

        async def shut():
            for s in self._servers:
                s.close()
            for c in list(self.conns):
                c.close()
        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    @property
    def address(self):
        return "%s:%d" % (self.listen[0], self.port)

    # ---- faults -----------------------------------------------------------------------------

    def _call(self, fn, timeout=10.0):
        async def run():
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def set(self, direction="both", delay_ms=None, drop=None, only=Ellipsis, skip=Ellipsis):
        """Change the faults of `direction` (up, down, both): delay_ms (0 for none), drop
        (True/False, or "both"/"up"/"down" to drop those directions and pass the others).
        only/skip: regexes on the client id choosing the connections the faults apply to
        (None: no filter; left out: unchanged). Returns the faults now in force."""
        def apply():
            f = self.faults
            if isinstance(drop, str):
                dirs = _directions(drop)
                f = f.with_(drop={d: d in dirs for d in DIRECTIONS})
            elif drop is not None:
                dd = dict(f.drop)
                for d in _directions(direction):
                    dd[d] = bool(drop)
                f = f.with_(drop=dd)
            if delay_ms is not None:
                dm = dict(f.delay_ms)
                for d in _directions(direction):
                    dm[d] = max(0, int(delay_ms))
                f = f.with_(delay_ms=dm)
            if only is not Ellipsis:
                f = f.with_(only=only)
            if skip is not Ellipsis:
                f = f.with_(skip=skip)
            self.faults = f
            self._close_healed()
            return f.describe()
        return self._call(apply)

    def drop(self, direction="both", skip=Ellipsis, only=Ellipsis):
        """Black-hole `direction` (up, down, both) for the connections the filter chooses."""
        return self.set(drop=direction, skip=skip, only=only)

    def delay(self, ms, direction="both", skip=Ellipsis, only=Ellipsis):
        return self.set(direction=direction, delay_ms=ms, skip=skip, only=only)

    def heal(self):
        """No faults, no filter; connections that lost bytes are closed."""
        def apply():
            self.faults = Faults()
            self._close_healed()
            return self.faults.describe()
        return self._call(apply)

    def reset(self):
        """Close every connection now (new ones are accepted as before)."""
        def apply():
            n = len(self.conns)
            for c in list(self.conns):
                c.close()
            return n
        return self._call(apply)

    def _close_healed(self):
        f = self.faults
        for c in list(self.conns):
            if c.damaged and not (f.applies(c.client_id) and (f.drop["up"] or f.drop["down"])):
                c.close()

    def stats(self):
        """Counters (bytes forwarded, delayed, dropped per direction; connections), the client
        ids seen (id -> connections) and the faults in force."""
        def snap():
            return {"counters": dict(self.counters), "client_ids": dict(self.client_ids),
                    "open": len(self.conns), "faults": self.faults.describe()}
        return self._call(snap)

    def _seen(self, client_id):
        self.client_ids[client_id] += 1

    # ---- the event loop's side ----------------------------------------------------------------

    async def _accept(self, reader, writer):
        self.counters["connections"] += 1
        if len(self.conns) >= MAX_CONNS:
            self.counters["refused"] += 1
            writer.transport.abort()
            return
        c = _Conn(self, reader, writer)
        self.conns.add(c)
        try:
            await c.run()
        finally:
            c.close()

    async def _control(self, reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                try:
                    out = "ok " + json.dumps(self._command(line.decode().strip()))
                except Exception as e:
                    out = "error %s" % (e,)
                writer.write(out.encode() + b"\n")
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            writer.transport.abort()

    def _command(self, line):
        """One control line, run on the loop's thread."""
        words = line.split()
        if not words:
            raise ValueError("empty command")
        cmd, args = words[0], words[1:]
        f = self.faults
        if cmd == "delay" and len(args) == 2:
            dm = dict(f.delay_ms)
            for d in _directions(args[0]):
                dm[d] = max(0, int(args[1]))
            self.faults = f.with_(delay_ms=dm)
        elif cmd == "drop" and len(args) == 1:
            dirs = _directions(args[0])
            self.faults = f.with_(drop={d: d in dirs or f.drop[d] for d in DIRECTIONS})
        elif cmd in ("only", "skip") and len(args) == 1:
            v = None if args[0] == "-" else args[0]
            re.compile(v or "")
            self.faults = f.with_(**{cmd: v})
        elif cmd == "heal" and not args:
            self.faults = Faults()
        elif cmd == "reset" and not args:
            for c in list(self.conns):
                c.close()
        elif cmd == "stats" and not args:
            return {"counters": dict(self.counters), "client_ids": dict(self.client_ids),
                    "open": len(self.conns), "faults": self.faults.describe()}
        else:
            raise ValueError("unknown command %r (delay DIR MS, drop DIR, only RE, skip RE, "
                             "heal, reset, stats)" % (line,))
        self._close_healed()
        return self.faults.describe()


def send_command(control, line, timeout=5.0):
    """Send one control line to a faultproxy's control port (host, port); returns its answer
    line. Raises RuntimeError on an "error" answer."""
    with socket.create_connection(control, timeout=timeout) as s:
        s.sendall(line.strip().encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    ans = buf.decode().strip()
    if not ans.startswith("ok"):
        raise RuntimeError(ans or "no answer")
    return ans


def _hostport(s):
    host, _, port = s.rpartition(":")
    return (host or "127.0.0.1", int(port))


def main(argv=None):
    ap = argparse.ArgumentParser(description="loopback TCP fault proxy (delay, drop, cut)")
    ap.add_argument("--listen", required=True, help="host:port to listen on (port 0: any)")
    ap.add_argument("--target", required=True, help="host:port to forward to")
    ap.add_argument("--control", help="host:port for the line-based control socket")
    ap.add_argument("--seconds", type=float, default=0,
                    help="exit after this many seconds (0: run until interrupted)")
    a = ap.parse_args(argv)
    p = FaultProxy(_hostport(a.target), _hostport(a.listen),
                   _hostport(a.control) if a.control else None).start()
    print("faultproxy: listening on %s -> %s:%d%s" % (
        p.address, p.target[0], p.target[1],
        ", control on %s:%d" % (p.control[0], p.control_port) if p.control else ""), flush=True)
    try:
        if a.seconds:
            time.sleep(a.seconds)
        else:
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        p.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
