"""Tests of sparecap_preempt; run with: python3 -m unittest discover -s sdk/python"""

import datetime as dt
import http.server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import sparecap_preempt as sp  # noqa: E402

UTC = dt.timezone.utc


def env_without_sparecap():
    return {k: v for k, v in os.environ.items() if not k.startswith("SPARECAP_")}


class IntervalTest(unittest.TestCase):
    # The same hand-computed values as the Go SDK's TestYoungDaly.
    def test_young_daly(self):
        m = sp.mtbf(2.3)
        self.assertAlmostEqual(m, 156521.739, places=2)
        self.assertAlmostEqual(sp.young(90, m), 5307.910, places=2)
        self.assertAlmostEqual(sp.daly(90, m), 5248.080, places=2)
        self.assertAlmostEqual(sp.interval(2.3, 90), 5248.080, places=2)
        m = sp.mtbf(4.1)
        self.assertAlmostEqual(sp.young(600, m), 10264.787, places=2)
        self.assertAlmostEqual(sp.daly(600, m), 9868.684, places=2)
        self.assertEqual(sp.daly(3 * 3600, 3600), 3600)
        for cost, mtbf in ((0, 3600), (60, 0), (-1, -1)):
            self.assertEqual(sp.young(cost, mtbf), 0)
            self.assertEqual(sp.daly(cost, mtbf), 0)
        self.assertEqual(sp.interval(0, 60), 0)
        self.assertEqual(sp.mtbf(-1), 0)

    def test_expect(self):
        e = sp.expect(3600, 90, 36000)
        self.assertAlmostEqual(e.overhead, 90 / 3600 + 1845 / 36000)
        self.assertEqual(e.lost_per_preemption, 1845)
        self.assertEqual(sp.expect(0, 90, 36000), sp.Expected(0.0, 0.0))


class DurationTest(unittest.TestCase):
    def test_slurm_deadline(self):
        show = ('NodeName=gpu-preemptible-dp-2 State=MIXED+DRAIN Reason=sparecap: Reclaimed; deadline '
                '2026-12-04T15:00:00Z [root@2026-12-04T14:55:00] '
                'Extra={"sparecap.dev/cause":"Reclaimed","sparecap.dev/deadline":"2026-12-04T15:00:00Z"}\n')
        self.assertEqual(sp.slurm_deadline(show), dt.datetime(2026, 12, 4, 15, 0, tzinfo=dt.timezone.utc))
        for s in ["NodeName=x State=IDLE", "NodeName=x Extra=not-json", 'NodeName=x Extra={"other":"1"}']:
            self.assertIsNone(sp.slurm_deadline(s), s)
        with mock.patch.dict(os.environ, {"SLURMD_NODENAME": ""}):
            self.assertIsNone(sp.read_slurm_deadline())

    def test_parse_duration(self):
        for text, want in (("5m0s", 300), ("1h27m28s", 5248), ("90s", 90), ("1.5h", 5400), ("250ms", 0.25),
                           ("1m30.5s", 90.5), ("0s", 0), ("2us", 2e-6), ("3ns", 3e-9), ("10µs", 1e-5)):
            self.assertAlmostEqual(sp.parse_duration(text), want, msg=text)
        for bad in ("", "5", "m", "5x", "-1s", "1h-2m", "s5"):
            with self.assertRaises(ValueError, msg=bad):
                sp.parse_duration(bad)

    def test_checkpoint_interval(self):
        with mock.patch.dict(os.environ, {"SPARECAP_CHECKPOINT_INTERVAL": "1h27m28s"}):
            self.assertEqual(sp.checkpoint_interval(60), 5248)
        with mock.patch.dict(os.environ, {"SPARECAP_CHECKPOINT_INTERVAL": "soon"}):
            self.assertEqual(sp.checkpoint_interval(60), 60)
        with mock.patch.dict(os.environ, env_without_sparecap(), clear=True):
            self.assertEqual(sp.checkpoint_interval(60), 60)


