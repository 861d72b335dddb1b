#!/usr/bin/python3
"""produce_latency.py — produce latency by partition count, Strata against librdkafka's mock
(issue 15).

Starts, on 127.0.0.1, a release `strata-server` (--smp 1 unless told; its own temporary data
directory and free ports, every setting at its default: strict durability, each acks=all
answer after an fdatasync covering the records) and librdkafka's in-memory mock cluster
(`strata debug mock-cluster`: never syncs; the floor of the client itself on this machine).
Every measurement is one `strata bench produce` (librdkafka, one producer, 1 KiB records,
acks=all) against each of the two, in alternating order from one repetition to the next, so
drift in the machine's load hits both alike.

Latency mode (fixed rate, open loop): --rate R --duration D --linger 1, records spread over the
topic's N partitions explicitly (--partitioner roundrobin: record i to partition i % N) or, for
a case marked keyed, with key "k<i % N>" hashed by the client (--partitioner keyed). Latency
runs from each record's *intended* send time (start + i/rate; produce() is called then, or
later if the client fell behind) to its delivery report, so a stall is charged to every
record behind it (no coordinated omission); percentiles from the CLI's HDR histogram (within
0.8 %). Cases (RATE@PARTITIONS, MB/s with 1 MB = 10^6 bytes, "k" for keyed):

    20@1 20@8 20@64 50@1 50@8 20@1000k      (the default)

Throughput mode: --tp-count records (300,000) as fast as the client goes, librdkafka's
defaults otherwise (linger.ms 5, batch.size 1 MB), record i to partition i % N, for each
partition count (1, 8) and codec (none, lz4, zstd); MB/s from the first send to the last
delivery report, and the Strata/mock ratio. Strata gets a fresh topic per run, deleted after it
(bounds the disk used). The payload is the CLI's ('a'..'z' repeated), which compresses far
better than real data: the codec figures show the cost of the codec path, not of real ratios.

Prints each run on stderr, then Markdown tables of medians (min-max) over the repetitions, with
the load average, and, from Strata's /metrics over the measured runs, its event-loop iteration
busy times (strata_shard_loop_iteration_seconds: did the shard stall?) and its fdatasync
durations (strata_storage_fsync_duration_seconds: did it wait on the disk?). Every client run
has a deadline, the whole run a budget (--budget, after which no new run starts), and both
servers are stopped by PID on the way out, also on failure or SIGTERM/SIGINT.

    make release      # or: cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release ...
    /usr/bin/python3 bench/produce_latency.py                     # everything, 3 repetitions
    /usr/bin/python3 bench/produce_latency.py --quick             # under a minute
    /usr/bin/python3 bench/produce_latency.py --mode latency --cases 20@1,20@8 --reps 5
    /usr/bin/python3 bench/produce_latency.py --mode throughput --codecs none,zstd
        [--secs 4] [--smp 1] [--server B] [--cli B] [--json F] [--budget 110]
"""

import argparse
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import admin_client as ac  # noqa: E402
import harness  # noqa: E402

MB = 1e6                       # as `strata bench` counts MB/s
SYSTEMS = ("strata", "mock")
DEFAULT_CASES = "20@1,20@8,20@64,50@1,50@8,20@1000k"


class BenchError(Exception):
    pass


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def mount_of(path):
    """(device, fstype) of the file system holding path, from /proc/mounts."""
    path = os.path.realpath(path)
    best = ("?", "?", "")
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[2]):
                best = (dev, fstype, mnt)
    return best[0], best[1]


def parse_cases(spec):
    """'20@1,20@1000k' -> [(20.0, 1, False), (20.0, 1000, True)]."""
    out = []
    for c in spec.split(","):
        c = c.strip()
        if not c:
            continue
        rate, _, parts = c.partition("@")
        keyed = parts.endswith("k")
        try:
            out.append((float(rate), int(parts.rstrip("k")), keyed))
        except ValueError:
            sys.exit("produce_latency: a case is RATE@PARTITIONS[k], not %r" % c)
        if out[-1][0] <= 0 or not 1 <= out[-1][1] <= 10000:
            sys.exit("produce_latency: case %r out of range" % c)
    return out


def case_name(rate, parts, keyed):
    return "%g MB/s, %d partition%s%s" % (rate, parts, "" if parts == 1 else "s",
                                         ", keyed" if keyed else "")


