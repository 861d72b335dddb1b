#!/usr/bin/env python3
"""helmrender.py — renders deploy/helm/strata offline, and writes the kustomize base from it.

Helm is not packaged in Debian; Go is. tools/helmrender/main.go (Go's text/template plus the
few Helm functions the chart uses) is built here with GO111MODULE=off into a cache folder,
given the chart's values (values.yaml, then overrides) as JSON, and its output parsed.

  render(overrides=None, release="strata", namespace="default", service="Helm")
      -> list of the manifests (dicts), in template order
  python3 tools/helmrender.py [--set key.path=value ...]      print the manifests
  python3 tools/helmrender.py --write-base        regenerate deploy/k8s/base/ and monitoring/

The kustomize base is the chart rendered with its defaults (managed-by: kustomize), one file
per template; test_k8s checks it is current.
"""

import atexit
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHART = os.path.join(SRC, "deploy", "helm", "strata")
BASE = os.path.join(SRC, "deploy", "k8s", "base")
MONITORING = os.path.join(SRC, "deploy", "k8s", "monitoring")
_BIN = None


def build():
    """Path of the helmrender binary (built once per process, under $TMPDIR)."""
    global _BIN
    if _BIN:
        return _BIN
    go = shutil.which("go")
    if not go:
        raise FileNotFoundError("go (Debian golang-go) is not installed")
    out = tempfile.mkdtemp(prefix="helmrender-")
    atexit.register(shutil.rmtree, out, True)
    env = dict(os.environ, GO111MODULE="off", GOPATH=os.path.join(out, "gopath"),
               GOCACHE=os.environ.get("GOCACHE") or os.path.join(out, "cache"), CGO_ENABLED="0")
    subprocess.run([go, "build", "-o", os.path.join(out, "helmrender"), "."],
                   cwd=os.path.join(SRC, "tools", "helmrender"), env=env, check=True,
                   timeout=120)
    _BIN = os.path.join(out, "helmrender")
    return _BIN


def merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = v
    return dst


def render_text(overrides=None, release="strata", namespace="default", service="Helm"):
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    merge(values, copy.deepcopy(overrides or {}))
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    # Helm's .Chart fields are Chart.yaml's keys with a capital first letter.
    chart = {k[0].upper() + k[1:]: v for k, v in chart.items()}
    data = {"Values": values, "Chart": chart,
            "Release": {"Name": release, "Namespace": namespace, "Service": service}}
    r = subprocess.run([build(), CHART], input=json.dumps(data), capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("helmrender: " + r.stderr)
    return r.stdout


def render(overrides=None, **kw):
    return [d for d in yaml.safe_load_all(render_text(overrides, **kw)) if d]


def split_sources(text):
    """{template file name: its rendered text} from helmrender's output."""
    out, cur = {}, None
    for line in text.splitlines(keepends=True):
        if line.startswith("# Source: "):
            cur = os.path.basename(line.split()[-1])
            out[cur] = ""
        elif line == "---\n":
            continue
        elif cur:
            out[cur] += line
    return out


HEADER = ("# Generated from deploy/helm/strata with its default values by\n"
          "# `python3 tools/helmrender.py --write-base`; edit the chart, not this file.\n")


def base_files():
    """{file name: contents} of deploy/k8s/base as the chart makes it now."""
    files = {name: HEADER + body for name, body in
             split_sources(render_text(service="kustomize")).items()}
    kust = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": sorted(files)}
    files["kustomization.yaml"] = HEADER + yaml.safe_dump(kust, sort_keys=False)
    return files


def monitoring_files():
    """{file name: contents} of deploy/k8s/monitoring: the base plus the ServiceMonitor."""
    sm = split_sources(render_text({"serviceMonitor": {"enabled": True}},
                                   service="kustomize"))["servicemonitor.yaml"]
    kust = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": ["../base", "servicemonitor.yaml"]}
    return {"servicemonitor.yaml": HEADER + sm,
            "kustomization.yaml": HEADER + yaml.safe_dump(kust, sort_keys=False)}


def write_dir(d, want):
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if name not in want:
            os.remove(os.path.join(d, name))
    for name, body in want.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(body)
    print("wrote %s: %s" % (d, " ".join(sorted(want))))


def main(argv):
    if argv[:1] == ["--write-base"]:
        write_dir(BASE, base_files())
        write_dir(MONITORING, monitoring_files())
        return 0
    overrides = {}
    while argv[:1] == ["--set"] and len(argv) >= 2:
        path, _, v = argv[1].partition("=")
        d = overrides
        keys = path.split(".")
        for k in keys[:-1]:
            d = d.setdefault(k, {})
        d[keys[-1]] = yaml.safe_load(v)
        argv = argv[2:]
    sys.stdout.write(render_text(overrides))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
