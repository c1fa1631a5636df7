"""Tests of sparecap_preempt.Schedule; run with: python3 -m unittest discover -s sdk/python/tests"""

import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sparecap_preempt as sp  # noqa: E402


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class ScheduleTest(unittest.TestCase):
    """The interval follows the store's measured save time once there is
    one; before that, the wrapper's interval or the default."""

    def setUp(self):
        self.env = {k: os.environ.pop(k, None) for k in ("SPARECAP_PREEMPTION_RATE", "SPARECAP_CHECKPOINT_INTERVAL")}
        self.dir = tempfile.TemporaryDirectory()
        self.store = sp.Store(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()
        for k, v in self.env.items():
            if v is not None:
                os.environ[k] = v

    def slow_save(self, step, seconds):
        self.store.save(step, lambda d: time.sleep(seconds))

    def test_measured_cost_sets_the_interval(self):
        os.environ["SPARECAP_PREEMPTION_RATE"] = "4.1"
        clk = FakeClock()
        s = sp.Schedule(self.store, default=600, first=30, clock=clk)
        self.assertEqual(s.rate, 4.1)
        self.assertEqual(s.interval, 30)  # nothing measured: the first checkpoint comes early
        clk.t += 29
        self.assertFalse(s.due())
        clk.t += 1
        self.assertTrue(s.due())
        self.slow_save(1, 0.05)
        s.saved()
        cost = self.store.cost()
        self.assertGreaterEqual(cost, 0.05)
        self.assertAlmostEqual(s.interval, sp.interval(4.1, cost))
        self.assertFalse(s.due())
        # A slower save makes a longer interval: Daly's grows with the cost.
        before = s.interval
        self.slow_save(2, 0.2)
        s.saved()
        self.assertGreater(s.interval, before)
        self.assertIn("Daly", s.describe())
        self.assertIn("4.100 %/h", s.describe())

    def test_without_a_rate_the_wrappers_interval(self):
        os.environ["SPARECAP_CHECKPOINT_INTERVAL"] = "2m"
        s = sp.Schedule(self.store, default=600, clock=FakeClock())
        self.assertEqual(s.rate, 0)
        self.assertEqual(s.interval, 120)
        self.slow_save(1, 0.01)
        s.saved()
        self.assertEqual(s.interval, 120)
        self.assertIn("fixed", s.describe())

    def test_bad_input(self):
        os.environ["SPARECAP_PREEMPTION_RATE"] = "lots"
        self.assertEqual(sp.preemption_rate(), 0)
        os.environ["SPARECAP_PREEMPTION_RATE"] = "-3"
        self.assertEqual(sp.preemption_rate(), 0)
        with self.assertRaises(ValueError):
            sp.Schedule(self.store, default=0)


if __name__ == "__main__":
    unittest.main()
