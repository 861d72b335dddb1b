"""kwire.py — a small, independent Kafka wire codec for tests that talk raw bytes.

Used to check exact protocol behaviour (ApiVersions error 35 in the v0 layout, Metadata at
every version with an exact end-of-body check) and to send hostile bytes that no real client
would. Written from the public protocol reference; it is deliberately separate from the
server's generated codecs, so it checks them rather than repeats them.
"""

import socket
import struct
import time
import uuid as _uuid


# ---- encoding ----------------------------------------------------------------------------

def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)
def boolean(v): return b"\x01" if v else b"\x00"


def uvarint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def string(s):
    """Classic (int16-length) nullable string."""
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode() if isinstance(s, str) else s
    return uvarint(len(b) + 1) + b


def array(items, enc):
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(enc(x) for x in items)


def compact_array(items, enc):
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(enc(x) for x in items)


TAGS_NONE = b"\x00"   # an empty tagged-field section


def request_header(api_key, api_version, correlation_id, client_id="kwire", flexible=False):
    """Request header v1 (or v2 when flexible: adds an empty tagged-field section).
    client_id stays a classic nullable string even in v2, as the protocol says."""
    h = i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)
    return h + TAGS_NONE if flexible else h


def frame(payload):
    return i32(len(payload)) + payload


# ---- decoding ----------------------------------------------------------------------------

class Short(Exception):
    """The response ended before a field it must contain."""


class Reader:
    def __init__(self, b):
        self.b = b
        self.p = 0

    def left(self):
        return len(self.b) - self.p

    def take(self, n):
        if n < 0 or self.p + n > len(self.b):
            raise Short("need %d bytes at %d, have %d" % (n, self.p, self.left()))
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def i8(self): return struct.unpack(">b", self.take(1))[0]
    def i16(self): return struct.unpack(">h", self.take(2))[0]
    def i32(self): return struct.unpack(">i", self.take(4))[0]
    def i64(self): return struct.unpack(">q", self.take(8))[0]
    def boolean(self): return self.take(1) != b"\x00"
    def uuid(self): return _uuid.UUID(bytes=bytes(self.take(16)))

    def uvarint(self):
        v = shift = 0
        while True:
            b = self.take(1)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
            if shift > 63:
                raise Short("varint too long")

    def string(self):
        n = self.i16()
        return None if n < 0 else bytes(self.take(n)).decode()

    def compact_string(self):
        n = self.uvarint()
        return None if n == 0 else bytes(self.take(n - 1)).decode()

    def array(self, dec):
        n = self.i32()
        if n < 0:
            return None
        if n > self.left():
            raise Short("array count %d larger than the bytes left" % n)
        return [dec(self) for _ in range(n)]

    def compact_array(self, dec):
        n = self.uvarint()
        if n == 0:
            return None
        if n - 1 > self.left():
            raise Short("array count %d larger than the bytes left" % (n - 1))
        return [dec(self) for _ in range(n - 1)]

    def tags(self):
        """Skip a tagged-field section; return {tag: bytes}."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = bytes(self.take(self.uvarint()))
        return out

    def end(self):
        if self.left():
            raise AssertionError("%d unexpected bytes at the end of the response" % self.left())


# ---- connection --------------------------------------------------------------------------

class Conn:
    """One TCP connection speaking raw Kafka frames."""

    def __init__(self, host, port, timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0

    @classmethod
    def to(cls, bootstrap, timeout=5.0):
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), timeout)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send_raw(self, b):
        self.sock.sendall(b)

    def recv_exact(self, n, timeout=5.0):
        """n bytes, or raise EOFError if the peer closed, socket.timeout if none came."""
        self.sock.settimeout(timeout)
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("connection closed after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def recv_frame(self, timeout=5.0):
        (n,) = struct.unpack(">i", self.recv_exact(4, timeout))
        if n < 0 or n > 256 << 20:
            raise AssertionError("response size prefix %d is not sane" % n)
        return self.recv_exact(n, timeout)

    def request(self, api_key, version, body, flexible=False, client_id="kwire", timeout=5.0,
                flexible_response=None):
        """Send one request, return a Reader over the response body (header checked)."""
        self.corr += 1
        corr = self.corr
        self.send_raw(frame(request_header(api_key, version, corr, client_id, flexible) + body))
        r = Reader(self.recv_frame(timeout))
        got = r.i32()
        if got != corr:
            raise AssertionError("correlation id %d, want %d" % (got, corr))
        if flexible if flexible_response is None else flexible_response:
            r.tags()
        return r

    def closed_by_peer(self, timeout=5.0):
        """True if the server closes this connection (EOF or reset) within timeout; False if
        it is still open at the deadline. Any bytes the server sends first are discarded."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                if not self.sock.recv(65536):
                    return True
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True


# ---- APIs ------------------------------------------------------------------------------

API_VERSIONS = 18
METADATA = 3
UNSUPPORTED_VERSION = 35


