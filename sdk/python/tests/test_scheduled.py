"""Tests of sparecap_preempt.scheduled; run with: python3 -m unittest discover -s sdk/python"""

import datetime as dt
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sparecap_preempt as sp  # noqa: E402


class ScheduledTest(unittest.TestCase):
    """The scheduled notice, from the pod's annotations and a Slurm node's
    Extra; a deadline alone schedules none."""

    def setUp(self):
        self.old = os.environ.pop("SLURMD_NODENAME", None)

    def tearDown(self):
        if self.old is not None:
            os.environ["SLURMD_NODENAME"] = self.old

    def test_annotations(self):
        want = dt.datetime(2026, 12, 8, 9, 0, tzinfo=dt.timezone.utc)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "annotations")
            with open(path, "w", encoding="utf-8") as f:
                f.write('app="trainer"\nsparecap.dev/preempt-at="2026-12-08T09:00:00Z"\n')
            self.assertEqual(sp.scheduled(path), want)
            with open(path, "w", encoding="utf-8") as f:
                f.write("2026-12-08T09:00:00Z\n")
            self.assertIsNone(sp.scheduled(path))
            self.assertIsNone(sp.scheduled(os.path.join(d, "none")))

    def test_slurm_extra(self):
        want = dt.datetime(2026, 12, 8, 9, 0, tzinfo=dt.timezone.utc)
        show = 'NodeName=gpu-preemptible-dp-2 Extra={"sparecap.dev/preempt-at":"2026-12-08T09:00:00Z"}'
        self.assertEqual(sp.slurm_scheduled(show), want)
        self.assertIsNone(sp.slurm_scheduled('NodeName=n Extra={"sparecap.dev/deadline":"2026-12-08T09:00:00Z"}'))


if __name__ == "__main__":
    unittest.main()
