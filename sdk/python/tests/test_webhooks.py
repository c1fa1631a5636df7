"""Tests of sparecap_preempt.webhooks; run with: make test-python"""

import os
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from sparecap_preempt import webhooks as wh  # noqa: E402

# The reference vector of the Standard Webhooks specification; the Go
# SDK's tests (pkg/webhooks) check the same one.
REF_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
REF_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
REF_TS = 1614265330
REF_BODY = b'{"test": 2432232314}'
REF_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def headers(msg_id=REF_ID, ts=REF_TS, sigs=(REF_SIG,)):
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": " ".join(sigs)}


class VerifyTest(unittest.TestCase):
    def test_reference_vector(self):
        self.assertEqual(wh.sign(REF_SECRET, REF_ID, REF_TS, REF_BODY), REF_SIG)
        self.assertEqual(wh.verify(REF_SECRET, headers(), REF_BODY, now=REF_TS + 10), REF_ID)
        # Headers in any case, as frameworks hand them over.
        h = {k.title(): v for k, v in headers().items()}
        self.assertEqual(wh.verify(REF_SECRET, h, REF_BODY, now=REF_TS), REF_ID)

    def test_forgeries(self):
        other = wh.new_secret()
        forged = wh.sign(other, REF_ID, REF_TS, REF_BODY)
        cases = [
            ("wrong secret", other, headers(), REF_BODY),
            ("signed with another secret", REF_SECRET, headers(sigs=(forged,)), REF_BODY),
            ("body changed", REF_SECRET, headers(), b'{"test": 2432232315}'),
            ("body re-encoded", REF_SECRET, headers(), b'{"test":2432232314}'),
            ("id changed", REF_SECRET, headers(msg_id="msg_other"), REF_BODY),
            ("timestamp changed", REF_SECRET, headers(ts=REF_TS + 1), REF_BODY),
            ("v2 only", REF_SECRET, headers(sigs=("v2," + REF_SIG[3:],)), REF_BODY),
            ("no signature", REF_SECRET, headers(sigs=()), REF_BODY),
            ("no id", REF_SECRET, headers(msg_id=""), REF_BODY),
            ("timestamp not a number", REF_SECRET, dict(headers(), **{"webhook-timestamp": "yesterday"}), REF_BODY),
            ("not a secret", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", headers(), REF_BODY),
            ("secret not base64", "whsec_not base64!", headers(), REF_BODY),
        ]
        for name, secret, h, body in cases:
            with self.subTest(name):
                with self.assertRaises(wh.WebhookVerificationError):
                    wh.verify(secret, h, body, now=REF_TS)

    def test_replay_outside_the_tolerance(self):
        for d in (-300, 0, 300):
            wh.verify(REF_SECRET, headers(), REF_BODY, now=REF_TS + d)
        for d in (-301, 301, 3600):
            with self.assertRaises(wh.WebhookVerificationError) as cm:
                wh.verify(REF_SECRET, headers(), REF_BODY, now=REF_TS + d)
            self.assertIn("too far from now", str(cm.exception))
        wh.verify(REF_SECRET, headers(), REF_BODY, now=REF_TS + 3600, tolerance=7200)

    def test_rotation_either_secret(self):
        old, new = wh.new_secret(), wh.new_secret()
        body, ts = b'{"specversion":"1.0"}', 1_800_000_000
        h = headers("ev-1-7", ts, (wh.sign(new, "ev-1-7", ts, body), wh.sign(old, "ev-1-7", ts, body)))
        for s in (old, new):
            self.assertEqual(wh.verify(s, h, body, now=ts), "ev-1-7")
        with self.assertRaises(wh.WebhookVerificationError):
            wh.verify(wh.new_secret(), h, body, now=ts)

    def test_new_secret(self):
        a, b = wh.new_secret(), wh.new_secret()
        self.assertTrue(a.startswith("whsec_"))
        self.assertNotEqual(a, b)
        self.assertEqual(len(wh._key(a)), 32)


class DedupTest(unittest.TestCase):
    def test_seen_within_the_window(self):
        d = wh.Dedup()
        now = 1_800_000_000
        self.assertFalse(d.seen("ev-1", now))
        d.add("ev-1", now)
        self.assertTrue(d.seen("ev-1", now + 60))
        self.assertTrue(d.seen("ev-1", now + 24 * 3600))
        self.assertFalse(d.seen("ev-2", now))
        self.assertFalse(d.seen("ev-1", now + wh.DEFAULT_DEDUP_WINDOW))
        self.assertEqual(len(d), 0)

    def test_max(self):
        d = wh.Dedup(window=3600, max=3)
        now = 1_800_000_000
        for i in range(5):
            d.add("id-%d" % i, now + i)
        self.assertEqual(len(d), 3)
        self.assertFalse(d.seen("id-0", now + 5))
        self.assertTrue(d.seen("id-4", now + 5))
        d.add("id-2", now + 3000)
        self.assertTrue(d.seen("id-2", now + 5400))
        self.assertFalse(d.seen("id-3", now + 5400))

    def test_concurrent(self):
        d = wh.Dedup()
        threads = [threading.Thread(target=lambda i=i: [d.add("t%d-%d" % (i, j)) for j in range(200)]) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(d), 800)


if __name__ == "__main__":
    unittest.main()