def api_versions(conn, version=3):
    """ApiVersions at `version`; returns (error_code, {api_key: (min, max)}, reader_rest).
    The response header is always v0 (no tags), whatever the request version."""
    flexible = version >= 3
    body = b""
    if flexible:
        body = compact_string("strata-it") + compact_string("1.0") + TAGS_NONE
    r = conn.request(API_VERSIONS, version, body, flexible=flexible, flexible_response=False)
    return parse_api_versions(r, version)


def parse_api_versions(r, version):
    """Parse an ApiVersions response body. An UNSUPPORTED_VERSION answer is in the v0
    layout whatever version was asked (that is how a client learns the supported range), so
    it is parsed as v0 and checked to end exactly there."""
    err = r.i16()
    if err == UNSUPPORTED_VERSION:
        version = 0
    keys = {}

    def entry(rr):
        k, lo, hi = rr.i16(), rr.i16(), rr.i16()
        if version >= 3:
            rr.tags()
        keys[k] = (lo, hi)

    if version >= 3:
        r.compact_array(entry)
    else:
        r.array(entry)
    if version >= 1:
        r.i32()   # throttle_time_ms
    if version >= 3:
        r.tags()
    r.end()
    return err, keys


def metadata_request(version, topics=None, auto_create=False):
    """Metadata request body. topics None = all topics (an empty array at v0)."""
    flexible = version >= 9
    if version == 0:
        b = array(topics or [], string)
    elif version >= 10:
        def t(name):
            return b"\x00" * 16 + compact_string(name) + TAGS_NONE
        b = compact_array(topics, t)
    elif flexible:
        b = compact_array(topics, lambda n: compact_string(n) + TAGS_NONE)
    else:
        b = array(topics, string)
    if version >= 4:
        b += boolean(auto_create)
    if 8 <= version <= 10:
        b += boolean(False)       # include_cluster_authorized_operations
    if version >= 8:
        b += boolean(False)       # include_topic_authorized_operations
    if flexible:
        b += TAGS_NONE
    return b


def metadata(conn, version, topics=None, auto_create=False):
    """Metadata at `version`, fully parsed with an exact end check.
    Returns dict(brokers=[(node_id, host, port, rack)], cluster_id, controller_id,
    topics=[dict(error, name, topic_id, internal, partitions=[dict(...)])])."""
    flexible = version >= 9
    r = conn.request(METADATA, version, metadata_request(version, topics, auto_create),
                     flexible=flexible)
    s = r.compact_string if flexible else r.string
    arr = r.compact_array if flexible else r.array
    out = {"throttle": r.i32() if version >= 3 else 0}

    def broker(rr):
        b = (rr.i32(), s(), rr.i32(), s() if version >= 1 else None)
        if flexible:
            rr.tags()
        return b

    out["brokers"] = arr(broker)
    out["cluster_id"] = s() if version >= 2 else None
    out["controller_id"] = r.i32() if version >= 1 else None

    def partition(rr):
        p = {"error": rr.i16(), "index": rr.i32(), "leader": rr.i32()}
        p["leader_epoch"] = rr.i32() if version >= 7 else None
        p["replicas"] = arr(lambda q: q.i32())
        p["isr"] = arr(lambda q: q.i32())
        p["offline"] = arr(lambda q: q.i32()) if version >= 5 else None
        if flexible:
            rr.tags()
        return p

    def topic(rr):
        t = {"error": rr.i16(), "name": s()}
        t["topic_id"] = rr.uuid() if version >= 10 else None
        t["internal"] = rr.boolean() if version >= 1 else None
        t["partitions"] = arr(partition)
        if version >= 8:
            rr.i32()      # topic_authorized_operations
        if flexible:
            rr.tags()
        return t

    out["topics"] = arr(topic)
    if 8 <= version <= 10:
        r.i32()           # cluster_authorized_operations
    if version >= 13:
        out["error"] = r.i16()  # top-level error_code (v13+)
    if flexible:
        r.tags()
    r.end()
    return out


# ---- Produce v3 / Fetch v4, the shortest forms, for tests that need exact fields ----

def produce_v3(topic, partition, records):
    return (i16(-1) + i16(-1) + i32(10000) + i32(1) + string(topic) + i32(1) + i32(partition)
            + i32(len(records)) + records)


def fetch_v4(topic, partition, offset, min_bytes, max_wait_ms, part_max=1 << 20):
    return (i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(8 << 20) + i8(0) + i32(1)
            + string(topic) + i32(1) + i32(partition) + i64(offset) + i32(part_max))


def parse_fetch_v4(r):
    """Returns (error, high_watermark, records bytes) of the only partition."""
    r.i32()  # throttle
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err, hw = r.i16(), r.i64()
    r.i64()  # last stable offset
    n = r.i32()
    for _ in range(max(n, 0)):
        r.i64(), r.i64()
    size = r.i32()
    recs = bytes(r.take(size)) if size > 0 else b""
    return err, hw, recs


