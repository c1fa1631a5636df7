"""Tests of sparecap_preempt.api against a real sparecap server; run with:
python3 -m unittest discover -s sdk/python/tests

The server is SPARECAP_BIN (make test-python builds bin/sparecap) or one
built here with go; a failed build fails the tests, it never skips them."""

import datetime as dt
import http.server
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(SDK))
sys.path.insert(0, SDK)

from sparecap_preempt.api import APIError, Client, EventStream, ParameterError, ResponseError, snake_case  # noqa: E402


def _binary(tmp):
    given = os.environ.get("SPARECAP_BIN")
    if given:
        path = os.path.abspath(given)
        if not os.access(path, os.X_OK):
            raise RuntimeError("SPARECAP_BIN=%s is not an executable file" % given)
        return path
    path = os.path.join(tmp, "sparecap")
    try:
        out = subprocess.run(
            ["go", "build", "-o", path, "./cmd/sparecap"], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600,
        )
    except FileNotFoundError:
        raise RuntimeError("go is not on PATH: it builds the sparecap server these tests run (or set SPARECAP_BIN)") from None
    if out.returncode != 0:
        raise RuntimeError("go build ./cmd/sparecap failed:\n" + out.stdout.decode(errors="replace"))
    return path


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _readme_example():
    """The README's API example and the output it shows."""
    with open(os.path.join(SDK, "README.md"), encoding="utf-8") as f:
        text = f.read().split("## The API client", 1)[1]
    m = re.search(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", text, re.S)
    if not m:
        raise AssertionError("README.md's API client section lost its example and its output")
    return m.group(1), m.group(2)


class ServerTest(unittest.TestCase):
    """The client against `sparecap server`, from the document it serves."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sparecap-pyapi-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        binary = _binary(cls.tmp)
        cls.admin_token = "sc-test-admin-" + secrets.token_hex(16)
        cls.url = "http://127.0.0.1:%d" % _free_port()
        env = dict(os.environ)
        env.update({
            "SPARECAP_ADMIN_TOKEN": cls.admin_token,
            # The server writes the CLI's config on first start; not the user's.
            "SPARECAP_CONFIG": os.path.join(cls.tmp, "config.yaml"),
            "HOME": cls.tmp,
            "XDG_CONFIG_HOME": os.path.join(cls.tmp, "config"),
        })
        cls.log = open(os.path.join(cls.tmp, "server.log"), "wb")
        cls.addClassCleanup(cls.log.close)
        cls.proc = subprocess.Popen(
            [binary, "server", "--data-dir", os.path.join(cls.tmp, "data"), "--addr", cls.url[len("http://"):],
             "--provision-time", "100ms"],
            env=env, stdout=cls.log, stderr=subprocess.STDOUT,
        )
        cls.addClassCleanup(cls._stop)
        deadline = time.monotonic() + 30
        while True:
            if cls.proc.poll() is not None:
                raise RuntimeError("sparecap server exited (%s):\n%s" % (cls.proc.returncode, cls._log()))
            try:
                with urllib.request.urlopen(cls.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("sparecap server not ready in 30s:\n" + cls._log())
            time.sleep(0.05)
        cls.admin = Client(cls.url, cls.admin_token)

    @classmethod
    def _stop(cls):
        cls.proc.terminate()
        try:
            cls.proc.wait(10)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
            cls.proc.wait()

    @classmethod
    def _log(cls):
        with open(os.path.join(cls.tmp, "server.log"), "rb") as f:
            return f.read()[-4000:].decode(errors="replace")

    def project(self, name):
        """A new project and a client holding its token."""
        p = self.admin.createProject(body={"project_id": name})
        return Client(self.url, p["token"], document=self.admin.document)

    def test_document(self):
        with open(os.path.join(REPO, "api", "openapi.json"), encoding="utf-8") as f:
            committed = json.load(f)
        want = {op["operationId"] for item in committed["paths"].values() for op in item.values() if isinstance(op, dict) and "operationId" in op}
        self.assertEqual(set(self.admin.operations), want)
        for name in ("createCluster", "create_cluster", "whoAmI", "who_am_i", "listEvents", "list_events"):
            self.assertTrue(callable(getattr(self.admin, name)), name)
        self.assertEqual(snake_case("getOpenAPI"), "get_open_api")
        # The committed file serves as well as the server's.
        c = Client(self.url, self.admin_token, document=os.path.join(REPO, "api", "openapi.json"))
        self.assertTrue(c.whoAmI()["admin"])

    def test_clusters(self):
        c = self.project("py-clusters")
        who = c.whoAmI()
        self.assertEqual((who["project_id"], who["admin"]), ("py-clusters", False))

        cluster = c.createCluster(body={
            "cluster_name": "trainer", "region": "us-central-2", "gpu_type": "RTX_6000_PCI",
            "cluster_type": "KUBERNETES", "billing_type": "ON_DEMAND", "num_gpus": 8,
        })
        cid = cluster["cluster_id"]
        self.assertTrue(cid.startswith("c-"), cid)
        self.assertEqual(c.getCluster(id=cid)["cluster_name"], "trainer")
        self.assertEqual([x["cluster_id"] for x in c.list_clusters()["clusters"]], [cid])
        updated = c.updateCluster(id=cid, body={"num_preemptible_gpus": 8})
        self.assertEqual(updated["desired_preemptible_gpus"], 8)

        # Pages until a node joined (--provision-time 100ms), so the stream
        # below, which starts with the kept events, cannot wait forever.
        deadline = time.monotonic() + 15
        while True:
            page = c.listEvents(id=cid, limit=100, watch=False)
            reasons = [e["reason"] for e in page["node_lifecycle_events"]]
            if "NodeAdded" in reasons:
                break
            self.assertLess(time.monotonic(), deadline, "no NodeAdded in 15s: %s" % reasons)
            time.sleep(0.05)
        self.assertEqual(c.listEvents(id=cid, cursor=page["next_cursor"])["node_lifecycle_events"], [])
        with c.listEvents(id=cid, watch=True) as events:
            self.assertIsInstance(events, EventStream)
            first = next(iter(events))
        self.assertEqual(first.event, "node_lifecycle_event")
        self.assertEqual(first.id, first.data["cursor"])
        self.assertEqual(first.data, page["node_lifecycle_events"][0])

        now = dt.datetime.now(dt.timezone.utc)
        csv = c.getUsage(from_=now - dt.timedelta(days=1), to=now + dt.timedelta(days=1), format="csv")
        self.assertIsInstance(csv, str)
        self.assertTrue(csv.startswith("project_id,cluster_id,"), csv[:200])
        usage = c.get_usage(**{"from": "2026-01-01T00:00:00Z", "to": "2027-01-01T00:00:00Z"})
        self.assertIsInstance(usage, dict)

    def test_refusals(self):
        c = self.project("py-refusals")
        with self.assertRaises(APIError) as e:
            c.createCluster(body={
                "cluster_name": "odd", "region": "us-central-2", "gpu_type": "RTX_6000_PCI",
                "cluster_type": "KUBERNETES", "billing_type": "ON_DEMAND", "num_gpus": 12,
            })
        self.assertEqual((e.exception.status, e.exception.code, e.exception.field), (400, "invalid_argument", "num_gpus"))
        self.assertIn("multiple of 8", e.exception.message)
        self.assertIn("400 invalid_argument", str(e.exception))

        with self.assertRaises(APIError) as e:
            c.getCluster(id="c-000000000000")
        self.assertEqual((e.exception.status, e.exception.code, e.exception.field), (404, "not_found", None))
        with self.assertRaises(APIError) as e:
            c.listProjects()
        self.assertEqual((e.exception.status, e.exception.code), (403, "permission_denied"))
        with self.assertRaises(APIError) as e:
            Client(self.url, "sc_" + "0" * 64, document=self.admin.document).whoAmI()
        self.assertEqual((e.exception.status, e.exception.code), (401, "unauthenticated"))
        with self.assertRaises(APIError) as e:
            self.admin.createProject(body={"project_id": "py-refusals"})
        self.assertEqual((e.exception.status, e.exception.code), (409, "conflict"))

    def test_checked_before_sending(self):
        # Nothing listens there: a call that was sent fails with URLError instead.
        c = Client("http://127.0.0.1:%d" % _free_port(), "t", document=self.admin.document)
        cases = [
            (lambda: c.getCluster(), "getCluster needs 'id'"),
            (lambda: c.get_cluster(id="c-1", name="x"), "getCluster has no parameter 'name'; it takes id, pretty"),
            (lambda: c.listEvents(id="c-1", limit="10"), "'limit' must be an int"),
            (lambda: c.listEvents(id="c-1", watch="yes"), "'watch' must be True or False"),
            (lambda: c.getUsage(to="2027-01-01T00:00:00Z"), "getUsage needs 'from' (from_=)"),
            (lambda: c.getUsage(from_="a", to="b", format="xml"), "must be one of json, csv"),
            (lambda: c.getUsage(from_=dt.datetime(2026, 1, 1), to="b"), "needs a time zone"),
            (lambda: c.getCluster(id=""), "must be a non-empty string"),
            (lambda: c.getCluster(id=7), "must be a non-empty string"),
            (lambda: c.createCluster(), "createCluster needs a JSON body"),
            (lambda: c.createCluster(body=[1]), "body must be a dict"),
            (lambda: c.createCluster(body={"n": float("nan")}), "body is not JSON"),
            (lambda: c.whoAmI(body={}), "whoAmI takes no body"),
            (lambda: c.whoAmI(id="x"), "whoAmI has no parameter 'id'"),
            (lambda: c.call("deleteEverything"), "no operation 'deleteEverything'"),
        ]
        for call, want in cases:
            with self.assertRaises(ParameterError) as e:
                call()
            self.assertIn(want, str(e.exception))
        with self.assertRaises(urllib.error.URLError):
            c.whoAmI()

    def test_readme_example(self):
        code, want = _readme_example()
        env = dict(os.environ, SPARECAP_URL=self.url, SPARECAP_ADMIN_TOKEN=self.admin_token, PYTHONPATH=SDK)
        out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout.decode(errors="replace"))
        self.assertEqual(out.stdout.decode(), want)


class _Handler(http.server.BaseHTTPRequestHandler):
    answers = {
        "/v1/whoami": (502, "text/html", b"<html>bad gateway</html>"),
        "/v1/tokens": (200, "application/json", b"[" + b"0," * 600 + b"0]"),
        "/v1/prices": (200, "application/json", b"{not json"),
        "/v1/capacity": (302, "application/json", b"{}"),
        "/v1/storage": (200, "application/octet-stream", b"\0"),
    }

    def do_GET(self):
        if self.path == "/v1/openapi.json":
            with open(os.path.join(REPO, "api", "openapi.json"), "rb") as f:
                status, ctype, body = 200, "application/json", f.read()
        else:
            status, ctype, body = self.answers.get(self.path.split("?")[0], (404, "text/plain", b""))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if status == 302:
            self.send_header("Location", "http://127.0.0.1:1/elsewhere")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class OddAnswersTest(unittest.TestCase):
    """Answers the API does not give but a proxy or another server may."""

    @classmethod
    def setUpClass(cls):
        cls.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.srv.server_close)
        cls.addClassCleanup(cls.srv.shutdown)
        cls.c = Client("http://127.0.0.1:%d" % cls.srv.server_address[1], "t", document=os.path.join(REPO, "api", "openapi.json"), max_body=1000)

    def test_answers(self):
        with self.assertRaises(APIError) as e:
            self.c.whoAmI()
        self.assertEqual((e.exception.status, e.exception.code, e.exception.message), (502, "http_502", "<html>bad gateway</html>"))
        with self.assertRaises(APIError) as e:
            self.c.getCapacity()
        self.assertEqual(e.exception.status, 302)  # not followed: it would take the token elsewhere
        with self.assertRaisesRegex(ResponseError, "over 1000 bytes"):
            self.c.listTokens()
        with self.assertRaisesRegex(ResponseError, "not JSON"):
            self.c.listRates()
        with self.assertRaisesRegex(ResponseError, "unknown media type"):
            self.c.getStorage()

    def test_bad_setup(self):
        for url in ("", "127.0.0.1:8407", "ftp://x", "http://h/?q=1"):
            with self.assertRaisesRegex(ValueError, "base_url"):
                Client(url, "t", document={})
        with self.assertRaisesRegex(ValueError, "line breaks"):
            Client("http://h", "t\nX-Evil: 1", document={})
        with self.assertRaisesRegex(ValueError, "not an OpenAPI document"):
            Client("http://h", "t", document={})
        with self.assertRaisesRegex(ValueError, "has no operationId"):
            Client("http://h", "t", document={"openapi": "3.1.0", "paths": {"/x": {"get": {}}}})
        with self.assertRaisesRegex(ValueError, "do not match the path"):
            Client("http://h", "t", document={"openapi": "3.1.0", "paths": {"/x/{id}": {"get": {"operationId": "x"}}}})


if __name__ == "__main__":
    unittest.main()
