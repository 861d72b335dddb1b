"""test_k8s.py — the Kubernetes manifests, the Helm chart and the entrypoint (issue 25), offline.

No cluster here: the chart deploy/helm/strata is rendered with tools/helmrender.py (Go's
text/template; Helm is not in Debian) for its defaults and for variants (5 replicas, TLS + SASL,
the ServiceMonitor, a StorageClass), the YAML parsed, and what a working cluster depends on
checked: StatefulSet replicas = the voters the entrypoint is told, pods spread by a required
anti-affinity, probes on the admin port, a PodDisruptionBudget of one, a headless Service that
publishes not-ready pods, a grace period covering preStop and a clean stop, every variable
deploy/entrypoint.sh reads set by the pod spec. The kustomize base (deploy/k8s/base) must be
the chart's current rendering. Then deploy/entrypoint.sh runs with the environment each pod
would get (its fieldRefs resolved) and a fake strata-server on PATH that prints its arguments:
the node id, the voters, the listeners and the advertised name must follow from the ordinal.
Last, the entrypoint starts the real broker as pod strata-0 of a one-voter set would (a private
/etc/hosts stands in for the cluster DNS), as PID 1 of a new PID namespace: it must accept the
derived command line, register under its headless name, and stop cleanly on SIGTERM.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SRC = harness.SRC
sys.path.insert(0, os.path.join(SRC, "tools"))
ENTRYPOINT = os.path.join(SRC, "deploy", "entrypoint.sh")

try:
    import yaml
except ImportError:  # python3-yaml (scripts/deps.sh test)
    yaml = None

VARIANTS = {
    "defaults": {},
    "five": {"replicas": 5, "storage": {"storageClassName": "fast"}},
    "secure": {"tls": {"enabled": True}, "sasl": {"enabled": True},
               "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}}},
    "one": {"replicas": 1, "smp": 2,
            "config": {"log.retention.ms": "604800000", "num.partitions": 7}},
}

# What the entrypoint reads from the pod (the STRATA_K8S_* block of its header), and the
# variables that only steer it.
STEERING = {"STRATA_CONFIG_FILE", "STRATA_SERVER_BIN"}


def entrypoint_vars():
    with open(ENTRYPOINT) as f:
        return set(re.findall(r"\b(STRATA_K8S_[A-Z_]+|STRATA_CONFIG_FILE)\b", f.read()))


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def one(docs, kind):
    found = by_kind(docs, kind)
    assert len(found) == 1, "%d %s" % (len(found), kind)
    return found[0]


def fake_server(tmp):
    """A strata-server that prints its arguments as one JSON list."""
    d = os.path.join(tmp, "bin")
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "strata-server")
    with open(p, "w") as f:
        f.write("#!/usr/bin/python3\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    os.chmod(p, 0o755)
    return d


def sets_of(argv):
    """{key: value} of the --set arguments (a later one wins, as in strata-server)."""
    out = {}
    for i, a in enumerate(argv):
        if a == "--set":
            k, _, v = argv[i + 1].partition("=")
            out[k] = v
    return out


def pod_env(container, namespace, pod_name):
    """The container's env as the kubelet would give it (fieldRefs and secrets resolved)."""
    env = {}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
            continue
        src = e["valueFrom"]
        if "fieldRef" in src:
            env[e["name"]] = {"metadata.namespace": namespace,
                              "metadata.name": pod_name}[src["fieldRef"]["fieldPath"]]
        elif "secretKeyRef" in src:
            env[e["name"]] = "secret:%s/%s" % (src["secretKeyRef"]["name"],
                                               src["secretKeyRef"]["key"])
        else:
            raise AssertionError("unknown valueFrom %r" % src)
    return env