def count_records(recs):
    """Records in a run of RecordBatch v2 (whole batches only)."""
    n, pos = 0, 0
    while pos + 61 <= len(recs):
        (length,) = struct.unpack_from(">i", recs, pos + 8)
        if pos + 12 + length > len(recs):
            break
        n += struct.unpack_from(">i", recs, pos + 57)[0]
        pos += 12 + length
    return n


# ---- ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46) ----

ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46


def elect_leaders(conn, version, election_type, topic_partitions, timeout_ms=30000):
    """ElectLeaders at `version` (0-2). topic_partitions: {topic: [partition, ...]} or None
    (every partition). Returns (top-level error, {topic: {partition: (error, message)}})."""
    flexible = version >= 2
    s = compact_string if flexible else string
    arr = compact_array if flexible else array
    tail = TAGS_NONE if flexible else b""

    def tp(item):
        return s(item[0]) + arr(item[1], i32) + tail

    body = i8(election_type) if version >= 1 else b""
    body += arr(None if topic_partitions is None else list(topic_partitions.items()), tp)
    body += i32(timeout_ms) + tail
    r = conn.request(ELECT_LEADERS, version, body, flexible=flexible, timeout=timeout_ms / 1000 + 5)
    rs = r.compact_string if flexible else r.string
    rarr = r.compact_array if flexible else r.array
    r.i32()  # throttle_time_ms
    err = r.i16() if version >= 1 else 0
    out = {}

    def part(rr):
        p, e, m = rr.i32(), rr.i16(), rs()
        if flexible:
            rr.tags()
        return p, (e, m)

    def topic(rr):
        name = rs()
        out[name] = dict(rarr(part))
        if flexible:
            rr.tags()

    rarr(topic)
    if flexible:
        r.tags()
    r.end()
    return err, out


def alter_partition_reassignments(conn, version, targets, allow_rf_change=True, timeout_ms=30000):
    """AlterPartitionReassignments at `version` (0-1, flexible). targets: {topic: {partition:
    [replica, ...] or None (cancel)}}. Returns dict(error, message, allow_rf_change (v1),
    partitions={topic: {partition: (error, message)}})."""
    def part(item):
        return i32(item[0]) + compact_array(item[1], i32) + TAGS_NONE

    def topic(item):
        return compact_string(item[0]) + compact_array(list(item[1].items()), part) + TAGS_NONE

    body = i32(timeout_ms) + (boolean(allow_rf_change) if version >= 1 else b"")
    body += compact_array(list(targets.items()), topic) + TAGS_NONE
    r = conn.request(ALTER_PARTITION_REASSIGNMENTS, version, body, flexible=True,
                     timeout=timeout_ms / 1000 + 5)
    out = {"throttle": r.i32()}
    out["allow_rf_change"] = r.boolean() if version >= 1 else None
    out["error"], out["message"] = r.i16(), r.compact_string()
    parts = out["partitions"] = {}

    def rpart(rr):
        p, e, m = rr.i32(), rr.i16(), rr.compact_string()
        rr.tags()
        return p, (e, m)

    def rtopic(rr):
        name = rr.compact_string()
        parts[name] = dict(rr.compact_array(rpart))
        rr.tags()

    r.compact_array(rtopic)
    r.tags()
    r.end()
    return out


def list_partition_reassignments(conn, topics=None, timeout_ms=30000):
    """ListPartitionReassignments v0. topics: {topic: [partition, ...]} or None (all).
    Returns (error, message, {topic: {partition: (replicas, adding, removing)}})."""
    def topic(item):
        return compact_string(item[0]) + compact_array(item[1], i32) + TAGS_NONE

    body = i32(timeout_ms)
    body += compact_array(None if topics is None else list(topics.items()), topic) + TAGS_NONE
    r = conn.request(LIST_PARTITION_REASSIGNMENTS, 0, body, flexible=True)
    r.i32()  # throttle_time_ms
    err, msg = r.i16(), r.compact_string()
    out = {}

    def rpart(rr):
        p = rr.i32()
        v = tuple(rr.compact_array(lambda q: q.i32()) for _ in range(3))
        rr.tags()
        return p, v

    def rtopic(rr):
        name = rr.compact_string()
        out[name] = dict(rr.compact_array(rpart))
        rr.tags()

    r.compact_array(rtopic)
    r.tags()
    r.end()
    return err, msg, out


# ---- OffsetFetch v0/v1 (the classic form: one group, named partitions) ----

OFFSET_FETCH = 9


def offset_fetch_classic(conn, version, group, topic, partitions):
    """OffsetFetch v0 or v1 (same layout) for one topic's partitions, parsed with an exact
    end check; returns {partition: (committed_offset, metadata, error_code)}."""
    assert version in (0, 1)
    body = string(group) + array([topic], lambda t: string(t) + array(partitions, i32))
    r = conn.request(OFFSET_FETCH, version, body)
    out = {}

    def part(rr):
        p, off, md, err = rr.i32(), rr.i64(), rr.string(), rr.i16()
        out[p] = (off, md, err)

    def tp(rr):
        assert rr.string() == topic
        rr.array(part)

    r.array(tp)
    r.end()
    return out
