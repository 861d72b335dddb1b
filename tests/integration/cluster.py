"""cluster.py — start N real strata-server processes as one cluster (issue 12).

Each node is a harness.Server (its way of starting the binary, its own temporary log.dirs,
stderr captured to a file, a clean-exit check at stop) given the cluster's settings: its
node.id, process.roles, controller.quorum.voters and a CONTROLLER listener beside the
PLAINTEXT one. Ports are picked once, when the Cluster is made, and kept across restarts
(the voters list names them). The CONTROLLER port is free for TCP (Raft) and UDP (broker
heartbeats go to the same port number) when it is picked.

    c = Cluster(3, sets={"broker.session.timeout.ms": "3000"})
    c.start(order=[3, 1, 2])      # each node starts once the previous one listens
    ctrl = c.wait_for_quorum()    # every node reports every broker and the same controller
    c.kill9(ctrl); c.restart(ctrl)
    c.metadata(1)                 # brokers, controller, topics with their partitions
    c.stop_all()                  # SIGTERM to each; clean exits asserted

Nodes 1..n are voters (process.roles=broker,controller); `broker_only` adds nodes n+1...
with process.roles=broker, which follow the metadata log without a vote. Every wait is
bounded; a timeout fails with the last state seen and the tail of every node's log.

For the failure tests (issue 13): `proxied=True` puts a fault proxy (tests/tools/faultproxy.py)
in front of each node's Kafka listener and advertises the proxy's address, so every client
and every follower reaches the node through `node.proxy` while the controller traffic does
not; `data_dirs={id: path}` puts a node's log.dirs where the test wants it (a dropfs mount).
"""

import json
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.request

import harness
import kwire

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from harness import ServerError, WaitTimeout, port_open, wait_until

ELECTION_TIMEOUT_MS = 500       # tests use short elections: a new controller in about a second
METADATA_VERSION = 12           # flexible, topic ids, leader epochs, offline replicas
DESCRIBE_CLUSTER = 60
ANY = object()                  # wait_for_quorum(brokers=ANY): any broker list will do


def _bind(kind, port):
    s = socket.socket(socket.AF_INET, kind)
    try:
        s.bind(("127.0.0.1", port))
        return s
    except OSError:
        s.close()
        return None


# Ports are drawn below the kernel's ephemeral range (32768-60999 here), where the kernel never
# puts the local end of an outgoing connection: a node killed and restarted later finds its
# ports still free, whatever connections the cluster and its clients opened meanwhile.
PORT_LOW, PORT_HIGH = 20000, 32000


def free_ports(count, udp_too=()):
    """`count` distinct ports on 127.0.0.1 free for TCP a moment ago; those whose index is in
    `udp_too` are also free for UDP. The sockets are held until all are picked, so the ports
    differ from each other."""
    held, ports = [], []
    try:
        while len(ports) < count:
            port = random.randrange(PORT_LOW, PORT_HIGH)
            t = _bind(socket.SOCK_STREAM, port)
            if t is None:
                continue
            held.append(t)
            if len(ports) in udp_too:
                u = _bind(socket.SOCK_DGRAM, port)
                if u is None:
                    continue        # UDP side taken: keep this TCP port held, pick another
                held.append(u)
            ports.append(port)
        return ports
    finally:
        for s in held:
            s.close()


# ---- DescribeCluster (key 60), which kwire does not have: flexible at every version -----------

def describe_cluster_request(version, include_fenced=True):
    b = kwire.boolean(False)                     # include_cluster_authorized_operations
    if version >= 1:
        b += kwire.i8(1)                         # endpoint_type: brokers
    if version >= 2:
        b += kwire.boolean(include_fenced)       # include_fenced_brokers
    return b + kwire.TAGS_NONE


