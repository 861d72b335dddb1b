#!/usr/bin/python3
"""single_broker.py — one broker's start-up time and produce throughput, one server binary
against another in the same run (issue 20: a single broker became a one-voter controller
quorum; this is the before/after check that it costs nothing).

For each binary (--before, --after; release builds), alternating from one repetition to the
next so drift in the machine's load hits both alike:

  start   a fresh data directory, exec strata-server --smp 1, wait for the Kafka port to accept
          connections, then a Metadata request (kcat -L) every 5 ms until one is answered with
          the broker listed; the time from exec to that answer, in ms (kcat's own start, about
          10 ms here, included). Then a topic is created and the time to its first successful produce
          (kcat -P, acks=all) measured too ("first produce").
  restart after the produce run, the broker is stopped (SIGTERM) and started again on the same
          directory: exec to the first Metadata answer again.
  produce `strata bench produce` on the running broker: --count records of --size bytes,
          acks=all, 1 partition, librdkafka's defaults otherwise (linger.ms 5); MB/s.

Every setting of the broker at its default (strict durability: each acks=all answer after an
fdatasync). Prints each run on stderr, then medians, p99 (the largest but one of a small
sample is not a p99: with fewer than 100 starts it prints the maximum), and the after/before
ratio.

    bench/single_broker.py --before /work/before/strata-server --after build/strata-server \
        --cli build/strata --reps 20
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_metadata(port, deadline):
    # the port first (a kcat started before it listens waits out librdkafka's reconnect
    # backoff), then Metadata until the broker lists itself
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.002)
    while time.monotonic() < deadline:
        r = subprocess.run(["kcat", "-L", "-b", "127.0.0.1:%d" % port, "-m", "1"],
                           capture_output=True, text=True)
        if r.returncode == 0 and "1 brokers" in r.stdout:
            return True
        time.sleep(0.005)
    return False


def one_run(binary, cli, size, count):
    d = tempfile.mkdtemp(prefix="strata-sb-")
    port, admin = free_port(), free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen([binary, "--smp", "1", "--set", "log.dirs=" + d,
                             "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                             "--set", "admin.listen=127.0.0.1:%d" % admin],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_metadata(port, t0 + 10):
            raise RuntimeError("%s: no Metadata answer within 10 s" % binary)
        start_ms = (time.monotonic() - t0) * 1000
        t1 = time.monotonic()
        first = None
        while time.monotonic() < t1 + 10:
            r = subprocess.run(["kcat", "-P", "-b", "127.0.0.1:%d" % port, "-t", "first",
                                "-X", "acks=all", "-X", "topic.metadata.refresh.interval.ms=10"],
                               input="x\n", capture_output=True, text=True, timeout=20)
            if r.returncode == 0:
                first = (time.monotonic() - t1) * 1000
                break
        r = subprocess.run([cli, "bench", "produce", "-b", "127.0.0.1:%d" % port, "--json",
                            "--size", str(size), "--count", str(count), "--acks", "all"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("bench produce failed: %s" % r.stderr[-500:])
        mbs = json.loads(r.stdout)["mb_per_sec"]
        proc.terminate()
        proc.wait(timeout=30)
        # a restart on the same directory (its topics and logs kept)
        t2 = time.monotonic()
        proc = subprocess.Popen([binary, "--smp", "1", "--set", "log.dirs=" + d,
                                 "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                                 "--set", "admin.listen=127.0.0.1:%d" % admin],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_metadata(port, t2 + 10):
            raise RuntimeError("%s: no Metadata answer within 10 s of a restart" % binary)
        restart_ms = (time.monotonic() - t2) * 1000
        return start_ms, first, mbs, restart_ms
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(d, ignore_errors=True)


def summary(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return "n/a"
    tail = xs[-1] if len(xs) < 100 else xs[int(len(xs) * 0.99)]
    return "p50 %.1f, %s %.1f (n=%d)" % (statistics.median(xs),
                                          "max" if len(xs) < 100 else "p99", tail, len(xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--count", type=int, default=200000)
    a = ap.parse_args()
    res = {"before": [], "after": []}
    for i in range(a.reps):
        order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
        for which in order:
            r = one_run(getattr(a, which), a.cli, a.size, a.count)
            res[which].append(r)
            print("%s rep %d: start %.1f ms, first produce %s ms, %.1f MB/s, restart %.1f ms" %
                  (which, i, r[0], "%.1f" % r[1] if r[1] is not None else "-", r[2], r[3]),
                  file=sys.stderr)
    print("| | before | after | after/before (p50) |")
    print("| --- | --- | --- | --- |")
    for k, name in [(0, "start to Metadata, ms"), (1, "then to first acks=all produce, ms"),
                    (2, "produce MB/s (%d B, acks=all, 1 partition)" % a.size),
                    (3, "restart on the same directory to Metadata, ms")]:
        b = [r[k] for r in res["before"]]
        f = [r[k] for r in res["after"]]
        bm = statistics.median([x for x in b if x is not None])
        fm = statistics.median([x for x in f if x is not None])
        print("| %s | %s | %s | %.2f |" % (name, summary(b), summary(f), fm / bm))


if __name__ == "__main__":
    main()