def lat_topic(parts, keyed):
    return "lat-p%d%s" % (parts, "k" if keyed else "")


def run_cli(cli, args, timeout):
    """One `strata` command; its last stdout line as JSON (bench) or its stdout."""
    cmd = [cli] + args
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise BenchError("%s: no result within %.0fs (killed); stderr tail:\n%s" % (
            " ".join(cmd), timeout, (e.stderr or b"").decode(errors="replace")[-2000:]))
    out = r.stdout.decode(errors="replace").strip()
    if r.returncode != 0:
        raise BenchError("%s: exit %d\nstdout: %s\nstderr tail:\n%s" % (
            " ".join(cmd), r.returncode, out[-2000:], r.stderr.decode(errors="replace")[-2000:]))
    return out


def bench(cli, bootstrap, topic, extra, timeout, want=None):
    out = run_cli(cli, ["bench", "produce", "-b", bootstrap, "--topic", topic, "--size", "1024",
                        "--acks", "all", "--json"] + extra, timeout)
    res = json.loads(out.splitlines()[-1])
    if res.get("failed"):
        raise BenchError("bench %s %s: %d records failed" % (topic, extra, res["failed"]))
    if want is not None and res.get("messages") != want:
        raise BenchError("bench %s %s: %s of %d records acknowledged" % (
            topic, extra, res.get("messages"), want))
    return res


