"""deploy/grafana/strata.json is a valid Grafana dashboard and every query on it names a metric
a running broker exports (issue 7).

Checks the dashboard's schema fields (title, uid, schemaVersion, time, templating, panels with
unique ids, types, grid positions inside the 24-column grid, data sources, targets with
unique refIds and expressions), that every expression (panels and template variables) is
valid PromQL (`promtool check rules` over them, Grafana's variables substituted), and that
every strata_* metric they name is a family in /metrics of a broker that has served traffic.
Also checks deploy/prometheus/prometheus.yml with `promtool check config`."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402

DASHBOARD = os.path.join(harness.SRC, "deploy", "grafana", "strata.json")
PROM_CONFIG = os.path.join(harness.SRC, "deploy", "prometheus", "prometheus.yml")
PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "table", "bargauge", "heatmap", "text"}
METRIC_RE = re.compile(r"\b(strata_[a-zA-Z0-9_]+)")


def load():
    with open(DASHBOARD) as f:
        return json.load(f)


def expressions(d):
    """(where, expr) for every panel target and query variable."""
    out = []
    for p in d["panels"]:
        for t in p.get("targets", []):
            out.append(("panel %d %r target %s" % (p["id"], p["title"], t["refId"]), t["expr"]))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.match(r"label_values\((.*),\s*\w+\)$", q)
            assert m, "variable %s: unexpected query %r" % (v["name"], q)
            out.append(("variable %s" % v["name"], m.group(1)))
    return out


def substitute(expr):
    return (expr.replace("$__rate_interval", "1m").replace("$instance", ".*")
            .replace("$topic", ".*").replace("$job", ".*"))


class DashboardTest(ServerTestCase):
    SMP = 2

    def test_dashboard_schema(self):
        d = load()
        for key in ("title", "uid", "schemaVersion", "panels", "templating", "time", "version",
                    "refresh", "tags"):
            self.assertIn(key, d)
        self.assertIsInstance(d["schemaVersion"], int)
        self.assertGreaterEqual(d["schemaVersion"], 30)
        self.assertTrue(re.match(r"^[a-zA-Z0-9_-]{1,40}$", d["uid"]))
        self.assertEqual(set(d["time"]), {"from", "to"})
        names = [v["name"] for v in d["templating"]["list"]]
        self.assertEqual(len(names), len(set(names)))
        self.assertIn("datasource", names)
        ids = [p["id"] for p in d["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids must be unique")
        self.assertGreaterEqual(len(ids), 10)
        titles = set()
        for p in d["panels"]:
            self.assertIn(p["type"], PANEL_TYPES)
            self.assertTrue(p["title"])
            g = p["gridPos"]
            for k in ("x", "y", "w", "h"):
                self.assertIsInstance(g[k], int)
            self.assertTrue(0 <= g["x"] and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"])
            if p["type"] == "row":
                continue
            titles.add(p["title"])
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${datasource}"})
            refs = [t["refId"] for t in p["targets"]]
            self.assertTrue(refs and len(refs) == len(set(refs)), p["title"])
            for t in p["targets"]:
                self.assertTrue(t["expr"].strip())
        # What the issue asks the dashboard to show.
        text = json.dumps(d)
        for m in ("strata_partition_produced_records_total", "strata_kafka_request_duration_seconds_bucket",
                  "strata_group_lag", "strata_storage_fsync_duration_seconds_bucket",
                  "strata_kafka_request_errors_total", "strata_shard_busy_ratio"):
            self.assertIn(m, text)

    def test_queries_are_promql_and_name_exported_metrics(self):
        d = load()
        exprs = expressions(d)
        # Every metric named must be a family the broker exports (after some traffic, so
        # every family has samples where it can).
        topic = self.unique()
        kc.create_topic(self.bootstrap, topic, 2)
        kc.produce_all(kc.producer(self.bootstrap), topic, [{"value": b"v"}] * 10)
        m = wait_until(lambda: ac.scrape(self.server.admin_port).find(
            "strata_partition_log_end_offset", topic=topic) and ac.scrape(self.server.admin_port),
            10, "the topic in /metrics")
        families = set(m.types)
        self.assertGreater(len(families), 30)
        for where, e in exprs:
            names = METRIC_RE.findall(e)
            # Prometheus's own `up` is the one other series a panel may use.
            self.assertTrue(names or re.match(r"^sum\(up\{", e),
                            "%s names no strata_ metric: %s" % (where, e))
            for n in names:
                fam = n
                for suf in ("_bucket", "_sum", "_count"):
                    if n.endswith(suf) and m.types.get(n[: -len(suf)]) == "histogram":
                        fam = n[: -len(suf)]
                self.assertIn(fam, families, "%s: %s is not exported by the broker" % (where, n))
        promtool = shutil.which("promtool")
        if not promtool:
            self.skipTest("promtool not installed: PromQL syntax not checked")
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for i, (where, e) in enumerate(exprs):
                f.write("      - record: dashboard_expr_%d\n        expr: %s\n"
                        % (i, json.dumps(substitute(e))))
            path = f.name
        try:
            r = subprocess.run([promtool, "check", "rules", path], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 0, "promtool check rules:\n%s%s" % (r.stdout,
                                                                                r.stderr))
            r = subprocess.run([promtool, "check", "config", PROM_CONFIG], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finally:
            os.unlink(path)


if __name__ == "__main__":
    harness.main()