def describe_cluster_wire(conn, version=2, include_fenced=True):
    """DescribeCluster at `version`, parsed with an exact end check. Returns dict(error,
    error_message, cluster_id, controller_id, brokers={id: dict(host, port, rack, fenced)})."""
    r = conn.request(DESCRIBE_CLUSTER, version, describe_cluster_request(version, include_fenced),
                     flexible=True)
    out = {"throttle": r.i32(), "error": r.i16(), "error_message": r.compact_string()}
    if version >= 1:
        out["endpoint_type"] = r.i8()
    out["cluster_id"] = r.compact_string()
    out["controller_id"] = r.i32()
    brokers = {}

    def broker(rr):
        bid = rr.i32()
        b = {"host": rr.compact_string(), "port": rr.i32(), "rack": rr.compact_string()}
        b["fenced"] = rr.boolean() if version >= 2 else None
        rr.tags()
        brokers[bid] = b

    r.compact_array(broker)
    out["brokers"] = brokers
    r.i32()                                      # cluster_authorized_operations
    r.tags()
    r.end()
    return out


def normalize_metadata(md):
    """kwire.metadata's answer keyed by id and name:
    dict(controller_id, cluster_id, brokers={id: (host, port, rack)},
         topics={name: dict(error, topic_id, internal,
                            partitions={index: dict(error, leader, leader_epoch, replicas,
                                                    isr, offline)})})."""
    topics = {}
    for t in md["topics"]:
        parts = {}
        for p in t["partitions"] or []:
            parts[p["index"]] = {"error": p["error"], "leader": p["leader"],
                                 "leader_epoch": p["leader_epoch"],
                                 "replicas": list(p["replicas"] or []),
                                 "isr": list(p["isr"] or []),
                                 "offline": list(p["offline"] or [])}
        topics[t["name"]] = {"error": t["error"], "topic_id": t["topic_id"],
                             "internal": t["internal"], "partitions": parts}
    return {"controller_id": md["controller_id"], "cluster_id": md["cluster_id"],
            "brokers": {b[0]: (b[1], b[2], b[3]) for b in md["brokers"]},
            "topics": topics}


class Node:
    """One member of a Cluster: a harness.Server with the cluster's settings."""

    def __init__(self, node_id, controller, ports, sets, smp, name, data_dir=None, proxy=None):
        self.id = node_id
        self.controller = controller             # a voter (broker,controller) or broker only
        self.host = "127.0.0.1"
        self.kafka_port, self.controller_port, self.admin_port = ports
        self.stopped = False                     # SIGSTOPped and not yet continued
        self.proxy = proxy                       # a faultproxy.FaultProxy, or None
        self.server = harness.Server(smp=smp, sets=sets, name="%s-n%d" % (name, node_id),
                                     data_dir=data_dir)
        # Preset ports: Server.start keeps them (its command puts them in advertised.listeners
        # and admin.listen; the cluster's sets add the CONTROLLER listener).
        self.server.port = self.kafka_port
        self.server.admin_port = self.admin_port

    @property
    def bootstrap(self):
        return "%s:%d" % (self.host, self.kafka_port)

    @property
    def advertised(self):
        """host:port clients and followers are told to use (the proxy's, when proxied)."""
        return "%s:%d" % (self.host, self.proxy.port) if self.proxy else self.bootstrap

    @property
    def controller_address(self):
        return "%s:%d" % (self.host, self.controller_port)

    @property
    def data_dir(self):
        return self.server.data_dir

    @property
    def metadata_dir(self):
        """Where the node keeps its metadata log and snapshots."""
        return os.path.join(self.server.data_dir, "__cluster_metadata-0")

    @property
    def pid(self):
        return self.server.proc.pid if self.server.proc is not None else None

    def alive(self):
        return self.server.alive()

    def listening(self):
        """True once the process accepts connections on its Kafka or CONTROLLER port."""
        return self.alive() and (port_open(self.host, self.kafka_port, 0.2)
                                 or port_open(self.host, self.controller_port, 0.2))

    def tail(self, lines=30):
        return self.server.stderr_tail(lines)