def summarize(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return statistics.median(vals), min(vals), max(vals)


def fmt(s, digits=2):
    if s is None:
        return "—"
    return "%.*f (%.*f–%.*f)" % (digits, s[0], digits, s[1], digits, s[2])


HISTS = {"loop_iterations": "strata_shard_loop_iteration_seconds",
         "fsyncs": "strata_storage_fsync_duration_seconds"}


def server_hists(port):
    """{key: ([(le, cumulative)], sum, count)} of HISTS, each summed over shards."""
    m = ac.scrape(port)
    out = {}
    for key, name in HISTS.items():
        by_le = {}
        for lab, v in m.find(name + "_bucket"):
            le = float(lab["le"])
            by_le[le] = by_le.get(le, 0) + v
        out[key] = (sorted(by_le.items()), m.sum(name + "_sum"), m.sum(name + "_count"))
    return out


def hist_delta(a, b):
    """b - a, with the quantiles (bucket upper bounds) p50, p99, p99.9 and the largest used."""
    ba, bb = dict(a[0]), dict(b[0])
    cum = [(le, bb[le] - ba.get(le, 0)) for le in sorted(bb)]
    n = b[2] - a[2]
    out = {"count": n, "sum_s": b[1] - a[1], "buckets": cum}
    for q, key in ((0.5, "p50_le_s"), (0.99, "p99_le_s"), (0.999, "p99_9_le_s")):
        out[key] = next((le for le, c in cum if n and c >= q * n), None)
    prev = 0
    out["max_le_s"] = None
    for le, c in cum:
        if c > prev:
            out["max_le_s"] = le
        prev = c
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("both", "latency", "throughput"), default="both")
    ap.add_argument("--cases", default=DEFAULT_CASES,
                    help="latency cases RATE@PARTITIONS[k] (MB/s; k = keyed), comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--secs", type=float, default=4, help="length of each latency run, s")
    ap.add_argument("--linger", default="1", help="linger.ms of the latency runs")
    ap.add_argument("--tp-count", type=int, default=300000, help="records per throughput run")
    ap.add_argument("--tp-parts", default="1,8", help="partition counts of the throughput runs")
    ap.add_argument("--codecs", default="none,lz4,zstd", help="codecs of the throughput runs")
    ap.add_argument("--quick", action="store_true",
                    help="one repetition, 2 s runs, cases 20@1,20@8, 100,000 records without "
                         "compression: under a minute")
    ap.add_argument("--smp", type=int, default=1, help="strata-server shards")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="strata-server setting (repeatable), e.g. log.journal.bytes=0 to "
                    "measure without the shard journal")
    ap.add_argument("--budget", type=float, default=600,
                    help="no new run starts after this many seconds (the tables show what ran)")
    ap.add_argument("--run-timeout", type=float, default=60,
                    help="deadline of each client run, past its duration, s")
    ap.add_argument("--server", default=None, help="strata-server (default: build/, build-bench/)")
    ap.add_argument("--cli", default=None, help="strata (default: next to the server)")
    ap.add_argument("--dir", default=None,
                    help="parent of the run's temporary directory (default: the system's tmp)")
    ap.add_argument("--json", default=None, help="write every run's figures here")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.secs, args.tp_count = 1, 2, 100000
        if args.cases == DEFAULT_CASES:
            args.cases = "20@1,20@8"
        args.codecs = "none"
    cases = parse_cases(args.cases) if args.mode != "throughput" else []
    tp_parts = [int(x) for x in args.tp_parts.split(",") if x] if args.mode != "latency" else []
    codecs = [x for x in args.codecs.split(",") if x]
    if args.reps < 1 or args.secs <= 0 or args.tp_count < 1:
        sys.exit("produce_latency: --reps, --secs and --tp-count must be positive")

    server_bin = args.server
    if not server_bin:
        for b in ("build", "build-bench"):
            c = os.path.join(ROOT, b, "strata-server")
            if os.access(c, os.X_OK):
                server_bin = c
                break
    cli_bin = args.cli or (server_bin and os.path.join(os.path.dirname(server_bin), "strata"))
    for b in (server_bin, cli_bin):
        if not b or not os.access(b, os.X_OK):
            sys.exit("produce_latency: strata-server/strata not found: run `make release` or "
                     "pass --server/--cli")
    os.environ.pop("STRATA_BOOTSTRAP", None)
    top = tempfile.mkdtemp(prefix="produce-latency-", dir=args.dir)
    tempfile.tempdir = top        # harness.Server makes its directory (data, log) here
    # Run copies: a rebuild elsewhere during the run must not swap the binaries.
    server = os.path.join(top, "strata-server")
    cli = os.path.join(top, "strata")
    shutil.copy2(server_bin, server)
    shutil.copy2(cli_bin, cli)
    os.environ["STRATA_SERVER"] = server

    def on_term(signum, frame):
        raise SystemExit("produce_latency: signal %d" % signum)
    signal.signal(signal.SIGTERM, on_term)

    t_start = time.monotonic()

    def log(msg):
        print("[%6.1fs] %s" % (time.monotonic() - t_start, msg), file=sys.stderr, flush=True)

    def over_budget():
        return time.monotonic() - t_start > args.budget

    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "nproc": os.cpu_count(),
            "loadavg_start": loadavg(), "smp": args.smp, "size": 1024, "acks": "all",
            "linger_ms_latency": args.linger, "secs": args.secs, "reps": args.reps,
            "tp_count": args.tp_count, "durability": "strict (server default): fdatasync "
            "before every acks=all answer; the mock never syncs"}
    meta["data_fs"] = "%s (%s)" % mount_of(top)
    runs = []
    sets = dict(kv.split("=", 1) for kv in args.set)
    meta["server_sets"] = sets
    srv = harness.Server(smp=args.smp, sets=sets, name="latency")
    mock = None
    failed = None
    h0 = None
    try:
        srv.start(timeout=30)
        addr = {"strata": srv.bootstrap}
        # Every topic the mock will need, created up front (it has no CreateTopics).
        mtopics = sorted({(lat_topic(p, k), p) for _, p, k in cases} |
                         {("warm", 8)} |
                         {("tp-p%d-%s-%d" % (p, z, r), p) for p in tp_parts for z in codecs
                          for r in range(args.reps)})
        margs = [cli, "debug", "mock-cluster"]
        for t, p in mtopics:
            margs += ["--topic", "%s:%d" % (t, p)]
        mock = subprocess.Popen(margs, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        # Its address on the first line, "ready" on the second: read with a deadline.
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x.strip()) for x in mock.stdout],
                         daemon=True).start()
        try:
            first = lines.get(timeout=30)
            lines.get(timeout=30)
        except queue.Empty:
            raise BenchError("the mock cluster did not start (exit %s)" % mock.poll())
        addr["mock"] = first
        log("strata-server --smp %d on %s (data %s), mock on %s" % (
            args.smp, addr["strata"], srv.data_dir, addr["mock"]))
        for t, p in mtopics:
            if t.startswith("lat-") or t == "warm":
                run_cli(cli, ["topic", "create", t, "-p", str(p), "-b", addr["strata"]], 120)
        # Warm-up: connections, page cache, the server's first segments; not recorded.
        for sys_ in SYSTEMS:
            r = bench(cli, addr[sys_], "warm", ["--rate", str(int(20 * MB / 1024)), "--duration",
                                                "1s", "--linger", args.linger, "--partitioner",
                                                "roundrobin"], 1 + args.run_timeout)
            log("warm-up %s: p99 %.2f ms" % (sys_, r["latency_ms"]["p99"]))
        h0 = server_hists(srv.admin_port)

        for rep in range(args.reps):
            order = SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]
            for rate, parts, keyed in cases:
                for sys_ in order:
                    if over_budget():
                        raise BenchError("budget of %.0f s spent" % args.budget)
                    la = loadavg()
                    msgs = int(round(rate * MB / 1024))
                    extra = ["--rate", str(msgs), "--duration", "%gs" % args.secs, "--linger",
                             args.linger, "--partitioner", "keyed" if keyed else "roundrobin"]
                    r = bench(cli, addr[sys_], lat_topic(parts, keyed), extra,
                              args.secs + args.run_timeout)
                    if not srv.alive():
                        raise BenchError("strata-server exited")
                    lat = r["latency_ms"]
                    runs.append({"kind": "latency", "rep": rep, "system": sys_, "rate_mb": rate,
                                 "partitions": parts, "keyed": keyed, "loadavg": la,
                                 "p50": lat["p50"], "p99": lat["p99"], "p99_9": lat["p99_9"],
                                 "max": lat["max"], "mb_per_sec": r["mb_per_sec"],
                                 "messages": r["messages"]})
                    log("rep %d %-6s %-28s p50 %6.2f  p99 %7.2f  p99.9 %7.2f  max %7.2f ms  "
                        "%6.2f MB/s  load %.2f" % (rep + 1, sys_, case_name(rate, parts, keyed),
                                                   lat["p50"], lat["p99"], lat["p99_9"],
                                                   lat["max"], r["mb_per_sec"], la))
            for parts in tp_parts:
                for z in codecs:
                    for sys_ in order:
                        if over_budget():
                            raise BenchError("budget of %.0f s spent" % args.budget)
                        t = "tp-p%d-%s-%d" % (parts, z, rep)
                        if sys_ == "strata":
                            run_cli(cli, ["topic", "create", t, "-p", str(parts), "-b",
                                          addr["strata"]], 120)
                        la = loadavg()
                        r = bench(cli, addr[sys_], t, ["--count", str(args.tp_count),
                                                       "--compression", z, "--partitioner",
                                                       "roundrobin"],
                                  args.run_timeout * 2, want=args.tp_count)
                        if sys_ == "strata":
                            run_cli(cli, ["topic", "delete", t, "-b", addr["strata"]], 120)
                            if not srv.alive():
                                raise BenchError("strata-server exited")
                        runs.append({"kind": "throughput", "rep": rep, "system": sys_,
                                     "partitions": parts, "codec": z, "loadavg": la,
                                     "mb_per_sec": r["mb_per_sec"], "seconds": r["seconds"]})
                        log("rep %d %-6s throughput %d partition(s) %-5s %8.1f MB/s  load %.2f"
                            % (rep + 1, sys_, parts, z, r["mb_per_sec"], la))
    except (BenchError, harness.ServerError) as e:
        failed = str(e)
        log("STOPPED: %s" % failed)
    finally:
        try:
            if srv.alive() and h0 is not None:
                time.sleep(1.2)   # the loop figures come from a snapshot published each second
                h1 = server_hists(srv.admin_port)
                for key in HISTS:
                    meta[key] = hist_delta(h0[key], h1[key])
        except Exception as e:  # the figures still print
            log("cannot read /metrics: %r" % (e,))
        if mock is not None:
            mock.send_signal(signal.SIGTERM)
            try:
                mock.wait(10)
            except subprocess.TimeoutExpired:
                mock.kill()
                mock.wait(10)
        if srv.alive():
            try:
                srv.stop(timeout=30)
            except harness.ServerError as e:
                log("strata-server stop: %s" % str(e).splitlines()[0])
                if srv.alive():
                    srv.proc.kill()
                    srv.proc.wait(10)
        meta["loadavg_end"] = loadavg()
        meta["wall_s"] = time.monotonic() - t_start

    report(cases, tp_parts, codecs, runs, meta)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "runs": runs, "failed": failed}, f, indent=1)
    shutil.rmtree(top, ignore_errors=True)
    if failed:
        print("\n**Incomplete: %s**" % failed.splitlines()[0])
        sys.exit(1)