class _AdviceHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the http.server name
        type(self).seen = (self.path, self.headers.get("Authorization"))
        if "gpu_type=h100" not in self.path:
            body = json.dumps({"error": {"code": "invalid_argument", "message": "unknown GPU type"}}).encode()
            self.send_response(400)
        else:
            body = json.dumps(
                {
                    "region": "eu-west",
                    "gpu_type": "h100",
                    "preemption_rate_percent_per_hour": 2.3,
                    "rate_basis": "measured",
                    "formula": "daly",
                    "recommended_interval_seconds": 5248.08,
                    "expected_overhead_percent": 3.4,
                    "expected_lost_seconds_per_preemption": 2669.04,
                }
            ).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class AdviseTest(unittest.TestCase):
    def setUp(self):
        self.srv = http.server.HTTPServer(("127.0.0.1", 0), _AdviceHandler)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.srv.server_port

    def tearDown(self):
        if self.srv:
            self.srv.shutdown()
            self.srv.server_close()

    def test_advise(self):
        a = sp.advise("eu-west", "h100", 90, url=self.url, token="tok")
        self.assertEqual(a.interval, 5248.08)
        self.assertEqual(a.rate_basis, "measured")
        self.assertEqual(a.formula, "daly")
        self.assertAlmostEqual(a.overhead, 0.034)
        path, auth = _AdviceHandler.seen
        self.assertTrue(path.startswith("/v1/advice/checkpoint?"), path)
        self.assertIn("checkpoint_seconds=90.0", path)
        self.assertEqual(auth, "Bearer tok")

    def test_refused(self):
        with self.assertRaisesRegex(sp.AdviceError, "400: unknown GPU type"):
            sp.advise("eu-west", "a100", 90, url=self.url, token="tok")

    def test_unreachable(self):
        self.srv.shutdown()
        self.srv.server_close()
        self.srv = None
        with self.assertRaises(sp.AdviceError):
            sp.advise("eu-west", "h100", 90, url=self.url, token="tok", timeout=1)
        with mock.patch.dict(os.environ, env_without_sparecap(), clear=True):
            with self.assertRaisesRegex(sp.AdviceError, "SPARECAP_URL"):
                sp.advise("eu-west", "h100", 90)


class NoticeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.env = mock.patch.dict(os.environ, env_without_sparecap(), clear=True)
        self.env.start()
        self.addCleanup(self.env.stop)
        self.deadline = dt.datetime(2026, 12, 3, 10, 0, 30, 123456, tzinfo=UTC)

    def wait(self, poll=0.02, **kw):
        got = []
        ev = threading.Event()

        def cb(n):
            got.append(n)
            ev.set()

        cancel = sp.on_notice(cb, poll=poll, **kw)
        self.addCleanup(cancel)
        return got, ev

    def test_read_annotation(self):
        p = os.path.join(self.dir, "annotations")
        with open(p, "w") as f:
            f.write('kubernetes.io/config.seen="2026-12-03T09:00:00Z"\n')
            f.write('sparecap.dev/preempt-deadline="2026-12-03T10:00:30.123456789Z"\n')
        self.assertEqual(sp.read_annotation(p), self.deadline)
        with open(p, "w") as f:
            f.write('other="x"\n')
        self.assertIsNone(sp.read_annotation(p))
        with open(p, "w") as f:
            f.write("2026-12-03T10:00:30.123456Z\n")  # a file of one value
        self.assertEqual(sp.read_annotation(p), self.deadline)
        with open(p, "w") as f:
            f.write('sparecap.dev/preempt-deadline="not a time"\n')
        self.assertIsNone(sp.read_annotation(p))
        self.assertIsNone(sp.read_annotation(os.path.join(self.dir, "missing")))

    def test_environment(self):
        os.environ["SPARECAP_DEADLINE"] = "2026-12-03T10:00:30.123456Z"
        got, ev = self.wait(annotations_file="-")
        self.assertTrue(ev.wait(2))
        self.assertEqual(got[0], sp.Notice(self.deadline, "environment"))
        self.assertEqual(sp.deadline(annotations_file="-"), self.deadline)

    def test_deadline_file_later(self):
        p = os.path.join(self.dir, "deadline")
        got, ev = self.wait(annotations_file="-", deadline_file=p, signals=[])
        self.assertFalse(ev.wait(0.2), "a notice before the file was written")
        with open(p, "w") as f:
            f.write("2026-12-03T10:00:30.123456Z\n")
        self.assertTrue(ev.wait(2))
        self.assertEqual(got, [sp.Notice(self.deadline, "deadline-file")])

    def test_annotation_appears(self):
        p = os.path.join(self.dir, "annotations")
        with open(p, "w") as f:
            f.write('app="trainer"\n')
        got, ev = self.wait(annotations_file=p, signals=[])
        self.assertFalse(ev.wait(0.2))
        # The kubelet replaces the file (atomically, through a symlink swap).
        tmp = p + ".new"
        with open(tmp, "w") as f:
            f.write('app="trainer"\nsparecap.dev/preempt-deadline="2026-12-03T10:00:30.123456Z"\n')
        os.rename(tmp, p)
        self.assertTrue(ev.wait(2))
        self.assertEqual(got, [sp.Notice(self.deadline, "annotation")])

    def test_sigterm_with_grace(self):
        got, ev = self.wait(annotations_file="-", grace=12)
        before = dt.datetime.now(UTC)
        os.kill(os.getpid(), signal.SIGTERM)
        self.assertTrue(ev.wait(2))
        self.assertEqual(got[0].source, "SIGTERM")
        left = (got[0].deadline - before).total_seconds()
        self.assertTrue(11 <= left <= 14, left)

    def test_grace_from_the_wrapper(self):
        # sparecap run writes Go durations: --grace 300s is "5m0s".
        os.environ["SPARECAP_GRACE"] = "5m0s"
        got, ev = self.wait(annotations_file="-")
        before = dt.datetime.now(UTC)
        os.kill(os.getpid(), signal.SIGTERM)
        self.assertTrue(ev.wait(2))
        left = (got[0].deadline - before).total_seconds()
        self.assertTrue(299 <= left <= 302, left)

    def test_signal_takes_the_files_deadline(self):
        p = os.path.join(self.dir, "annotations")
        # The watcher looks once at start, then not for a minute: the
        # deadline can only come through the signal.
        got, ev = self.wait(annotations_file=p, signals=[signal.SIGUSR1], poll=60)
        time.sleep(0.1)
        with open(p, "w") as f:
            f.write('sparecap.dev/preempt-deadline="2026-12-03T10:00:30.123456Z"\n')
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertTrue(ev.wait(2))
        self.assertEqual(got[0], sp.Notice(self.deadline, "SIGUSR1"))
        time.sleep(0.1)
        self.assertEqual(len(got), 1, "the callback ran more than once")

    def test_cancel_restores_handlers(self):
        before = signal.getsignal(signal.SIGUSR1)
        cancel = sp.on_notice(lambda n: None, annotations_file="-")
        self.assertIsNot(signal.getsignal(signal.SIGUSR1), before)
        cancel()
        self.assertIs(signal.getsignal(signal.SIGUSR1), before)


def write_step(step, size=1000):
    def write(d):
        os.makedirs(os.path.join(d, "optim"))
        with open(os.path.join(d, "model.bin"), "wb") as f:
            f.write(bytes([step % 256]) * size)
        with open(os.path.join(d, "optim", "state.json"), "w") as f:
            json.dump({"step": step}, f)

    return write


class StoreTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def test_save_latest_keep(self):
        s = sp.Store(self.dir, keep=2)
        with self.assertRaises(sp.NoCheckpoint):
            s.latest()
        for step in (10, 20, 30):
            ck = s.save(step, write_step(step))
            self.assertEqual(ck.step, step)
            self.assertGreater(ck.cost, 0)
        latest = s.latest()
        self.assertEqual(latest.step, 30)
        self.assertEqual(os.path.basename(latest.dir), "ckpt-0000000000000030")
        self.assertEqual(sorted(f.name for f in latest.files), ["model.bin", "optim/state.json"])
        self.assertEqual([c.step for c in s.all()], [20, 30])
        self.assertEqual(sorted(os.listdir(self.dir)), ["ckpt-0000000000000020", "ckpt-0000000000000030"])
        self.assertGreater(s.cost(), 0)
        self.assertGreater(sp.Store(self.dir).cost(), 0, "a new store reads the cost from the manifest")
        # The same step again replaces it.
        s.save(30, write_step(31))
        with open(os.path.join(s.latest().dir, "model.bin"), "rb") as f:
            self.assertEqual(f.read(1), bytes([31]))

    def test_torn_and_corrupt_skipped(self):
        s = sp.Store(self.dir)
        s.save(1, write_step(1))
        s.save(2, write_step(2))
        # A save that died before its manifest: a temporary directory, and
        # (by hand) a directory with the final name but no manifest.
        os.makedirs(os.path.join(self.dir, ".tmp-ckpt-0000000000000003-abc"))
        os.makedirs(os.path.join(self.dir, "ckpt-0000000000000004"))
        self.assertEqual(s.latest().step, 2)
        # A truncated file.
        with open(os.path.join(self.dir, "ckpt-0000000000000002", "model.bin"), "r+b") as f:
            f.truncate(10)
        self.assertEqual(s.latest().step, 1)
        # Same size, other bytes: only the checksum sees it.
        with open(os.path.join(self.dir, "ckpt-0000000000000001", "model.bin"), "r+b") as f:
            f.write(b"\xff")
        self.assertEqual(s.latest().step, 1)
        with self.assertRaises(sp.NoCheckpoint):
            sp.Store(self.dir, verify_checksums=True).latest()
        # The next save clears what crashes left.
        s.save(5, write_step(5))
        self.assertFalse([n for n in os.listdir(self.dir) if n.startswith(".tmp-")])

    def test_bad_input_changes_nothing(self):
        s = sp.Store(self.dir)
        s.save(1, write_step(1))

        def boom(d):
            with open(os.path.join(d, "half"), "w") as f:
                f.write("x")
            raise RuntimeError("disk full")

        with self.assertRaisesRegex(RuntimeError, "disk full"):
            s.save(2, boom)
        with self.assertRaisesRegex(ValueError, "MANIFEST.json"):
            s.save(3, lambda d: open(os.path.join(d, "MANIFEST.json"), "w").close())
        with self.assertRaises(ValueError):
            s.save(-1, write_step(1))
        self.assertEqual(sorted(os.listdir(self.dir)), ["ckpt-0000000000000001"])
        with mock.patch.dict(os.environ, env_without_sparecap(), clear=True):
            with self.assertRaisesRegex(ValueError, "SPARECAP_CHECKPOINT_DIR"):
                sp.Store()

    def test_killed_mid_save(self):
        # A child saves step 1, then starts step 2 and is SIGKILLed while it
        # writes; the next start resumes from step 1.
        ready = os.path.join(self.dir, "ready")
        ckdir = os.path.join(self.dir, "ck")
        code = (
            "import os, sys, time\n"
            "sys.path.insert(0, %r)\n"
            "import sparecap_preempt as sp\n"
            "s = sp.Store(%r)\n"
            "s.save(1, lambda d: open(os.path.join(d, 'w'), 'w').write('one'))\n"
            "def slow(d):\n"
            "    with open(os.path.join(d, 'w'), 'w') as f:\n"
            "        f.write('two, half')\n"
            "        f.flush()\n"
            "        open(%r, 'w').close()\n"
            "        time.sleep(60)\n"
            "s.save(2, slow)\n"
        ) % (os.path.dirname(HERE), ckdir, ready)
        p = subprocess.Popen([sys.executable, "-c", code])
        try:
            for _ in range(500):
                if os.path.exists(ready):
                    break
                time.sleep(0.01)
            self.assertTrue(os.path.exists(ready), "the child never started its second save")
            p.send_signal(signal.SIGKILL)
        finally:
            p.wait(10)
        self.assertEqual(p.returncode, -signal.SIGKILL)
        self.assertTrue([n for n in os.listdir(ckdir) if n.startswith(".tmp-")], "no torn save to skip")
        ck = sp.Store(ckdir).latest()
        self.assertEqual(ck.step, 1)
        with open(os.path.join(ck.dir, "w")) as f:
            self.assertEqual(f.read(), "one")