class Cluster:
    """N strata-server processes on loopback ports forming one metadata quorum."""

    def __init__(self, n=3, broker_only=0, sets=None, smp=1, name="cluster",
                 election_timeout_ms=ELECTION_TIMEOUT_MS, proxied=False, data_dirs=None):
        assert n >= 1
        self.name = name
        ids = list(range(1, n + 1 + broker_only))
        # kafka, controller (TCP + UDP), admin for each node.
        ports = free_ports(3 * len(ids), udp_too={3 * i + 1 for i in range(len(ids))})
        node_ports = {nid: tuple(ports[3 * i:3 * i + 3]) for i, nid in enumerate(ids)}
        self.voters = ids[:n]
        self.voters_setting = ",".join("%d@127.0.0.1:%d" % (v, node_ports[v][1])
                                       for v in self.voters)
        self.nodes = {}
        for nid in ids:
            kp, cp, _ = node_ports[nid]
            s = {
                "node.id": str(nid),
                "process.roles": "broker,controller" if nid in self.voters else "broker",
                "controller.quorum.voters": self.voters_setting,
                "listeners": "PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d" % (kp, cp),
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.election.timeout.ms": str(election_timeout_ms),
            }
            s.update({k: str(v) for k, v in (sets or {}).items()})
            proxy = None
            if proxied:
                import faultproxy
                proxy = faultproxy.FaultProxy(("127.0.0.1", kp),
                                              name="faultproxy-n%d" % nid).start()
                s["advertised.listeners"] = "PLAINTEXT://127.0.0.1:%d" % proxy.port
            self.nodes[nid] = Node(nid, nid in self.voters, node_ports[nid], s, smp, name,
                                   data_dir=(data_dirs or {}).get(nid), proxy=proxy)

    # ---- lifecycle ------------------------------------------------------------------------

    def node(self, nid):
        return self.nodes[nid]

    def running(self):
        """Ids of the nodes whose process is up (SIGSTOPped ones included)."""
        return [nid for nid, n in self.nodes.items() if n.alive()]

    def spawn(self, nid, timeout=harness.READY_TIMEOUT):
        """Start node `nid` in the background (harness.Server.start on a thread: a node may
        only be ready once its peers are up). Returns a handle for join()."""
        node = self.nodes[nid]
        node.stopped = False
        h = {"node": node, "error": None}

        def run():
            try:
                node.server.start(timeout=timeout)
            except BaseException as e:      # reported by join(), with every node's log
                h["error"] = e

        h["thread"] = threading.Thread(target=run, daemon=True, name="start-node-%d" % nid)
        h["thread"].start()
        return h

    def join(self, handles, timeout=harness.READY_TIMEOUT):
        """Wait (bounded) for spawned nodes to be ready; fail with every node's log if one
        exited or did not get ready."""
        deadline = time.monotonic() + timeout
        errors = {}
        for h in handles:
            h["thread"].join(max(0.0, deadline - time.monotonic()))
            if h["thread"].is_alive():
                errors[h["node"].id] = "not ready within %.0fs" % timeout
            elif h["error"] is not None:
                errors[h["node"].id] = str(h["error"]).splitlines()[0]
        if errors:
            raise ServerError("cluster start failed: %s\n%s" % (
                "; ".join("node %d: %s" % kv for kv in sorted(errors.items())), self.logs()))

    def start(self, order=None, timeout=harness.READY_TIMEOUT):
        """Start the nodes in `order` (default: every node, by id). Each starts once the one
        before it listens, so the order is the order they come up in; then wait until each
        logged its ready line. The quorum itself is wait_for_quorum's business."""
        handles = []
        for nid in list(order or self.nodes):
            h = self.spawn(nid, timeout)
            handles.append(h)
            node = h["node"]
            self.wait(lambda: node.listening() or not h["thread"].is_alive(), timeout,
                      "node %d to listen before the next one starts" % nid)
        self.join(handles, timeout)
        return self

    def start_node(self, nid, timeout=harness.READY_TIMEOUT):
        """Start one node (after kill9 or stop) on its data directory and ports."""
        self.nodes[nid].stopped = False
        self.nodes[nid].server.start(timeout=timeout)

    def stop(self, nid):
        """SIGTERM one node and assert it exits cleanly."""
        node = self.nodes[nid]
        if node.stopped:
            self.sigcont(nid)
        node.server.stop()

    def kill9(self, nid):
        """SIGKILL one node: a crash, its data directory left as it is."""
        node = self.nodes[nid]
        node.server.kill9()
        node.stopped = False

    def restart(self, nid, clean=True, timeout=harness.READY_TIMEOUT):
        """Stop (SIGTERM, or kill -9 with clean=False) if running, then start again."""
        if self.nodes[nid].alive():
            if clean:
                self.stop(nid)
            else:
                self.kill9(nid)
        self.start_node(nid, timeout)

    def sigstop(self, nid):
        """Freeze a node (SIGSTOP): it keeps its sockets but answers nothing."""
        node = self.nodes[nid]
        os.kill(node.pid, signal.SIGSTOP)
        node.stopped = True

    def sigcont(self, nid):
        node = self.nodes[nid]
        os.kill(node.pid, signal.SIGCONT)
        node.stopped = False

    def stop_all(self, timeout=harness.STOP_TIMEOUT):
        """SIGTERM every running node at once and assert each exits cleanly (status 0, no
        sanitizer report) within the timeout."""
        errors = {}
        running = [n for n in self.nodes.values() if n.alive()]
        for n in running:
            if n.stopped:
                os.kill(n.pid, signal.SIGCONT)
                n.stopped = False

        def run(node):
            try:
                node.server.stop(timeout=timeout)
            except BaseException as e:
                errors[node.id] = e

        threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in running]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout + 15)
        if errors:
            raise ServerError("\n".join("node %d: %s" % (k, v) for k, v in sorted(errors.items())))

    def close(self):
        """Last resort in tearDown: kill what is left, remove the temporary directories, close
        the proxies."""
        for n in self.nodes.values():
            if n.alive() and n.stopped:
                try:
                    os.kill(n.pid, signal.SIGCONT)
                except OSError:
                    pass
            n.server.close()
            if n.proxy is not None:
                n.proxy.close()

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        try:
            if et is None:
                self.stop_all()
        finally:
            self.close()

    # ---- what the nodes say ---------------------------------------------------------------

    def metadata(self, nid, topics=None, timeout=3.0):
        """Metadata (v12, all topics unless named) from node `nid`, normalized (see
        normalize_metadata)."""
        with kwire.Conn.to(self.nodes[nid].bootstrap, timeout) as c:
            return normalize_metadata(kwire.metadata(c, METADATA_VERSION, topics))

    def describe_cluster(self, nid, version=2, include_fenced=True, timeout=3.0):
        """DescribeCluster from node `nid` (v2 by default: fenced brokers included, flagged)."""
        with kwire.Conn.to(self.nodes[nid].bootstrap, timeout) as c:
            return describe_cluster_wire(c, version, include_fenced)

    def admin_get(self, nid, path, timeout=3.0):
        """GET a JSON document from node `nid`'s admin API (e.g. /v1/cluster)."""
        url = "http://%s:%d%s" % (self.nodes[nid].host, self.nodes[nid].admin_port, path)
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read())

    def admin_post(self, nid, path, timeout=3.0):
        """POST to node `nid`'s admin API (e.g. /v1/debug/sync-delay?ms=200); returns the JSON
        answer. An HTTP error raises urllib.error.HTTPError."""
        url = "http://%s:%d%s" % (self.nodes[nid].host, self.nodes[nid].admin_port, path)
        req = urllib.request.Request(url, data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def controller_id(self, via=None):
        """The active controller as node `via` reports it; without `via`, the id every running
        node reports, or None while they disagree or have none."""
        if via is not None:
            return self.metadata(via)["controller_id"]
        ids = {self.metadata(n)["controller_id"] for n in self.running()
               if not self.nodes[n].stopped}
        if len(ids) == 1:
            c = ids.pop()
            return c if c >= 1 else None
        return None

    def wait_for_quorum(self, timeout=30.0, nodes=None, brokers=None, not_controller=None):
        """Wait until every node in `nodes` (default: every running node not SIGSTOPped)
        answers Metadata listing exactly `brokers` (default: those same nodes; ANY: whatever
        they list) and naming the same controller, a voter other than `not_controller`.
        Returns the controller id."""
        nodes = list(nodes if nodes is not None else
                     [n for n in self.running() if not self.nodes[n].stopped])
        want = brokers if brokers is ANY else set(brokers if brokers is not None else nodes)
        last = {}

        def cond():
            last.clear()
            for n in nodes:
                md = self.metadata(n)
                last[n] = (md["controller_id"], sorted(md["brokers"]))
            ctrls = {v[0] for v in last.values()}
            if len(ctrls) != 1:
                return None
            c = ctrls.pop()
            if c not in self.voters or c == not_controller:
                return None
            if want is not ANY and any(set(v[1]) != want for v in last.values()):
                return None
            return c

        return self.wait(cond, timeout,
                         "nodes %s to agree on a controller%s and brokers %s" % (
                             nodes, "" if not_controller is None else
                             " other than %d" % not_controller,
                             "(any)" if want is ANY else sorted(want)),
                         state=lambda: "last seen (controller, brokers) per node: %s" % last)

    def topic_views(self, name, nodes=None):
        """{node: the topic as node reports it, or None where it does not know it}."""
        nodes = nodes if nodes is not None else [n for n in self.running()
                                                  if not self.nodes[n].stopped]
        out = {}
        for n in nodes:
            t = self.metadata(n, [name])["topics"].get(name)
            out[n] = t if t is not None and t["error"] == 0 else None
        return out

    def wait_topic_agreed(self, name, partitions, nodes=None, timeout=15.0):
        """Wait until every node in `nodes` reports topic `name` with `partitions` partitions,
        each with a leader, and all report the same partitions (leaders, epochs, replicas, ISR,
        offline replicas) and topic id. Returns {index: partition}."""
        last = {}

        def cond():
            last.clear()
            last.update(self.topic_views(name, nodes))
            views = list(last.values())
            if any(v is None or len(v["partitions"]) != partitions for v in views):
                return None
            if any(p["leader"] < 0 or p["error"] != 0
                   for v in views for p in v["partitions"].values()):
                return None
            first = views[0]
            if any(v["partitions"] != first["partitions"] or v["topic_id"] != first["topic_id"]
                   for v in views):
                return None
            return first["partitions"]

        return self.wait(cond, timeout, "every node to agree on topic %s (%d partitions, each "
                         "led)" % (name, partitions),
                         state=lambda: "last views: %s" % last)

    # ---- waiting and reporting ------------------------------------------------------------

    def wait(self, cond, timeout, what, state=None):
        """harness.wait_until, failing with `state()` and every node's log tail."""
        try:
            return wait_until(cond, timeout, what)
        except WaitTimeout as e:
            extra = ""
            if state is not None:
                try:
                    extra = "\n" + state()
                except Exception as se:  # the state itself may be what broke
                    extra = "\n(state unavailable: %r)" % (se,)
            raise WaitTimeout("%s%s\n%s" % (e, extra, self.logs())) from None

    def logs(self, lines=25):
        """The tail of every node's current log, for failure messages."""
        return "\n".join("node %d (%s, pid %s):\n%s" % (
            nid, "stopped" if n.stopped else "running" if n.alive() else "down", n.pid,
            n.tail(lines)) for nid, n in sorted(self.nodes.items()))


__all__ = ["ANY", "Cluster", "Node", "free_ports", "describe_cluster_wire", "normalize_metadata"]
