#!/usr/bin/python3
"""replicated_produce.py — replicated produce, RF=3 against RF=1 in the same run (issue 13).

Starts three combined nodes (process.roles=broker,controller, --smp 1 each, every setting at
its default: strict durability, write.caching=false) of the release build on loopback ports,
each with its own data directory under one directory (default build/bench-data/replicated, the
same disk as the build), and creates two topics with the same partition count:

  rf1  replication factor 1
  rf3  replication factor 3, min.insync.replicas=2

It waits until every broker's Metadata shows every partition led and rf3's ISR complete
(3 replicas), sends one warm-up run to each topic, then, for each repetition, measures with
`strata bench produce` (librdkafka, one producer, 1 KiB records, acks=all) and alternating
the order of the two topics from one repetition to the next:

  throughput  --count N (200,000) as fast as the client goes, librdkafka's defaults
              (linger.ms 5, batch.size 1 MB): MB/s from the first send to the last ack;
  latency     --rate R --duration D --linger 1 for each fixed rate (5 and 20 MB/s, 1 MB =
              10^6 bytes as `strata bench` counts): p50/p99/p99.9 from each record's
              *intended* send time to its delivery report (no coordinated omission).

With acks=all an RF=3 answer leaves the leader only once both followers have fetched the batch,
fsynced it and reported the durable position in their next fetch (the high watermark covers
it); an RF=1 answer after the leader's own fsync. After every rf3 run it checks that no
partition's ISR shrank (a shrunken ISR would make it an RF=2 measurement), and after every run
that all three brokers are still up. Prints each run, then a Markdown table of medians
(min–max) and the RF=3/RF=1 ratios (of the medians, and the median of each repetition's
ratio). Every wait and every client run is bounded; the brokers are stopped by PID on the way
out, also on failure or SIGTERM/SIGINT (their last log lines printed on failure).

    make release
    /usr/bin/python3 bench/replicated_produce.py [--reps 3] [--count 200000] [--partitions 3]
        [--rates 5,20] [--lat-secs 8] [--json F] [--keep-logs DIR]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

import cluster as clu  # noqa: E402
import harness  # noqa: E402

TOPICS = ("rf3", "rf1")
RF = {"rf1": 1, "rf3": 3}
MB = 1e6                  # as `strata bench` counts MB/s


class BenchError(Exception):
    pass


def wait_for(cond, timeout, what, interval=0.1):
    """Poll cond() until truthy (returned); BenchError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # a broker may not answer yet
            last = e
        if time.monotonic() >= deadline:
            raise BenchError("timed out after %.0fs waiting for %s%s" % (
                timeout, what, "" if last is None else " (last: %r)" % (last,)))
        time.sleep(interval)


def cpu_s(pid):
    """CPU seconds (user + system) process pid has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu_s():
    """CPU seconds the finished children (the `strata bench` runs) have used so far."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def create_topics(bootstrap, parts, timeout):
    a = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000)})
    fs = a.create_topics([NewTopic("rf1", parts, 1),
                          NewTopic("rf3", parts, 3, config={"min.insync.replicas": "2"})],
                         operation_timeout=timeout, request_timeout=timeout)
    for name, f in fs.items():
        f.result(timeout + 5)
    # Read back what the broker holds for rf3 (and that rf1 kept the defaults).
    out = {}
    res = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t) for t in TOPICS],
                             request_timeout=timeout)
    for r, f in res.items():
        cfg = f.result(timeout + 5)
        out[r.name] = {k: cfg[k].value for k in ("min.insync.replicas", "write.caching")
                       if k in cfg}
    return out


def topic_state(c, nid, name):
    """{partition: (leader, replicas, isr)} of `name` as node `nid` reports it."""
    t = c.metadata(nid, [name], timeout=5)["topics"].get(name)
    if t is None or t["error"] != 0:
        return None
    return {i: (p["leader"], sorted(p["replicas"]), sorted(p["isr"]))
            for i, p in t["partitions"].items() if p["error"] == 0}