if __name__ == "__main__":
    unittest.main()


class _PatchHandler(http.server.BaseHTTPRequestHandler):
    calls = []
    status = 200

    def do_PATCH(self):  # noqa: N802 - the http.server name
        n = int(self.headers.get("Content-Length", "0"))
        type(self).calls.append((self.path, self.headers.get("Content-Type"), self.headers.get("Authorization"),
                                 self.rfile.read(n).decode()))
        body = b"{}"
        if type(self).status != 200:
            body = json.dumps({"message": 'pods "train-0" is forbidden: ' + "x" * 500}).encode()
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class PodReporterTest(unittest.TestCase):
    def serve(self) -> int:
        """Starts a fresh _PatchHandler server; returns its port."""
        _PatchHandler.calls, _PatchHandler.status = [], 200
        srv = http.server.HTTPServer(("127.0.0.1", 0), _PatchHandler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.shutdown)
        return srv.server_port

    # The same request as the Go SDK's TestPodReporter: one merge patch of
    # the annotation, the token as the file holds it now, to the second
    # in UTC; a refusal is a ReportError with the server's message, cut.
    def test_report(self):
        port = self.serve()
        with tempfile.TemporaryDirectory() as d:
            token = os.path.join(d, "token")
            with open(token, "w") as f:
                f.write("first\n")
            rep = sp.PodReporter("http://127.0.0.1:%d/" % port, token, "ml team", "train-0")
            at = dt.datetime(2026, 12, 6, 1, 2, 3, 400000, tzinfo=dt.timezone(dt.timedelta(hours=1)))
            rep.report(at)
            with open(token, "w") as f:
                f.write("rotated")
            _PatchHandler.status = 403
            with self.assertRaises(sp.ReportError) as cm:
                rep.report(at)
            self.assertEqual(cm.exception.status, 403)
            self.assertTrue(cm.exception.message.startswith('pods "train-0" is forbidden'))
            self.assertLessEqual(len(cm.exception.message), 200)
            with self.assertRaises(ValueError):
                rep.report(dt.datetime(2026, 12, 6))
        self.assertEqual(len(_PatchHandler.calls), 2)
        path, ctype, auth, body = _PatchHandler.calls[0]
        self.assertEqual(path, "/api/v1/namespaces/ml%20team/pods/train-0?fieldManager=sparecap-checkpoint")
        self.assertEqual(ctype, "application/merge-patch+json")
        self.assertEqual(auth, "Bearer first")
        self.assertEqual(json.loads(body), {"metadata": {"annotations": {sp.ANNOTATION_LAST_CHECKPOINT: "2026-12-06T00:02:03Z"}}})
        self.assertEqual(_PatchHandler.calls[1][2], "Bearer rotated")

    def test_report_progress(self):
        port = self.serve()
        with tempfile.TemporaryDirectory() as d:
            token = os.path.join(d, "token")
            with open(token, "w") as f:
                f.write("t")
            rep = sp.PodReporter("http://127.0.0.1:%d" % port, token, "ml", "train-0")
            rep.report_progress(42)
            for bad in (-1, 1.5, True, "3"):
                with self.assertRaises(ValueError):
                    rep.report_progress(bad)
        self.assertEqual(len(_PatchHandler.calls), 1)
        self.assertEqual(json.loads(_PatchHandler.calls[0][3]), {"metadata": {"annotations": {sp.ANNOTATION_PROGRESS: "42"}}})

    def test_outside_a_pod(self):
        with mock.patch.dict(os.environ, {"POD_NAME": "", "POD_NAMESPACE": ""}):
            with self.assertRaises(sp.ReportError) as cm:
                sp.PodReporter.in_cluster()
        self.assertIn("POD_NAMESPACE and POD_NAME", str(cm.exception))
