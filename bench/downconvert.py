#!/usr/bin/python3
"""downconvert.py — Fetch v3 down-conversion against a v12 fetch of the same data (issue 27).

Starts, on 127.0.0.1, a release `strata-server` (--smp 1 unless told; its own temporary data
directory and free ports, every setting at its default) and writes, with confluent-kafka
(librdkafka, v2 batches, linger 5 ms), --mib MiB of --size-byte records with 8-byte keys (values
half text, half random bytes) into
one partition per codec (none, lz4, gzip by default: the stored batches' codec). Then, for each
codec and repetition, one connection reads the whole partition from offset 0 to the high
watermark twice, one after the other, alternating which goes first:

  - v3:  Fetch v3 (partition_max_bytes and max_bytes 1 MiB): the broker reads the batches into
         memory and converts them to message format v1 (a wrapper per compressed batch,
         recompressed with its codec; one message per record otherwise);
  - v12: Fetch v12, same sizes: the batches go from the file with sendfile, unconverted.

Only request-to-last-byte time counts (the client's parsing of offsets is outside it). Reported:
MiB/s of stored (v2) data scanned and records/s per pass (median over repetitions), and the
per-request latency p50/p99 pooled over all repetitions. Prints each pass on stderr and a
Markdown table; --json writes the raw figures.

    /usr/bin/python3 bench/downconvert.py [--server build/strata-server] [--reps 5] [--mib 32]
        [--size 200] [--codecs none,lz4,gzip] [--smp 1] [--json F]
"""

import argparse
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

CHUNK = 1 << 20


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def fetch3(kw, topic, offset):
    return (kw.i32(-1) + kw.i32(0) + kw.i32(1) + kw.i32(CHUNK) + kw.i32(1) + kw.string(topic)
            + kw.i32(1) + kw.i32(0) + kw.i64(offset) + kw.i32(CHUNK))


def fetch12(kw, topic, offset):
    part = (kw.i32(0) + kw.i32(-1) + kw.i64(offset) + kw.i32(-1) + kw.i64(-1) + kw.i32(CHUNK)
            + kw.TAGS_NONE)
    t = kw.compact_string(topic) + kw.uvarint(2) + part + kw.TAGS_NONE
    return (kw.i32(-1) + kw.i32(0) + kw.i32(1) + kw.i32(CHUNK) + kw.i8(0) + kw.i32(0)
            + kw.i32(-1) + kw.uvarint(2) + t + kw.uvarint(1) + kw.compact_string("")
            + kw.TAGS_NONE)


def records_v3(r):
    r.i32()
    r.i32()
    r.string()
    r.i32()
    r.i32()
    err, hw = r.i16(), r.i64()
    n = r.i32()
    return err, hw, bytes(r.take(n)) if n > 0 else b""


def records_v12(r):
    r.i32(), r.i16(), r.i32()
    r.uvarint()
    r.compact_string()
    r.uvarint()
    r.i32()
    err, hw = r.i16(), r.i64()
    r.i64(), r.i64()
    r.compact_array(lambda rr: (rr.i64(), rr.i64(), rr.tags()))
    r.i32()
    n = r.uvarint()
    return err, hw, bytes(r.take(n - 1)) if n > 1 else b""


def next_legacy(recs):
    """The offset after the last whole message of a magic 1 set, and how many it holds (a
    wrapper counts its inner messages by its offset span from the previous one)."""
    pos, last = 0, None
    while pos + 12 <= len(recs):
        off, size = struct.unpack_from(">qi", recs, pos)
        if pos + 12 + size > len(recs):
            break
        last = off
        pos += 12 + size
    return None if last is None else last + 1


def next_v2(recs):
    pos, last = 0, None
    while pos + 61 <= len(recs):
        base, length = struct.unpack_from(">qi", recs, pos)
        if pos + 12 + length > len(recs):
            break
        last = base + struct.unpack_from(">i", recs, pos + 23)[0]
        pos += 12 + length
    return None if last is None else last + 1