def ready(c, parts):
    """Every node shows both topics with every partition led, rf3's ISR = its 3 replicas."""
    for nid in c.nodes:
        for name in TOPICS:
            st = topic_state(c, nid, name)
            if st is None or len(st) != parts:
                return False
            for leader, replicas, isr in st.values():
                if leader < 0 or len(replicas) != RF[name] or isr != replicas:
                    return False
    return True


def check_alive(c):
    dead = [nid for nid, n in c.nodes.items() if not n.alive()]
    if dead:
        raise BenchError("broker(s) %s exited (status %s)" % (
            dead, {nid: c.nodes[nid].server.proc.poll() for nid in dead}))


def bench(cli, bootstrap, topic, args, rate_mb=None, count=None):
    """One `strata bench produce`; returns its JSON summary plus the wall time."""
    cmd = [cli, "bench", "produce", "-b", bootstrap, "--topic", topic,
           "--size", str(args.size), "--acks", "all", "--json"]
    if rate_mb is None:
        cmd += ["--count", str(count)]
        timeout = args.run_timeout
    else:
        rate = int(round(rate_mb * MB / args.size))
        cmd += ["--rate", str(rate), "--duration", "%ds" % args.lat_secs, "--linger", "1"]
        timeout = args.lat_secs + args.run_timeout
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise BenchError("%s: no result within %.0fs (killed); stderr tail:\n%s" % (
            " ".join(cmd), timeout, (e.stderr or b"").decode(errors="replace")[-2000:]))
    wall = time.monotonic() - t0
    out = r.stdout.decode(errors="replace").strip()
    if r.returncode != 0 or not out:
        raise BenchError("%s: exit %d\nstdout: %s\nstderr tail:\n%s" % (
            " ".join(cmd), r.returncode, out[-2000:],
            r.stderr.decode(errors="replace")[-2000:]))
    res = json.loads(out.splitlines()[-1])
    if res.get("failed"):
        raise BenchError("%s: %d messages failed" % (" ".join(cmd), res["failed"]))
    if count is not None and res.get("messages") != count:
        raise BenchError("%s: %s of %d messages acknowledged" % (
            " ".join(cmd), res.get("messages"), count))
    res["wall_s"] = wall
    return res


