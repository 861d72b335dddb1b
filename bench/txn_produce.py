#!/usr/bin/python3
"""txn_produce.py — transactional produce against the idempotent producer (issue 21).

Starts, on 127.0.0.1, a release `strata-server` (--smp 1 unless told; its own temporary data
directory and free ports, every setting at its default: strict durability, each acks=all answer
after an fdatasync covering the records; the transaction log on one replica, min.isr 1, since
there is one broker) and measures with confluent-kafka (librdkafka), one producer, 1 KiB
records, acks=all, one partition:

  - txn S: transactions of S records (S = 1, 10, 100, 1000): begin_transaction, S produce(),
    commit_transaction, one after the other. Commit latency = the commit_transaction() call
    (it flushes the transaction's records, then EndTxn: PrepareCommit written, answered; the
    markers follow); transaction latency = begin to commit returned; records/s over the run.
  - idem S: the idempotent producer (enable.idempotence=true) in the same shape: S produce()
    then flush(), one batch after the other: flush latency and records/s. The difference is
    what a transaction costs over the same synchronous batches of records.

Each (mode, S) runs for --secs seconds or --max-txns batches, whichever first, after a short
warm-up; modes alternate within each repetition (--reps) so drift in the machine's load hits
both alike. Fresh topic per run. Prints each run on stderr and a Markdown table of medians over
the repetitions (p50/p99/p99.9 from all batches of all repetitions pooled).

    /usr/bin/python3 bench/txn_produce.py [--server build-rel/strata-server] [--reps 3]
        [--secs 5] [--sizes 1,10,100,1000] [--smp 1] [--json F]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

RECORD = 1024
WARMUP = 5           # batches before the measured ones


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def one_run(bootstrap, mode, size, secs, max_batches, tag):
    import kclients as kc
    from confluent_kafka import Producer
    topic = "bench-%s-%d-%s" % (mode, size, tag)
    kc.create_topic(bootstrap, topic, 1)
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
            "enable.idempotence": True, "queue.buffering.max.messages": 100000,
            "batch.size": 1 << 20}
    if mode == "txn":
        conf["transactional.id"] = "bench-tid-%d-%s" % (size, tag)
    p = Producer(conf)
    value = b"x" * RECORD
    if mode == "txn":
        p.init_transactions(30)
    lat, whole = [], []
    n_batches, t_start = 0, None
    deadline = time.monotonic() + secs + 30
    while True:
        if n_batches == WARMUP:
            t_start = time.monotonic()
        if t_start is not None and (time.monotonic() - t_start >= secs
                                    or n_batches - WARMUP >= max_batches):
            break
        if time.monotonic() > deadline:
            raise SystemExit("txn_produce: %s %d stalled" % (mode, size))
        t0 = time.monotonic()
        if mode == "txn":
            p.begin_transaction()
        for _ in range(size):
            while True:
                try:
                    p.produce(topic, value=value, partition=0)
                    break
                except BufferError:
                    p.poll(0.001)
        t1 = time.monotonic()
        if mode == "txn":
            p.commit_transaction(30)
        else:
            left = p.flush(30)
            if left:
                raise SystemExit("txn_produce: %d records not delivered" % left)
        t2 = time.monotonic()
        if n_batches >= WARMUP:
            lat.append(t2 - t1)
            whole.append(t2 - t0)
        n_batches += 1
    elapsed = time.monotonic() - t_start
    batches = n_batches - WARMUP
    return {"mode": mode, "size": size, "batches": batches, "secs": elapsed,
            "records_per_s": batches * size / elapsed, "commit_s": lat, "batch_s": whole}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", default=None,
                    help="strata-server (default: build-rel/, build/, build-bench/)")
    ap.add_argument("--smp", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--secs", type=float, default=5.0)
    ap.add_argument("--max-txns", type=int, default=2000, help="batches per run at most")
    ap.add_argument("--sizes", default="1,10,100,1000")
    ap.add_argument("--modes", default="txn,idem", help="txn, idem or both (the default)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    server_bin = args.server
    if not server_bin:
        for b in ("build-rel", "build", "build-bench"):
            c = os.path.join(ROOT, b, "strata-server")
            if os.access(c, os.X_OK):
                server_bin = c
                break
    if not server_bin or not os.access(server_bin, os.X_OK):
        sys.exit("txn_produce: no strata-server (pass --server)")
    os.environ.pop("STRATA_BOOTSTRAP", None)
    top = tempfile.mkdtemp(prefix="txn-produce-")
    tempfile.tempdir = top
    server_copy = os.path.join(top, "strata-server")
    shutil.copy2(server_bin, server_copy)
    os.environ["STRATA_SERVER"] = server_copy
    import harness
    import subprocess
    helptext = subprocess.run([server_copy, "--help"], capture_output=True, text=True).stdout
    sets = {"auto.create.topics.enable": "false"}
    if "transaction.state.log.replication.factor" in helptext:
        sets.update({"transaction.state.log.replication.factor": "1",
                     "transaction.state.log.min.isr": "1"})
    sets.update(dict(kv.split("=", 1) for kv in args.set))
    srv = harness.Server(smp=args.smp, sets=sets, name="txn-bench")
    runs = []
    try:
        srv.start()
        for rep in range(args.reps):
            for size in sizes:
                modes = [m for m in ("txn", "idem") if m in args.modes.split(",")]
                for mode in (modes if rep % 2 == 0 else modes[::-1]):
                    r = one_run(srv.bootstrap, mode, size, args.secs, args.max_txns,
                                "%d-%d" % (rep, os.getpid()))
                    runs.append(r)
                    print("rep %d %s %4d: %5d batches %6.0f rec/s  p50 %.2f ms  p99 %.2f ms"
                          % (rep, mode, size, r["batches"], r["records_per_s"],
                             pct(r["commit_s"], 0.5) * 1e3, pct(r["commit_s"], 0.99) * 1e3),
                          file=sys.stderr, flush=True)
        srv.stop()
    finally:
        srv.close()
        shutil.rmtree(top, ignore_errors=True)
    load = os.getloadavg()
    print("\n%s, --smp %d, %d repetitions of %.0f s, load average %.2f %.2f %.2f\n"
          % (os.path.basename(server_bin), args.smp, args.reps, args.secs, *load))
    print("| records per batch | producer | records/s (median) | commit/flush p50 ms | p99 ms "
          "| p99.9 ms | batch p50 ms | batches |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in sizes:
        for mode in ("idem", "txn"):
            rs = [r for r in runs if r["mode"] == mode and r["size"] == size]
            if not rs:
                continue
            lat = [x for r in rs for x in r["commit_s"]]
            whole = [x for r in rs for x in r["batch_s"]]
            print("| %d | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %d |" % (
                size, "transactional" if mode == "txn" else "idempotent",
                statistics.median(r["records_per_s"] for r in rs), pct(lat, 0.5) * 1e3,
                pct(lat, 0.99) * 1e3, pct(lat, 0.999) * 1e3, pct(whole, 0.5) * 1e3,
                sum(r["batches"] for r in rs)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f)


if __name__ == "__main__":
    main()
