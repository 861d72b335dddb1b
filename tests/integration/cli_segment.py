"""cli_segment.py — writes Kafka RecordBatch v2 segment files for the CLI's dump-log tests.

Pure Python (CRC-32C included) so the tests need neither a broker nor a Kafka install.
Layout as in src/storage/batch.h.
"""
import struct

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _varint(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)  # zigzag
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _record(delta: int, ts_delta: int, key, value, headers=()) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _varint(ts_delta) + _varint(delta)
    for field in (key, value):
        if field is None:
            body += _varint(-1)
        else:
            body += _varint(len(field)) + field
    body += _varint(len(headers))
    for hk, hv in headers:
        body += _varint(len(hk)) + hk + _varint(len(hv)) + hv
    return _varint(len(body)) + bytes(body)


def batch(base_offset: int, records, base_ts: int = 1700000000000) -> bytes:
    """records: list of (key, value) byte pairs. Returns one uncompressed batch."""
    recs = b"".join(_record(i, i, k, v) for i, (k, v) in enumerate(records))
    n = len(records)
    after_crc = struct.pack(">hiqqqhii", 0, n - 1, base_ts, base_ts + n - 1, -1, -1, -1, n) + recs
    crc = crc32c(after_crc)
    after_len = struct.pack(">ibI", 0, 2, crc) + after_crc
    return struct.pack(">qi", base_offset, len(after_len)) + after_len


def corrupt_crc(data: bytearray, batch_pos: int) -> None:
    """Flips a byte inside the CRC-covered part of the batch at batch_pos."""
    data[batch_pos + 61 + 2] ^= 0xFF


def _read_varint(b: bytes, pos: int):
    v = shift = 0
    while True:
        c = b[pos]
        pos += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return (v >> 1) ^ -(v & 1), pos


def records(batch_bytes: bytes):
    """(key, value) pairs of one uncompressed batch, the inverse of batch()."""
    (n,) = struct.unpack_from(">i", batch_bytes, 57)
    pos, out = 61, []
    for _ in range(n):
        _, pos = _read_varint(batch_bytes, pos)  # length
        pos += 1  # attributes
        _, pos = _read_varint(batch_bytes, pos)  # timestamp delta
        _, pos = _read_varint(batch_bytes, pos)  # offset delta
        fields = []
        for _f in range(2):
            ln, pos = _read_varint(batch_bytes, pos)
            fields.append(None if ln < 0 else bytes(batch_bytes[pos:pos + ln]))
            pos += max(ln, 0)
        nh, pos = _read_varint(batch_bytes, pos)
        for _h in range(nh):
            for _f in range(2):
                ln, pos = _read_varint(batch_bytes, pos)
                pos += max(ln, 0)
        out.append((fields[0], fields[1]))
    return out