def report(cases, tp_parts, codecs, runs, meta):
    lat = [r for r in runs if r["kind"] == "latency"]
    tp = [r for r in runs if r["kind"] == "throughput"]
    loads = [r["loadavg"] for r in runs]
    print("\n%s, %d cores, %d repetition(s), 1 KiB records, acks=all; Strata --smp %d, strict "
          "durability (fdatasync before each answer), data on %s; mock: in memory, never syncs. "
          "Load average %.2f at start, %.2f median over the runs, %.2f at the end; %.0f s." % (
              meta["date"], meta["nproc"], meta["reps"], meta["smp"], meta["data_fs"],
              meta["loadavg_start"],
              statistics.median(loads) if loads else 0, meta["loadavg_end"], meta["wall_s"]))
    if meta.get("server_sets"):
        print("Strata settings: %s." % ", ".join("%s=%s" % kv
                                                 for kv in sorted(meta["server_sets"].items())))
    if lat:
        print("\nLatency at a fixed rate (linger.ms %s, %g s per run, from intended send time "
              "to delivery report), ms, median (min–max):\n" % (meta["linger_ms_latency"],
                                                                meta["secs"]))
        print("| case | metric | Strata | mock | Strata/mock |")
        print("| --- | --- | --- | --- | --- |")
        for rate, parts, keyed in cases:
            sel = {s: [r for r in lat if r["system"] == s and r["rate_mb"] == rate and
                       r["partitions"] == parts and r["keyed"] == keyed] for s in SYSTEMS}
            if not sel["strata"] and not sel["mock"]:
                continue
            for key, name in (("p50", "p50"), ("p99", "p99"), ("p99_9", "p99.9"),
                              ("mb_per_sec", "achieved MB/s")):
                st = summarize([r[key] for r in sel["strata"]])
                mo = summarize([r[key] for r in sel["mock"]])
                ratio = "%.2f" % (st[0] / mo[0]) if st and mo and mo[0] else "—"
                print("| %s | %s | %s | %s | %s |" % (case_name(rate, parts, keyed), name,
                                                     fmt(st), fmt(mo), ratio))
    if tp:
        print("\nThroughput, %d records as fast as possible (linger.ms 5, batch.size 1 MB, "
              "record i to partition i %% N), MB/s, median (min–max):\n" % meta["tp_count"])
        print("| partitions | compression | Strata | mock | Strata/mock | ratio per rep |")
        print("| --- | --- | --- | --- | --- | --- |")
        for parts in tp_parts:
            for z in codecs:
                sel = {s: {r["rep"]: r["mb_per_sec"] for r in tp if r["system"] == s and
                           r["partitions"] == parts and r["codec"] == z} for s in SYSTEMS}
                st = summarize(list(sel["strata"].values()))
                mo = summarize(list(sel["mock"].values()))
                if not st and not mo:
                    continue
                per = [sel["strata"][k] / sel["mock"][k] for k in sel["strata"]
                       if k in sel["mock"] and sel["mock"][k]]
                print("| %d | %s | %s | %s | %s | %s |" % (
                    parts, z, fmt(st, 1), fmt(mo, 1),
                    "%.2f" % (st[0] / mo[0]) if st and mo and mo[0] else "—",
                    fmt(summarize(per)) if per else "—"))
    for key, what in (("loop_iterations", "event-loop iterations' busy time"),
                      ("fsyncs", "fdatasync durations")):
        h = meta.get(key)
        if h and h["count"]:
            print("\nStrata %s during the measured runs (%s, bucket bounds): %d, %.2f s in "
                  "all; p50 <= %s s, p99 <= %s s, p99.9 <= %s s, longest <= %s s." % (
                      what, HISTS[key], h["count"], h["sum_s"], h["p50_le_s"], h["p99_le_s"],
                      h["p99_9_le_s"], h["max_le_s"]))


if __name__ == "__main__":
    main()
