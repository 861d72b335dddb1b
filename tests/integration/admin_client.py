"""admin_client.py — talk to a broker's admin HTTP API from the admin tests.

http_get(port, path) -> (status, content_type, body text)
get_json(port, path) -> parsed JSON (asserts 200)
scrape(port)         -> Metrics: the /metrics text parsed strictly (a malformed line, a
                        sample before its family's TYPE line, or a family declared twice
                        raises), with .value(name, **labels) and .sum(name, **labels).
"""

import http.client
import json
import re

_SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def http_get(port, path, method="GET", timeout=5.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read().decode("utf-8")
    finally:
        c.close()


def get_json(port, path):
    status, ctype, body = http_get(port, path)
    assert status == 200, "GET %s: %d %s" % (path, status, body)
    assert ctype.startswith("application/json"), ctype
    return json.loads(body)


def _unescape(v):
    out, i = [], 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v):
            out.append({"n": "\n", "\\": "\\", '"': '"'}.get(v[i + 1], v[i + 1]))
            i += 2
        else:
            out.append(v[i])
            i += 1
    return "".join(out)


class Metrics:
    def __init__(self, text):
        self.types = {}          # family -> type
        self.samples = []        # (name, {labels}, float)
        family = None
        for line in text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"):
            if line.startswith("# HELP "):
                family = line.split(" ")[2]
                assert family not in self.types, "family %s declared twice" % family
                continue
            if line.startswith("# TYPE "):
                _, _, name, typ = line.split(" ")
                assert name == family, "TYPE %s after HELP %s" % (name, family)
                self.types[name] = typ
                continue
            m = _SAMPLE_RE.match(line)
            assert m, "malformed sample line: %r" % line
            name, labels_txt, value = m.group(1), m.group(3) or "", m.group(4)
            assert family and name.startswith(family), "sample %s outside its family" % name
            labels, pos = {}, 0
            while pos < len(labels_txt):
                lm = _LABEL_RE.match(labels_txt, pos)
                assert lm, "malformed labels: %r" % labels_txt
                labels[lm.group(1)] = _unescape(lm.group(2))
                pos = lm.end()
            self.samples.append((name, labels, float(value)))

    def find(self, name, **labels):
        return [(l, v) for n, l, v in self.samples
                if n == name and all(l.get(k) == str(x) for k, x in labels.items())]

    def value(self, name, **labels):
        f = self.find(name, **labels)
        assert len(f) == 1, "%d samples of %s%s" % (len(f), name, labels)
        return f[0][1]

    def sum(self, name, **labels):
        return sum(v for _, v in self.find(name, **labels))


def scrape(port):
    status, ctype, body = http_get(port, "/metrics")
    assert status == 200, "GET /metrics: %d" % status
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    return Metrics(body)
