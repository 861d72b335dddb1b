#!/usr/bin/python3
"""tls.py — produce and consume over an SSL listener against a PLAINTEXT one of the same broker,
in the same run (issue 22, "Benchmarks"; target: TLS consume >= 0.7 x plaintext).

One strata-server (release build, --smp 2, every setting at its default: strict durability,
each acks=all answer after an fdatasync) with a PLAINTEXT and an SSL listener; a CA and an RSA
2048 broker certificate made with the openssl CLI for the run; what librdkafka and the broker
negotiate (TLS 1.3, TLS_AES_256_GCM_SHA384, with OpenSSL 3 on both sides; the protocol and
cipher of one handshake are printed). For each repetition, the two listeners in
alternating order so drift in the machine's load hits both alike:

  produce  `strata bench produce` through that listener: --count records of --size bytes,
           acks=all, --partitions partitions, sticky partitioner, librdkafka's default batching
           (linger.ms 5, batch.size 1 MB), no compression, to a topic of its own; MB/s and the
           delivery latency p50/p99
  consume  `strata bench consume` of that same topic through the same listener (a fresh
           consumer reading from the start to the end); MB/s

and the broker's CPU seconds (utime + stime from /proc) for each step. Prints every run on
stderr, then a markdown table: the median and the p99 of each figure (with fewer than 100 runs
the largest is printed and labelled max, since a p99 of a small sample is its maximum), and the
SSL/PLAINTEXT ratio of the medians. Also says whether the kernel offers kernel TLS (the "tls"
TCP upper-layer protocol); the broker does not use it either way (docs/security.md).

    bench/tls.py --server build/strata-server --cli build/strata --reps 5
"""
import argparse
import errno
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TCP_ULP = 31  # linux/tcp.h


def free_port(taken=()):
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p not in taken:
            return p


def ktls_available():
    """Whether setsockopt(TCP_ULP, "tls") works on a connected TCP socket here."""
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        with socket.create_connection(lst.getsockname()) as c:
            a, _ = lst.accept()
            a.close()
            try:
                c.setsockopt(socket.IPPROTO_TCP, TCP_ULP, b"tls")
                return True, "setsockopt(TCP_ULP, \"tls\") succeeded"
            except OSError as e:
                return False, "setsockopt(TCP_ULP, \"tls\"): %s (%s)" % (
                    errno.errorcode.get(e.errno, e.errno), e.strerror)