class K8sTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if yaml is None:
            raise unittest.SkipTest("python3-yaml is missing")
        if not shutil.which("go"):
            raise unittest.SkipTest("go (golang-go) is missing: the chart cannot be rendered")
        import helmrender
        cls.hr = helmrender
        cls.tmp = tempfile.mkdtemp(prefix="strata-k8s-")
        t0 = time.monotonic()
        cls.rendered = {name: helmrender.render(v, namespace="kafka")
                        for name, v in VARIANTS.items()}
        print("rendered %d variants in %.1fs" % (len(VARIANTS), time.monotonic() - t0))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "tmp", ""), ignore_errors=True)

    def check_invariants(self, docs, values):
        sts = one(docs, "StatefulSet")
        spec = sts["spec"]
        tmpl = spec["template"]
        pod_labels = tmpl["metadata"]["labels"]
        self.assertEqual(spec["selector"]["matchLabels"], pod_labels)
        replicas = values.get("replicas", 3)
        self.assertEqual(spec["replicas"], replicas)
        (c,) = tmpl["spec"]["containers"]
        env = {e["name"]: e for e in c["env"]}
        # Voters = replicas: the entrypoint makes one voter per ordinal below STRATA_K8S_REPLICAS.
        self.assertEqual(env["STRATA_K8S_REPLICAS"]["value"], str(replicas))
        # Every variable the entrypoint reads is set by the pod (none left to a default).
        self.assertFalse(entrypoint_vars() - set(env), "unset: %s" % (entrypoint_vars() - set(env)))
        # A quorum forms only if all voters start and find each other before any is ready.
        self.assertEqual(spec["podManagementPolicy"], "Parallel")
        (headless,) = [s for s in by_kind(docs, "Service") if s["spec"].get("clusterIP") == "None"]
        self.assertEqual(spec["serviceName"], headless["metadata"]["name"])
        self.assertEqual(env["STRATA_K8S_HEADLESS"]["value"], headless["metadata"]["name"])
        self.assertTrue(headless["spec"]["publishNotReadyAddresses"])
        self.assertEqual(env["STRATA_K8S_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"],
                         "metadata.namespace")
        self.assertEqual(env["STRATA_K8S_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
                         "metadata.name")
        # One broker per node.
        aa = tmpl["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        self.assertEqual(aa[0]["topologyKey"], "kubernetes.io/hostname")
        self.assertEqual(aa[0]["labelSelector"]["matchLabels"], pod_labels)
        # Ports and probes: the admin port is where /v1/status/ready answers.
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(str(ports["admin"]), env["STRATA_K8S_ADMIN_PORT"]["value"])
        self.assertEqual(str(ports["kafka"]), env["STRATA_K8S_KAFKA_PORT"]["value"])
        self.assertEqual(str(ports["controller"]), env["STRATA_K8S_CONTROLLER_PORT"]["value"])

        def port_of(probe):
            h = probe.get("httpGet") or probe.get("tcpSocket")
            return ports.get(h["port"], h["port"])
        self.assertEqual(c["readinessProbe"]["httpGet"]["path"], "/v1/status/ready")
        for p in ("readinessProbe", "livenessProbe", "startupProbe"):
            self.assertEqual(port_of(c[p]), ports["admin"], p)
        # A clean stop: preStop, then SIGTERM with time for shutdown.timeout.ms (10 s) and syncs.
        pre = c["lifecycle"]["preStop"]["exec"]["command"]
        self.assertEqual(pre[0], "sleep")
        grace = tmpl["spec"]["terminationGracePeriodSeconds"]
        self.assertGreaterEqual(grace, int(pre[1]) + 30)
        # Data on the claim, mounted where the entrypoint points log.dirs; config where it reads.
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        (vct,) = spec["volumeClaimTemplates"]
        self.assertEqual(mounts[vct["metadata"]["name"]]["mountPath"],
                         env["STRATA_K8S_DATA_DIR"]["value"])
        self.assertEqual(vct["spec"]["accessModes"], ["ReadWriteOnce"])
        self.assertEqual(mounts["config"]["mountPath"], env["STRATA_CONFIG_FILE"]["value"])
        sc = values.get("storage", {}).get("storageClassName")
        self.assertEqual(vct["spec"].get("storageClassName"), sc)
        cm = one(docs, "ConfigMap")
        vols = {v["name"]: v for v in tmpl["spec"]["volumes"]}
        self.assertEqual(vols["config"]["configMap"]["name"], cm["metadata"]["name"])
        self.assertIn(mounts["config"]["subPath"], cm["data"])
        # Settings the entrypoint derives must not be in the shared file (they differ per pod).
        props = dict(ln.split("=", 1) for ln in cm["data"]["strata.properties"].splitlines()
                     if ln and not ln.startswith("#"))
        self.assertFalse({"node.id", "controller.quorum.voters", "advertised.listeners",
                          "listeners", "log.dirs"} & set(props))
        # Every value as the broker reads it: no e-notation from a number Helm read as a float.
        for k, v in values.get("config", {}).items():
            self.assertEqual(props[k], str(v), k)
        self.assertFalse([k for k, v in props.items() if re.fullmatch(r"[0-9.]+e\+[0-9]+", v)])
        self.assertTrue(tmpl["spec"]["securityContext"]["runAsNonRoot"])
        # PDB: one broker down at a time, over exactly the brokers.
        pdb = one(docs, "PodDisruptionBudget")
        self.assertEqual(pdb["spec"]["maxUnavailable"], 1)
        self.assertEqual(pdb["spec"]["selector"]["matchLabels"], pod_labels)
        # Services select the brokers; the client Service has the Kafka port.
        for s in by_kind(docs, "Service"):
            self.assertEqual(s["spec"]["selector"], pod_labels)
        client = [s for s in by_kind(docs, "Service") if s is not headless][0]
        self.assertIn("kafka", [p.get("targetPort") for p in client["spec"]["ports"]])
        # The ServiceMonitor, when asked for, scrapes /metrics on the admin port of the
        # headless Service only (each pod once).
        sms = by_kind(docs, "ServiceMonitor")
        self.assertEqual(len(sms), 1 if values.get("serviceMonitor", {}).get("enabled") else 0)
        for sm in sms:
            sel = sm["spec"]["selector"]["matchLabels"]
            matched = [s for s in by_kind(docs, "Service")
                       if all(s["metadata"]["labels"].get(k) == v for k, v in sel.items())]
            self.assertEqual(matched, [headless])
            (ep,) = sm["spec"]["endpoints"]
            self.assertEqual((ep["port"], ep["path"]), ("admin", "/metrics"))
            self.assertIn("admin", [p["name"] for p in headless["spec"]["ports"]])
            for k, v in values["serviceMonitor"].get("labels", {}).items():
                self.assertEqual(sm["metadata"]["labels"][k], v)
        return sts

    def test_chart_invariants(self):
        for name, values in VARIANTS.items():
            with self.subTest(variant=name):
                self.check_invariants(self.rendered[name], values)

    def test_chart_security(self):
        sts = one(self.rendered["secure"], "StatefulSet")
        (c,) = sts["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["STRATA_K8S_LISTENER_PROTOCOL"]["value"], "SASL_SSL")
        for v, key in (("STRATA_SASL_BOOTSTRAP_USERS", "users"), ("STRATA_SASL_JAAS_CONFIG", "jaas")):
            self.assertEqual(env[v]["valueFrom"]["secretKeyRef"], {"name": "strata-sasl", "key": key})
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        self.assertEqual(mounts["tls"], "/etc/strata/tls")
        props = one(self.rendered["secure"], "ConfigMap")["data"]["strata.properties"]
        self.assertIn("ssl.keystore.location=/etc/strata/tls/keystore.pem", props)
        self.assertIn("sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512", props)
        plain = one(self.rendered["defaults"], "StatefulSet")["spec"]["template"]["spec"]
        self.assertNotIn("tls", [v["name"] for v in plain["volumes"]])
        self.assertEqual(one(self.rendered["one"], "StatefulSet")["spec"]["template"]["spec"]
                         ["containers"][0]["args"], ["--smp", "2"])

    def test_kustomize_base_is_current(self):
        for d, want in ((self.hr.BASE, self.hr.base_files()),
                        (self.hr.MONITORING, self.hr.monitoring_files())):
            have = {n: open(os.path.join(d, n)).read() for n in os.listdir(d)}
            self.assertEqual(sorted(have), sorted(want), d)
            for n in want:
                self.assertEqual(have[n], want[n],
                                 "%s/%s is stale: python3 tools/helmrender.py --write-base" % (d, n))
        kubectl = shutil.which("kubectl")
        for d, values in ((self.hr.BASE, {}),
                          (self.hr.MONITORING, {"serviceMonitor": {"enabled": True}})):
            if kubectl:  # kustomize itself, where installed
                r = harness.run_cmd([kubectl, "kustomize", d], timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                docs = [x for x in yaml.safe_load_all(r.stdout) if x]
            else:
                docs = []
                with open(os.path.join(d, "kustomization.yaml")) as f:
                    for res in yaml.safe_load(f)["resources"]:
                        p = os.path.join(d, res)
                        if os.path.isdir(p):
                            p = [os.path.join(p, x) for x in sorted(os.listdir(p))
                                 if x != "kustomization.yaml"]
                        for q in p if isinstance(p, list) else [p]:
                            with open(q) as f:
                                docs += [x for x in yaml.safe_load_all(f) if x]
            sts = self.check_invariants(docs, values)
            self.assertEqual(sts["metadata"]["labels"]["app.kubernetes.io/managed-by"], "kustomize")

    def run_entrypoint(self, env, args=(), bindir=None):
        bindir = bindir or fake_server(self.tmp)
        full = {"PATH": bindir + ":/usr/bin:/bin", "STRATA_ENTRYPOINT_RESOLVE_WAIT": "0"}
        full.update(env)
        r = subprocess.run(["sh", ENTRYPOINT] + list(args), env=full, capture_output=True,
                           text=True, timeout=30)
        return r

    def test_entrypoint_per_pod(self):
        for name in ("defaults", "five", "secure", "one"):
            docs = self.rendered[name]
            sts = one(docs, "StatefulSet")
            (c,) = sts["spec"]["template"]["spec"]["containers"]
            n = sts["spec"]["replicas"]
            set_name = sts["metadata"]["name"]
            headless = sts["spec"]["serviceName"]
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            proto = "SASL_SSL" if name == "secure" else "PLAINTEXT"

            def fqdn(i):
                return "%s-%d.%s.kafka.svc.cluster.local" % (set_name, i, headless)
            voters = ",".join("%d@%s:%d" % (i + 1, fqdn(i), ports["controller"]) for i in range(n))
            for i in range(n):
                with self.subTest(variant=name, pod=i):
                    env = pod_env(c, "kafka", "%s-%d" % (set_name, i))
                    env["HOSTNAME"] = "%s-%d" % (set_name, i)
                    # The ConfigMap's file, as the pod mounts it.
                    conf = os.path.join(self.tmp, "strata.properties")
                    with open(conf, "w") as f:
                        f.write(one(docs, "ConfigMap")["data"]["strata.properties"])
                    env["STRATA_CONFIG_FILE"] = conf
                    r = self.run_entrypoint(env, c.get("args", []))
                    self.assertEqual(r.returncode, 0, r.stderr)
                    argv = json.loads(r.stdout)
                    self.assertEqual(argv[:2], ["--config", conf])
                    s = sets_of(argv)
                    self.assertEqual(s["node.id"], str(i + 1))
                    self.assertEqual(s["controller.quorum.voters"], voters)
                    self.assertEqual(s["listeners"], "%s://:%d,CONTROLLER://:%d"
                                     % (proto, ports["kafka"], ports["controller"]))
                    self.assertEqual(s["advertised.listeners"],
                                     "%s://%s:%d" % (proto, fqdn(i), ports["kafka"]))
                    self.assertEqual(s["admin.listen"], "0.0.0.0:%d" % ports["admin"])
                    self.assertEqual(s["log.dirs"], "/var/lib/strata")
                    if name == "secure":
                        self.assertEqual(s["sasl.bootstrap.users"], "secret:strata-sasl/users")
                        self.assertEqual(s["sasl.jaas.config"], "secret:strata-sasl/jaas")
                    if c.get("args"):
                        self.assertEqual(argv[-len(c["args"]):], c["args"])
                    # No steering variable leaks into the broker's settings.
                    self.assertFalse([k for k in s if k.startswith("k8s.") or k == "config.file"])

    def test_entrypoint_env_mapping(self):
        env = {"STRATA_LOG_RETENTION_MS": "1000", "STRATA_AUTO_CREATE_TOPICS_ENABLE": "false",
               "STRATA_SASL_JAAS_CONFIG": 'm required username="a b" password="c=d";',
               "STRATA_A__B___C": "x", "STRATA_CONFIG_FILE": "/nonexistent",
               "STRATA_SERVER_BIN": "strata-server"}
        r = self.run_entrypoint(env, ["--smp", "1"])
        self.assertEqual(r.returncode, 0, r.stderr)
        argv = json.loads(r.stdout)
        self.assertNotIn("--config", argv)  # no file, no --config
        self.assertEqual(argv[-2:], ["--smp", "1"])
        self.assertEqual(sets_of(argv), {
            "log.retention.ms": "1000", "auto.create.topics.enable": "false",
            "sasl.jaas.config": 'm required username="a b" password="c=d";', "a_b-c": "x"})
        # An env-mapped setting overrides the derived one (it comes later on the line).
        r = self.run_entrypoint({"STRATA_K8S_REPLICAS": "1", "STRATA_K8S_HEADLESS": "h",
                                 "STRATA_K8S_NAMESPACE": "n", "HOSTNAME": "s-0",
                                 "STRATA_LOG_DIRS": "/elsewhere"})
        argv = json.loads(r.stdout)
        self.assertEqual(sets_of(argv)["log.dirs"], "/elsewhere")
        self.assertLess(argv.index("log.dirs=/var/lib/strata"), argv.index("log.dirs=/elsewhere"))
        # Voters whose names do not resolve: waited for, bounded, then the broker starts anyway.
        t0 = time.monotonic()
        r = self.run_entrypoint({"STRATA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093,"
                                 "2@strata-nowhere.invalid:9093",
                                 "STRATA_ENTRYPOINT_RESOLVE_WAIT": "2"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)
        self.assertIn("voter strata-nowhere.invalid does not resolve after 2s", r.stderr)
        self.assertNotIn("entrypoint.resolve.wait", r.stdout)
        # A pod name without an ordinal, an ordinal past the replicas, a missing headless name.
        for bad in ({"HOSTNAME": "strata"}, {"HOSTNAME": "strata-3"},
                    {"HOSTNAME": "strata-x"}, {"HOSTNAME": "strata-0", "STRATA_K8S_HEADLESS": ""}):
            e = {"STRATA_K8S_REPLICAS": "3", "STRATA_K8S_HEADLESS": "h",
                 "STRATA_K8S_NAMESPACE": "n"}
            e.update(bad)
            if not e["STRATA_K8S_HEADLESS"]:
                del e["STRATA_K8S_HEADLESS"]
            r = self.run_entrypoint(e)
            self.assertNotEqual(r.returncode, 0, (bad, r.stdout))
            self.assertEqual(r.stdout, "", bad)

    def test_entrypoint_runs_broker_as_pid1(self):
        """The real broker through the entrypoint as pod strata-0 of 1 would run it: the
        derived command line must be one strata-server accepts. PID 1 of its own PID
        namespace, with a private /etc/hosts naming the pod's headless name (no cluster DNS
        here); SIGTERM stops it cleanly."""
        server = harness.server_binary()
        bindir = os.path.join(self.tmp, "realbin")
        os.makedirs(bindir, exist_ok=True)
        link = os.path.join(bindir, "strata-server")
        if not os.path.exists(link):
            os.symlink(server, link)
        data = tempfile.mkdtemp(prefix="data-", dir=self.tmp)
        kport, cport, aport = harness.free_port(), harness.free_port(), harness.free_port()
        fqdn = "strata-0.strata-headless.kafka.svc.cluster.local"
        env = harness.sanitizer_env({
            "PATH": bindir + ":/usr/bin:/bin", "STRATA_CONFIG_FILE": "/nonexistent",
            "STRATA_K8S_REPLICAS": "1", "STRATA_K8S_HEADLESS": "strata-headless",
            "STRATA_K8S_NAMESPACE": "kafka", "STRATA_K8S_POD_NAME": "strata-0",
            "STRATA_K8S_CLUSTER_DOMAIN": "cluster.local", "STRATA_K8S_KAFKA_PORT": str(kport),
            "STRATA_K8S_CONTROLLER_PORT": str(cport), "STRATA_K8S_ADMIN_PORT": str(aport),
            "STRATA_K8S_DATA_DIR": data, "STRATA_K8S_LISTENER_PROTOCOL": "PLAINTEXT"})
        hosts = os.path.join(self.tmp, "hosts")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 localhost %s\n" % fqdn)
        wrap = ('mount --bind "$0" /etc/hosts && exec sh "$1" --smp 1')
        cmd = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation",
               "private", "sh", "-c", wrap, hosts, ENTRYPOINT]
        probe = subprocess.run(["unshare", "--pid", "--fork", "--mount", "--propagation",
                                "private", "sh", "-c", 'mount --bind "$0" /etc/hosts', hosts],
                               capture_output=True)
        if probe.returncode != 0:
            self.skipTest("no PID and mount namespaces here: %s" % probe.stderr.decode()[-200:])
        log = open(os.path.join(self.tmp, "pid1.log"), "w+")
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
        try:
            def ready():
                with urllib.request.urlopen("http://127.0.0.1:%d/v1/status/ready" % aport,
                                            timeout=2) as r:
                    return r.status == 200
            harness.wait_until(ready, 30, "the broker behind the entrypoint to be ready")
            with urllib.request.urlopen("http://127.0.0.1:%d/v1/cluster" % aport, timeout=5) as r:
                cl = json.load(r)
            self.assertEqual(cl["node_id"], 1)
            self.assertTrue(cl["quorum"]["voter"])
            harness.wait_until(lambda: [b for b in json.load(urllib.request.urlopen(
                "http://127.0.0.1:%d/v1/cluster" % aport, timeout=5))["brokers"]
                if b["host"] == fqdn and b["port"] == kport and not b["fenced"]],
                30, "broker 1 registered as %s:%d" % (fqdn, kport))
            # The process that serves: the broker itself (exec), PID 1 inside the namespace.
            with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                (target,) = [int(x) for x in f.read().split()]
            with open("/proc/%d/status" % target) as f:
                nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
            self.assertEqual(nspid[-1], "1")
            with open("/proc/%d/comm" % target) as f:
                self.assertEqual(f.read().strip(), "strata-server")
            # the resolver's waits bounded for the broker (a vanished peer's name)
            with open("/proc/%d/environ" % target, "rb") as f:
                envs = f.read().split(b"\0")
            self.assertIn(b"RES_OPTIONS=timeout:1 attempts:2", envs)
            os.kill(target, signal.SIGTERM)
            rc = p.wait(timeout=30)
            log.seek(0)
            out = log.read()
            self.assertEqual(rc, 0, out[-2000:])
            self.assertIn("stopped cleanly", out)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()


if __name__ == "__main__":
    harness.main()