def summarize(vals):
    return statistics.median(vals), min(vals), max(vals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--count", type=int, default=200000, help="records per throughput run")
    ap.add_argument("--size", type=int, default=1024, help="record size, bytes")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rates", default="5,20", help="fixed rates for latency, MB/s")
    ap.add_argument("--lat-secs", type=int, default=8, help="length of each latency run, s")
    ap.add_argument("--warmup", type=int, default=20000, help="records per warm-up run")
    ap.add_argument("--run-timeout", type=float, default=120,
                    help="deadline of each client run (latency runs: past their duration), s")
    ap.add_argument("--server", default=os.path.join(ROOT, "build", "strata-server"))
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "strata"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "bench-data", "replicated"),
                    help="parent of the temporary directory (binaries, data, logs)")
    ap.add_argument("--json", default=None, help="write every run's figures here")
    ap.add_argument("--keep-logs", default=None, help="copy the brokers' logs to this dir")
    args = ap.parse_args()
    rates = [float(x) for x in args.rates.split(",") if x]
    for b in (args.server, args.cli):
        if not os.access(b, os.X_OK):
            sys.exit("replicated_produce: %s not found: run `make release` first" % b)
    os.environ.pop("STRATA_BOOTSTRAP", None)
    os.makedirs(args.dir, exist_ok=True)
    top = tempfile.mkdtemp(prefix="run-", dir=args.dir)
    tempfile.tempdir = top        # every node's harness.Server makes its directory here
    # Run copies: a `make release` elsewhere during the runs must not swap the binaries.
    server = os.path.join(top, "strata-server")
    cli = os.path.join(top, "strata")
    shutil.copy2(args.server, server)
    shutil.copy2(args.cli, cli)
    os.environ["STRATA_SERVER"] = server

    def on_term(signum, frame):
        raise SystemExit("replicated_produce: signal %d" % signum)
    signal.signal(signal.SIGTERM, on_term)

    start = time.monotonic()

    def log(msg):
        print("[%7.1fs] %s" % (time.monotonic() - start, msg), file=sys.stderr, flush=True)

    runs = []          # dict(rep, kind, topic, rate_mb, result)
    meta = {"partitions": args.partitions, "size": args.size, "count": args.count,
            "rates_mb": rates, "lat_secs": args.lat_secs, "reps": args.reps,
            "nproc": os.cpu_count(), "loadavg_start": loadavg()}
    c = clu.Cluster(3, smp=1, name="repl", election_timeout_ms=1000)
    failed = False
    try:
        bootstrap = ",".join(n.bootstrap for n in c.nodes.values())
        c.start(timeout=60)
        ctrl = c.wait_for_quorum(timeout=60)
        log("cluster up, controller %d; brokers %s" % (ctrl, bootstrap))
        meta["topic_configs"] = create_topics(bootstrap, args.partitions, 30)
        wait_for(lambda: ready(c, args.partitions), 60,
                 "both topics led on every broker and rf3's ISR complete")
        meta["layout"] = {t: {str(i): {"leader": v[0], "replicas": v[1], "isr": v[2]}
                              for i, v in topic_state(c, 1, t).items()} for t in TOPICS}
        log("topics: %s" % json.dumps(meta["layout"]))
        log("configs read back: %s" % json.dumps(meta["topic_configs"]))
        for t in TOPICS:
            r = bench(cli, bootstrap, t, args, count=args.warmup)
            log("warm-up %s: %d records, %.1f MB/s" % (t, r["messages"], r["mb_per_sec"]))
        check_alive(c)

        def one(rep, kind, topic, rate_mb=None):
            la = loadavg()
            b0 = sum(cpu_s(n.pid) for n in c.nodes.values())
            c0 = client_cpu_s()
            if rate_mb is None:
                r = bench(cli, bootstrap, topic, args, count=args.count)
            else:
                r = bench(cli, bootstrap, topic, args, rate_mb=rate_mb)
            check_alive(c)
            mb = r["messages"] * args.size / MB
            r["broker_cpu_ms_per_mb"] = (sum(cpu_s(n.pid) for n in c.nodes.values()) - b0) \
                * 1000 / mb
            r["client_cpu_ms_per_mb"] = (client_cpu_s() - c0) * 1000 / mb
            isr_min = None
            if topic == "rf3":
                st = topic_state(c, 1, "rf3")
                isr_min = min(len(v[2]) for v in st.values())
                if isr_min < 3:
                    log("WARNING: rf3 ISR shrank to %d after this run: %s" % (isr_min, st))
            lat = r.get("latency_ms", {})
            log("rep %d %-10s %s: %7.1f MB/s %8.0f msgs/s  p50 %.2f p99 %.2f p99.9 %.2f "
                "max %.2f ms  (load %.2f)" % (
                    rep, kind, topic, r["mb_per_sec"], r["msgs_per_sec"], lat.get("p50", -1),
                    lat.get("p99", -1), lat.get("p99_9", -1), lat.get("max", -1), la))
            runs.append({"rep": rep, "kind": kind, "topic": topic, "rate_mb": rate_mb,
                         "loadavg": la, "isr_min": isr_min, "result": r})

        for rep in range(1, args.reps + 1):
            order = TOPICS if rep % 2 else TOPICS[::-1]
            for t in order:
                one(rep, "throughput", t)
            for rate in rates:
                for t in order:
                    one(rep, "lat@%g" % rate, t, rate)
        meta["loadavg_end"] = loadavg()
    except BaseException:
        failed = True
        log("FAILED; last lines of each broker's log:\n%s" % c.logs(25))
        raise
    finally:
        if args.keep_logs:
            os.makedirs(args.keep_logs, exist_ok=True)
            for nid, n in c.nodes.items():
                for f in sorted(os.listdir(n.server.tmp)):
                    if f.startswith("stderr."):
                        shutil.copy(os.path.join(n.server.tmp, f),
                                    os.path.join(args.keep_logs, "n%d-%s" % (nid, f)))
        try:
            if not failed:
                c.stop_all()          # SIGTERM, clean exits asserted
        finally:
            c.close()                 # kills by PID whatever is left
            shutil.rmtree(top, ignore_errors=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"meta": meta, "runs": runs}, f, indent=1)

    # ---- summary ------------------------------------------------------------------------
    def vals(kind, topic, key):
        out = []
        for r in runs:
            if r["kind"] == kind and r["topic"] == topic:
                out.append(r["result"]["mb_per_sec"] if key == "mbs"
                           else r["result"]["latency_ms"][key])
        return out

    def paired(kind, key):
        by = {}
        for r in runs:
            if r["kind"] == kind:
                v = (r["result"]["mb_per_sec"] if key == "mbs"
                     else r["result"]["latency_ms"][key])
                by.setdefault(r["rep"], {})[r["topic"]] = v
        return [d["rf3"] / d["rf1"] for d in by.values() if d.get("rf1")]

    rows = [("throughput", "mbs", "produce MB/s, %d x %d B, max rate" % (args.count, args.size))]
    for rate in rates:
        k = "lat@%g" % rate
        for key, label in (("p50", "p50"), ("p99", "p99"), ("p99_9", "p99.9")):
            rows.append((k, key, "latency %s ms @ %g MB/s (%d msgs/s, linger 1 ms)" % (
                label, rate, int(round(rate * MB / args.size)))))
    print("\n| metric | RF=1 | RF=3 (min.insync 2) | RF=3/RF=1 (of medians) | "
          "RF=3/RF=1 (median of per-rep ratios) |")
    print("| --- | --- | --- | --- | --- |")
    for kind, key, label in rows:
        a, b = vals(kind, "rf1", key), vals(kind, "rf3", key)
        if not a or not b:
            continue
        ma, mb = summarize(a), summarize(b)
        fmt = "%.1f" if key == "mbs" else "%.2f"
        cell = lambda m: (fmt + " (" + fmt + "–" + fmt + ")") % m  # noqa: E731
        pr = summarize(paired(kind, key))
        print("| %s | %s | %s | **%.2f** | %.2f (%.2f–%.2f) |" % (
            label, cell(ma), cell(mb), mb[0] / ma[0], pr[0], pr[1], pr[2]))
    # The bound a shared machine puts on the ratio: at full speed the brokers and the client
    # share its cores, so RF=3 can go at most as fast as its CPU per MB allows against RF=1's.
    cpu = {}
    for t in TOPICS:
        b = [r["result"]["broker_cpu_ms_per_mb"] for r in runs
             if r["kind"] == "throughput" and r["topic"] == t]
        cl = [r["result"]["client_cpu_ms_per_mb"] for r in runs
              if r["kind"] == "throughput" and r["topic"] == t]
        if b:
            cpu[t] = (statistics.median(b), statistics.median(cl))
    if len(cpu) == 2:
        tot = {t: v[0] + v[1] for t, v in cpu.items()}
        print("\nCPU per MB at full speed (median; all three brokers / the client): RF=1 %.1f / "
              "%.1f ms, RF=3 %.1f / %.1f ms; a machine whose cores are the limit caps "
              "RF=3/RF=1 at %.2f" % (cpu["rf1"][0], cpu["rf1"][1], cpu["rf3"][0], cpu["rf3"][1],
                                    tot["rf1"] / tot["rf3"]))
    isr = [r["isr_min"] for r in runs if r["isr_min"] is not None]
    print("\nrf3 smallest ISR seen after a run: %s; load average %.2f at start, %.2f at end; "
          "%d runs per cell" % (min(isr) if isr else "-", meta["loadavg_start"],
                                meta.get("loadavg_end", float("nan")), args.reps))


if __name__ == "__main__":
    try:
        main()
    except (BenchError, harness.ServerError, harness.WaitTimeout) as e:
        sys.exit("replicated_produce: %s" % e)
