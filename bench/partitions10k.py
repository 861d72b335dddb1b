#!/usr/bin/python3
"""partitions10k.py — 10,000 partitions on one strata-server (part 2 of bench/run_kafka.sh).

Starts strata-server on a fresh data directory and free loopback ports, then measures:

  * creation: one CreateTopics request (python3-confluent-kafka AdminClient) for TOPICS topics
    of PARTS partitions each (default 100 x 100 = 10,000), timed from the call until every
    topic's future has resolved, then until Metadata lists every partition;
  * idle: VmRSS, VmHWM and open fds of strata-server (/proc/PID) after IDLE_S seconds idle;
  * restart: SIGTERM (time to a clean exit), start again on the same data, time from exec until
    the Kafka port answers a Metadata request listing all TOPICS*PARTS partitions; RSS and fds
    after the restart.

Prints one JSON object on stdout. Every process it starts is killed by PID on the way out.

    /usr/bin/python3 bench/partitions10k.py --server build/strata-server --dir DIR \
        [--topics 100] [--partitions 100] [--smp 2] [--idle 3]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient, NewTopic


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def proc_stats(pid):
    st = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                st[k] = int(v.split()[0])
    return {"rss_mib": round(st["VmRSS"] / 1024.0, 1), "hwm_mib": round(st["VmHWM"] / 1024.0, 1),
            "threads": st["Threads"], "open_fds": len(os.listdir("/proc/%d/fd" % pid))}


def count_partitions(admin, prefix):
    md = admin.list_topics(timeout=10)
    return sum(len(t.partitions) for n, t in md.topics.items()
               if n.startswith(prefix) and t.error is None)


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    interval = 0.01
    while True:
        try:
            if cond():
                return
        except Exception:  # the broker may not answer yet
            pass
        if time.monotonic() > deadline:
            raise SystemExit("partitions10k: timed out after %ds waiting for %s" % (timeout, what))
        time.sleep(interval)
        interval = min(interval * 1.5, 0.1)


class Server:
    def __init__(self, binary, data, smp, log, sets=()):
        self.binary, self.data, self.smp, self.log = binary, data, smp, log
        self.sets = list(sets)
        self.port = free_port()
        self.proc = None

    def start(self):
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--smp", str(self.smp), "--set", "log.dirs=" + self.data,
             "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % self.port,
             "--set", "admin.listen=", "--set", "log.level=warn"] +
            [x for kv in self.sets for x in ("--set", kv)],
            stdout=out, stderr=out)
        out.close()

    def stop(self, timeout=120):
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        return rc, time.monotonic() - t0

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--smp", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="strata-server setting (repeatable), e.g. log.journal.bytes=0")
    ap.add_argument("--idle", type=float, default=3.0)
    a = ap.parse_args()
    total = a.topics * a.partitions
    prefix = "p10k-"
    data = os.path.join(a.dir, "data")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    srv = Server(a.server, data, a.smp, os.path.join(a.dir, "server.log"), a.set)
    res = {"topics": a.topics, "partitions_per_topic": a.partitions, "partitions": total,
           "smp": a.smp}
    try:
        srv.start()
        wait_for(lambda: port_open(srv.port), 30, "the Kafka port")
        boot = "127.0.0.1:%d" % srv.port
        admin = AdminClient({"bootstrap.servers": boot, "socket.timeout.ms": 300000})
        base = srv_stats = proc_stats(srv.proc.pid)
        res["empty"] = base
        topics = [NewTopic(prefix + "%03d" % i, a.partitions, 1) for i in range(a.topics)]
        t0 = time.monotonic()
        futs = admin.create_topics(topics, operation_timeout=300, request_timeout=300)
        for f in futs.values():
            f.result()
        res["create_s"] = round(time.monotonic() - t0, 3)
        wait_for(lambda: count_partitions(admin, prefix) == total, 120, "metadata")
        res["create_until_metadata_s"] = round(time.monotonic() - t0, 3)
        time.sleep(a.idle)
        srv_stats = proc_stats(srv.proc.pid)
        res["idle"] = srv_stats
        res["per_partition_rss_kib"] = round(
            (srv_stats["rss_mib"] - base["rss_mib"]) * 1024.0 / total, 1)
        res["data_dir_entries"] = len(os.listdir(data))
        rc, secs = srv.stop()
        res["stop_rc"], res["stop_s"] = rc, round(secs, 3)
        t0 = time.monotonic()
        srv.start()
        wait_for(lambda: port_open(srv.port), 120, "the Kafka port after restart")
        res["restart_port_s"] = round(time.monotonic() - t0, 3)
        admin2 = AdminClient({"bootstrap.servers": boot})
        wait_for(lambda: count_partitions(admin2, prefix) == total, 120,
                 "metadata listing every partition after restart")
        res["restart_s"] = round(time.monotonic() - t0, 3)
        time.sleep(a.idle)
        res["after_restart"] = proc_stats(srv.proc.pid)
        rc, secs = srv.stop()
        res["stop2_rc"], res["stop2_s"] = rc, round(secs, 3)
    finally:
        srv.kill()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