def openssl(cwd, *args):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d):
    openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "7", "-keyout", "ca.key",
            "-out", "ca.pem", "-subj", "/CN=Strata bench CA")
    with open(os.path.join(d, "san.cnf"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out",
            "broker.csr", "-subj", "/CN=localhost")
    openssl(d, "x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "7", "-extfile", "san.cnf", "-out", "broker.pem")
    ks = os.path.join(d, "broker-keystore.pem")
    with open(ks, "w") as out:
        for n in ("broker.key", "broker.pem"):
            with open(os.path.join(d, n)) as f:
                out.write(f.read())
    return os.path.join(d, "ca.pem"), ks


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_ready(port, proc, deadline):
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("strata-server exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the broker did not listen on %d in time" % port)


def cli_bench(cli, mode, addr, extra, topic, a):
    cmd = [cli, "bench", mode, "-b", addr, "--json", "--topic", topic]
    for kv in extra:
        cmd += ["-X", kv]
    if mode == "produce":
        cmd += ["--size", str(a.size), "--count", str(a.count), "--acks", "all",
                "--partitions", str(a.partitions)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), r.stderr[-800:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def summary(xs, fmt="%.1f"):
    xs = sorted(xs)
    tail = xs[-1] if len(xs) < 100 else xs[int(len(xs) * 0.99)]
    return (fmt + " (%s " + fmt + ")") % (statistics.median(xs),
                                          "max" if len(xs) < 100 else "p99", tail)


def cpu_summary(xs):
    return summary(xs, "%.2f")


def low_summary(xs):
    # throughput: the bad tail is the low end
    xs = sorted(xs)
    tail = xs[0] if len(xs) < 100 else xs[int(len(xs) * 0.01)]
    return "%.1f (%s %.1f)" % (statistics.median(xs), "min" if len(xs) < 100 else "p1", tail)


def negotiated(port, ca):
    """The protocol and cipher a default Python (OpenSSL) client gets from the SSL listener."""
    import ssl
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return "%s %s" % (s.version(), s.cipher()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="build/strata-server")
    ap.add_argument("--cli", default="build/strata")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--count", type=int, default=200000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--smp", type=int, default=2)
    a = ap.parse_args()

    ok, why = ktls_available()
    print("kernel TLS (tls ULP): %s: %s" % ("available" if ok else "not available", why),
          file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix="strata-bench-tls-")
    proc = None
    try:
        ca, ks = make_pki(tmp)
        port = free_port()
        sport = free_port({port})
        aport = free_port({port, sport})
        listeners = "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (port, sport)
        log = open(os.path.join(tmp, "server.log"), "w")
        proc = subprocess.Popen(
            [a.server, "--smp", str(a.smp), "--set", "log.dirs=" + os.path.join(tmp, "data"),
             "--set", "listeners=" + listeners, "--set", "advertised.listeners=" + listeners,
             "--set", "inter.broker.listener.name=PLAINTEXT",
             "--set", "ssl.keystore.location=" + ks,
             "--set", "admin.listen=127.0.0.1:%d" % aport],
            stdout=log, stderr=subprocess.STDOUT)
        wait_ready(port, proc, time.monotonic() + 20)
        wait_ready(sport, proc, time.monotonic() + 20)
        tls_desc = negotiated(sport, ca)
        print("SSL listener: %s" % tls_desc, file=sys.stderr)
        protos = {
            "PLAINTEXT": ("127.0.0.1:%d" % port, []),
            "SSL": ("127.0.0.1:%d" % sport, ["security.protocol=SSL", "ssl.ca.location=" + ca]),
        }
        res = {p: {"prod": [], "p50": [], "p99": [], "cons": [], "pcpu": [], "ccpu": []}
               for p in protos}
        for i in range(a.reps):
            order = ["PLAINTEXT", "SSL"] if i % 2 == 0 else ["SSL", "PLAINTEXT"]
            for p in order:
                addr, extra = protos[p]
                topic = "tls-bench-%s-%d" % (p.lower(), i)
                c0 = cpu_seconds(proc.pid)
                pr = cli_bench(a.cli, "produce", addr, extra, topic, a)
                c1 = cpu_seconds(proc.pid)
                co = cli_bench(a.cli, "consume", addr, extra, topic, a)
                c2 = cpu_seconds(proc.pid)
                if co["messages"] < a.count:
                    raise RuntimeError("%s: consumed %d of %d" % (p, co["messages"], a.count))
                r = res[p]
                r["prod"].append(pr["mb_per_sec"])
                r["p50"].append(pr["latency_ms"]["p50"])
                r["p99"].append(pr["latency_ms"]["p99"])
                r["cons"].append(co["mb_per_sec"])
                r["pcpu"].append(c1 - c0)
                r["ccpu"].append(c2 - c1)
                print("rep %d %-9s produce %.1f MB/s (p50 %.2f ms, p99 %.2f ms, broker %.2f s "
                      "CPU), consume %.1f MB/s (broker %.2f s CPU)" %
                      (i, p, pr["mb_per_sec"], pr["latency_ms"]["p50"], pr["latency_ms"]["p99"],
                       c1 - c0, co["mb_per_sec"], c2 - c1), file=sys.stderr)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)

    pl, ss = res["PLAINTEXT"], res["SSL"]
    n = a.reps
    print("%d x %d B records, acks=all, %d partitions, --smp %d, %d repetitions, %s; "
          "kernel TLS %s" % (a.count, a.size, a.partitions, a.smp, n, tls_desc,
                             "available" if ok else "not available (%s)" % why))
    print()
    print("| | PLAINTEXT | SSL | SSL / PLAINTEXT (medians) |")
    print("| --- | --- | --- | --- |")
    rows = [("produce, MB/s, median (min)", "prod", low_summary),
            ("produce latency p50, ms, median (max)", "p50", summary),
            ("produce latency p99, ms, median (max)", "p99", summary),
            ("consume, MB/s, median (min)", "cons", low_summary),
            ("broker CPU per produce run, s, median (max)", "pcpu", cpu_summary),
            ("broker CPU per consume run, s, median (max)", "ccpu", cpu_summary)]
    for name, k, f in rows:
        print("| %s | %s | %s | %.2f |" % (name, f(pl[k]), f(ss[k]),
                                          statistics.median(ss[k]) / statistics.median(pl[k])))
    ratio = statistics.median(ss["cons"]) / statistics.median(pl["cons"])
    print()
    print("TLS consume / plaintext consume (medians): %.2f (target >= 0.70: %s)" %
          (ratio, "met" if ratio >= 0.7 else "NOT met"))


if __name__ == "__main__":
    main()