def one_pass(conn, kw, topic, version, end):
    """Reads [0, end); returns (seconds in requests, [per-request seconds], bytes received)."""
    off, lat, got = 0, [], 0
    for _ in range(1000000):
        if off >= end:
            break
        t0 = time.perf_counter()
        if version == 3:
            r = conn.request(1, 3, fetch3(kw, topic, off), timeout=60)
            lat.append(time.perf_counter() - t0)
            err, hw, recs = records_v3(r)
            nxt = next_legacy(recs)
        else:
            r = conn.request(1, 12, fetch12(kw, topic, off), flexible=True, timeout=60)
            lat.append(time.perf_counter() - t0)
            err, hw, recs = records_v12(r)
            nxt = next_v2(recs)
        if err != 0 or nxt is None or nxt <= off:
            raise SystemExit("downconvert: fetch v%d at %d: error %d, no progress" %
                             (version, off, err))
        got += len(recs)
        off = nxt
    return sum(lat), lat, got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", default=None)
    ap.add_argument("--smp", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--codecs", default="none,lz4,gzip")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    server_bin = args.server
    if not server_bin:
        for b in ("build-rel", "build", "build-bench"):
            c = os.path.join(ROOT, b, "strata-server")
            if os.access(c, os.X_OK):
                server_bin = c
                break
    if not server_bin or not os.access(server_bin, os.X_OK):
        sys.exit("downconvert: no strata-server (pass --server)")
    os.environ.pop("STRATA_BOOTSTRAP", None)
    top = tempfile.mkdtemp(prefix="downconvert-")
    tempfile.tempdir = top
    server_copy = os.path.join(top, "strata-server")
    shutil.copy2(server_bin, server_copy)
    os.environ["STRATA_SERVER"] = server_copy
    import harness
    import kclients as kc
    import kwire as kw
    from confluent_kafka import Producer

    srv = harness.Server(smp=args.smp, sets={"auto.create.topics.enable": "false"},
                         name="downconvert-bench")
    rows, raw = [], []
    try:
        srv.start()
        nrec = args.mib * (1 << 20) // args.size
        # values half text, half random bytes: compressible about 2:1, like typical payloads
        rnd = [os.urandom((args.size - 8) // 2) for _ in range(1000)]
        text = (b"downconvert-bench " * (args.size // 18 + 1))[:args.size - 8 - len(rnd[0])]
        for codec in args.codecs.split(","):
            topic = "dc-" + codec
            kc.create_topic(srv.bootstrap, topic, 1)
            p = Producer({"bootstrap.servers": srv.bootstrap, "linger.ms": 5,
                          "compression.type": codec, "batch.size": 1 << 20,
                          "queue.buffering.max.messages": 1000000})
            for i in range(nrec):
                while True:
                    try:
                        p.produce(topic, key=b"%08d" % (i % 10**8), value=text + rnd[i % 1000],
                                  partition=0)
                        break
                    except BufferError:
                        p.poll(0.05)
            if p.flush(120) != 0:
                raise SystemExit("downconvert: produce did not finish")
            passes = {3: [], 12: []}
            lats = {3: [], 12: []}
            with kw.Conn.to(srv.bootstrap, timeout=60) as conn:
                for rep in range(args.reps):
                    order = (3, 12) if rep % 2 == 0 else (12, 3)
                    for v in order:
                        secs, lat, got = one_pass(conn, kw, topic, v, nrec)
                        passes[v].append(secs)
                        lats[v] += lat
                        print("%-5s v%-2d rep %d: %.3f s, %d requests, %.1f MiB sent" %
                              (codec, v, rep, secs, len(lat), got / 2**20), file=sys.stderr)
            stored = sum(os.path.getsize(os.path.join(dp, f))
                         for dp, _, fs in os.walk(srv.data_dir)
                         if os.path.basename(dp).startswith(topic + "-")
                         for f in fs if f.endswith(".log"))
            for v in (3, 12):
                med = statistics.median(passes[v])
                rows.append((codec, v, stored / 2**20 / med, nrec / med,
                             1e3 * pct(lats[v], 0.5), 1e3 * pct(lats[v], 0.99)))
            raw.append({"codec": codec, "records": nrec, "stored_bytes": stored,
                        "passes": passes, "latencies": lats})
    finally:
        srv.close()
        shutil.rmtree(top, ignore_errors=True)
    print("\n| codec | fetch | stored MiB/s | records/s | request p50 ms | request p99 ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for codec, v, mibs, rps, p50, p99 in rows:
        print("| %s | v%d%s | %.0f | %.0f | %.2f | %.2f |" % (
            codec, v, " (to magic 1)" if v == 3 else " (sendfile)", mibs, rps, p50, p99))
    print("\n%d MiB of %d-byte records per codec, %d repetitions, --smp %d, 1 MiB per fetch, "
          "one connection, %s" % (args.mib, args.size, args.reps, args.smp, server_bin))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f)


if __name__ == "__main__":
    main()
