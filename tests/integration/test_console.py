"""The web console at /ui and the admin routes it needs (issue 26): GET /v1/groups, GET
/v1/topics/{t}/partitions/{p}/records, POST /v1/topics and POST /v1/topics/{t}/configs, driven
over HTTP and checked with a real Kafka client; then the page itself, loaded in headless
Debian chromium (its DOM after the scripts ran, and screenshots checked to be real, non-blank
PNGs). STRATA_CONSOLE_SHOTS=DIR also keeps the screenshots there (docs/console-*.png)."""

import base64
import http.client
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import admin_client as ac  # noqa: E402
import harness  # noqa: E402
import kclients as kc  # noqa: E402
from harness import ServerTestCase, wait_until  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def request(port, method, path, body=None, timeout=20.0):
    """(status, parsed JSON or None, raw text) of one HTTP request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        text = r.read().decode("utf-8")
        try:
            j = json.loads(text)
        except ValueError:
            j = None
        return r.status, j, text
    finally:
        c.close()


def png_check(testcase, path, width, height, rows=240):
    """A valid PNG of width x height whose first `rows` rows hold more than one colour (the
    whole zlib stream decoded and its size checked; the band unfiltered exactly)."""
    data = open(path, "rb").read()
    testcase.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n", path)
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        testcase.assertEqual(zlib.crc32(typ + chunk) & 0xffffffff, crc, "chunk CRC %s" % typ)
        if typ == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", chunk)
        elif typ == b"IDAT":
            idat.append(chunk)
        pos += 12 + n
        if typ == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = ihdr
    testcase.assertEqual((w, h, depth, interlace), (width, height, 8, 0), path)
    bpp = {2: 3, 6: 4}[ctype]
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    testcase.assertEqual(len(raw), h * (stride + 1), path)
    prev = bytearray(stride)
    colours = set()
    for y in range(min(rows, h)):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif f == 4:
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pr) & 255
        for x in range(0, stride, bpp * 7):
            colours.add(bytes(line[x:x + 3]))
        prev = line
    testcase.assertGreater(len(colours), 4, "%s looks blank: %d colours" % (path, len(colours)))


class ConsoleTest(ServerTestCase):
    SMP = 2

    @classmethod
    def setUpClass(cls):
        harness.need_server_binary()
        super().setUpClass()
        cls.admin = cls.server.admin_port
        wait_until(lambda: ac.http_get(cls.admin, "/v1/status/ready")[0] == 200, 15,
                   "admin ready")
        cls.profile = tempfile.mkdtemp(prefix="strata-it-chromium-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.profile, ignore_errors=True)
        super().tearDownClass()

    # ---- helpers --------------------------------------------------------------------------

    def chromium(self, hash_, *args):
        if not os.access(CHROMIUM, os.X_OK):
            self.skipTest("chromium is not installed (scripts/deps.sh test installs it)")
        url = "http://127.0.0.1:%d/ui#%s" % (self.admin, hash_)
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--user-data-dir=" + self.profile, "--virtual-time-budget=4000",
               "--window-size=1280,900", *args, url]
        r = subprocess.run(cmd, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace")[-2000:])
        return r.stdout.decode("utf-8")

    def dom(self, hash_="overview"):
        return self.chromium(hash_, "--dump-dom")

    def group_lags(self, page, group):
        """{(topic, partition): lag} as the page's groups view shows them."""
        m = re.search(r'<div class="group" data-group="%s">(.*?)</table></div>' % re.escape(group),
                      page, re.S)
        self.assertIsNotNone(m, "group %s not on the page" % group)
        rows = re.findall(r'<tr data-topic="([^"]+)" data-partition="(\d+)">.*?data-lag="(\d*)"',
                          m.group(1), re.S)
        return {(t, int(p)): int(lag) for t, p, lag in rows}

    def groups_api(self, group):
        gs = ac.get_json(self.admin, "/v1/groups")["groups"]
        return next((g for g in gs if g["group"] == group), None)

    def create(self, name, partitions=3, configs=None):
        st, j, text = request(self.admin, "POST", "/v1/topics",
                              {"name": name, "partitions": partitions, "replication_factor": 1,
                               "configs": configs or {}})
        self.assertEqual(st, 201, text)
        self.assertEqual(j["created"], name)
        kc.wait_topic(self.bootstrap, name, partitions)

    # ---- HTTP routes ----------------------------------------------------------------------

    def test_routes_errors(self):
        t = self.unique()
        self.create(t, 1)
        bad = [("POST", "/v1/topics", b'{"name":', 400, "bad JSON"),
               ("POST", "/v1/topics", b'[1,2]', 400, "JSON object"),
               ("POST", "/v1/topics", {"partitions": 3}, 400, "name"),
               ("POST", "/v1/topics", {"name": "a b"}, 400, "name"),
               ("POST", "/v1/topics", {"name": "x", "partitions": "3"}, 400, "partitions"),
               ("POST", "/v1/topics", {"name": "x", "configs": [1]}, 400, "configs"),
               ("POST", "/v1/topics", b"{" + b" " * 70000 + b"}", 413, "65536"),
               ("POST", "/v1/topics", {"name": t}, 409, "TOPIC_ALREADY_EXISTS"),
               ("POST", "/v1/topics/nope-%d/configs" % os.getpid(), {"retention.ms": "1"}, 404,
                "UNKNOWN_TOPIC_OR_PARTITION"),
               ("POST", "/v1/topics/%s/configs" % t, {"no.such.config": "1"}, 400,
                "INVALID_CONFIG"),
               ("POST", "/v1/topics/%s/configs" % t, {}, 400, "config changes"),
               ("POST", "/v1/topics/%s/configs" % t, b"nope", 400, "bad JSON"),
               ("GET", "/v1/topics/%s/configs" % t, None, 405, "POST"),
               ("GET", "/v1/topics/nope-%d/partitions/0/records" % os.getpid(), None, 404,
                "UNKNOWN_TOPIC_OR_PARTITION"),
               ("GET", "/v1/topics/%s/partitions/7/records" % t, None, 404,
                "UNKNOWN_TOPIC_OR_PARTITION"),
               ("GET", "/v1/topics/%s/partitions/0/records?offset=abc" % t, None, 400, "want"),
               ("GET", "/v1/topics/%s/partitions/0/records?max=0" % t, None, 400, "want"),
               ("GET", "/v1/topics/%s/partitions/0/records?offset=1&timestamp=1" % t, None, 400,
                "not both"),
               ("GET", "/v1/topics/%s/partitions/0/records?offset=99" % t, None, 416,
                "OFFSET_OUT_OF_RANGE"),
               ("GET", "/v1/topics/%s/partitions/x/records" % t, None, 404, "not found"),
               ("DELETE", "/v1/topics", None, 405, "method")]
        for method, path, body, want, why in bad:
            st, j, text = request(self.admin, method, path, body)
            self.assertEqual(st, want, "%s %s: %s" % (method, path, text))
            self.assertIsNotNone(j, "%s %s answered JSON: %r" % (method, path, text))
            self.assertIn(why, j["error"] + j.get("code", ""), "%s %s" % (method, path))
        # The broker survived all of it and still answers.
        self.assertEqual(ac.http_get(self.admin, "/v1/status/ready")[0], 200)
        # The routes are in the index and the OpenAPI description.
        idx = ac.get_json(self.admin, "/")
        listed = {(e["method"], e["path"]) for e in idx["endpoints"]}
        for r in [("GET", "/v1/groups"), ("POST", "/v1/topics"),
                  ("POST", "/v1/topics/{topic}/configs"),
                  ("GET", "/v1/topics/{topic}/partitions/{partition}/records"), ("GET", "/ui")]:
            self.assertIn(r, listed)
        api = ac.get_json(self.admin, "/v1/openapi.json")
        self.assertEqual(sorted(api["paths"]["/v1/topics"]), ["get", "post"])
        rec = api["paths"]["/v1/topics/{topic}/partitions/{partition}/records"]["get"]
        self.assertEqual([(p["name"], p["in"]) for p in rec["parameters"]],
                         [("topic", "path"), ("partition", "path"), ("offset", "query"),
                          ("timestamp", "query"), ("max", "query")])
        self.assertIn("requestBody", api["paths"]["/v1/topics"]["post"])
        # The console's files, with their content types.
        for path, ctype in [("/ui", "text/html"), ("/ui/", "text/html"),
                            ("/ui/console.js", "text/javascript"), ("/ui/console.css", "text/css")]:
            status, got, body = ac.http_get(self.admin, path)
            self.assertEqual((status, got.split(";")[0]), (200, ctype), path)
            self.assertGreater(len(body), 500, path)
        self.assertEqual(ac.http_get(self.admin, "/ui/nope.js")[0], 404)

    def test_records_and_configs(self):
        t = self.unique()
        self.create(t, 1, {"retention.ms": "3600000"})
        p = kc.producer(self.bootstrap)
        t0 = int(time.time() * 1000) - 60000
        msgs = [{"key": b"k%d" % i, "value": json.dumps({"n": i}).encode(), "partition": 0,
                 "headers": [("h", b"v%d" % i)], "timestamp": t0 + i * 1000} for i in range(20)]
        msgs.append({"key": None, "value": bytes([0, 1, 2, 0xff]), "partition": 0,
                     "timestamp": t0 + 20000})
        kc.produce_all(p, t, msgs)
        base = "/v1/topics/%s/partitions/0/records" % t
        r = ac.get_json(self.admin, base + "?max=5")
        self.assertEqual((r["offset"], r["next_offset"], r["high_watermark"]), (0, 5, 21))
        self.assertEqual([x["offset"] for x in r["records"]], [0, 1, 2, 3, 4])
        first = r["records"][0]
        self.assertEqual((first["key"], first["value"], first["timestamp"]),
                         ("k0", '{"n": 0}', t0))
        self.assertEqual(base64.b64decode(first["value_b64"]), b'{"n": 0}')
        self.assertEqual(first["headers"], [{"key": "h", "value": "v0", "value_b64": "djA="}])
        r = ac.get_json(self.admin, base + "?offset=19")
        self.assertEqual([x["offset"] for x in r["records"]], [19, 20])
        binary = r["records"][1]
        self.assertEqual((binary["key"], binary["key_b64"], binary["value"]), (None, None, None))
        self.assertEqual(base64.b64decode(binary["value_b64"]), bytes([0, 1, 2, 0xff]))
        r = ac.get_json(self.admin, base + "?timestamp=%d&max=2" % (t0 + 7500))
        self.assertEqual([x["offset"] for x in r["records"]], [8, 9])
        r = ac.get_json(self.admin, base + "?timestamp=%d" % (t0 + 10**9))
        self.assertEqual((r["offset"], r["records"]), (21, []))
        r = ac.get_json(self.admin, base + "?offset=21")
        self.assertEqual(r["records"], [])
        # Config edits: set one, drop another, seen by a Kafka client's DescribeConfigs.
        st, j, text = request(self.admin, "POST", "/v1/topics/%s/configs" % t,
                              {"retention.ms": None, "segment.ms": 600000})
        self.assertEqual(st, 200, text)
        self.assertEqual(sorted(j["altered"]), ["retention.ms", "segment.ms"])
        from confluent_kafka.admin import ConfigResource
        a = kc.admin(self.bootstrap)

        def described():
            res = ConfigResource(ConfigResource.Type.TOPIC, t)
            cfg = a.describe_configs([res])[res].result(timeout=10)
            return (cfg["segment.ms"].value == "600000"
                    and cfg["retention.ms"].source != 1) and cfg
        wait_until(described, 10, "DescribeConfigs to show the console's changes")

        def in_topics():
            ts = ac.get_json(self.admin, "/v1/topics")["topics"]
            c = next(x for x in ts if x["name"] == t)["configs"]
            return c == {"segment.ms": "600000"}
        wait_until(in_topics, 10, "/v1/topics to show the changed configs")

    # ---- the page ---------------------------------------------------------------------------

    def test_console_in_chromium(self):
        t = self.unique("console")
        g = self.unique("group")
        self.create(t, 3, {"retention.ms": "86400000"})
        md = kc.admin(self.bootstrap).list_topics(t, timeout=10)
        self.assertEqual(len(md.topics[t].partitions), 3)
        p = kc.producer(self.bootstrap)
        kc.produce_all(p, t, [{"key": b"k%d" % i, "value": json.dumps({"order": i}).encode(),
                               "partition": i % 3} for i in range(30)])
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": g,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            c.commit(offsets=[TopicPartition(t, 0, 2), TopicPartition(t, 1, 4),
                              TopicPartition(t, 2, 10)], asynchronous=False)

            def lag_is(want):
                gr = self.groups_api(g)
                got = gr and {(o["topic"], o["partition"]): o["lag"] for o in gr["offsets"]}
                return got == want and gr
            first = {(t, 0): 8, (t, 1): 6, (t, 2): 0}
            wait_until(lambda: lag_is(first), 10, "/v1/groups to show the committed lag")
            page = self.dom()
            self.assertIn('<tr data-broker="0">', page)
            self.assertIn("127.0.0.1:%d" % self.server.port, page)
            self.assertIn('<tr data-topic="%s">' % t, page)
            self.assertRegex(page, r'<tr data-group="%s">.*?group-lag">14<' % re.escape(g))
            self.assertEqual(self.group_lags(page, g), first)
            # Consume more with the group, commit, and the page follows.
            c.assign([TopicPartition(t, 0, 2), TopicPartition(t, 1, 4)])
            got, deadline = 0, time.monotonic() + 20
            while got < 14:
                self.assertLess(time.monotonic(), deadline, "consumed %d of 14" % got)
                got += sum(1 for m in c.consume(14 - got, 0.5) if m.error() is None)
            c.commit(asynchronous=False)
        finally:
            c.close()
        second = {(t, 0): 0, (t, 1): 0, (t, 2): 0}
        wait_until(lambda: lag_is(second), 10, "/v1/groups to show the new lag")
        page = self.dom("groups")
        self.assertEqual(self.group_lags(page, g), second)
        # The topic view shows the partitions and the config; the browser reads records.
        page = self.dom("topics/" + t)
        self.assertIn('<code id="detail-name">%s</code>' % t, page)
        self.assertIn('data-config="retention.ms" value="86400000"', page)
        page = self.dom("messages/%s/1/0/json" % t)
        self.assertIn('<tr data-offset="9">', page)
        self.assertIn('"order": 28', page)
        # Screenshots: real PNGs, not blank.
        keep = os.environ.get("STRATA_CONSOLE_SHOTS")
        shots = [("overview", "overview"), ("topics/" + t, "topics"), ("groups", "groups"),
                 ("messages/%s/1/0/json" % t, "messages")]
        for hash_, name in shots:
            path = os.path.join(self.profile, "console-%s.png" % name)
            self.chromium(hash_, "--screenshot=" + path)
            self.assertGreater(os.path.getsize(path), 5000, path)
            png_check(self, path, 1280, 900)
            if keep:
                shutil.copy(path, os.path.join(keep, "console-%s.png" % name))


if __name__ == "__main__":
    harness.main()
