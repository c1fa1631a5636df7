"""When to checkpoint: Daly's interval for the preemption rate and the time
the store really took to save, worked out again after every save."""

import os
import time
from typing import Callable, Optional

from .interval import checkpoint_interval, interval, mtbf

ENV_PREEMPTION_RATE = "SPARECAP_PREEMPTION_RATE"


def preemption_rate() -> float:
    """The pool's preemption rate in percent an hour that ``sparecap run``
    got from the API (``SPARECAP_PREEMPTION_RATE``); 0 when unknown."""
    try:
        rate = float(os.environ.get(ENV_PREEMPTION_RATE, "") or 0)
    except ValueError:
        return 0.0
    return rate if rate > 0 else 0.0


class Schedule:
    """Says when a checkpoint is due.

    With a preemption rate (``rate``, else ``SPARECAP_PREEMPTION_RATE``) the
    interval is Daly's for that rate and the store's measured save time
    (:meth:`Store.cost`), so a model whose checkpoint takes 40 s is not
    saved on the schedule of one that takes 4. Before the first save has
    been measured, and without a rate, it is the interval ``sparecap run``
    gave (``SPARECAP_CHECKPOINT_INTERVAL``) or ``default``. The first
    checkpoint comes after ``first`` seconds when that is shorter, so the
    cost is measured early."""

    def __init__(self, store, default: float = 1800.0, rate: Optional[float] = None,
                 first: Optional[float] = None, clock: Callable[[], float] = time.monotonic):
        if default <= 0:
            raise ValueError("default interval must be positive")
        self.store = store
        self.rate = preemption_rate() if rate is None else max(rate, 0.0)
        self.fixed = checkpoint_interval(default)
        self.first = self.fixed if first is None else min(first, self.fixed)
        self._clock = clock
        self._last = clock()
        self._saves = 0

    @property
    def cost(self) -> float:
        """Seconds the last save took, measured by the store (0: none yet)."""
        return self.store.cost()

    @property
    def interval(self) -> float:
        """Seconds between checkpoints as things stand."""
        cost = self.cost
        if self.rate > 0 and cost > 0:
            return interval(self.rate, cost)
        if self._saves == 0 and cost <= 0:
            return self.first
        return self.fixed

    def due(self) -> bool:
        """Whether a checkpoint is due now."""
        return self._clock() - self._last >= self.interval

    def saved(self) -> None:
        """Records a save: the next is an interval from now."""
        self._last = self._clock()
        self._saves += 1

    def describe(self) -> str:
        """The interval and where it comes from, for the job's log."""
        cost = self.cost
        if self.rate > 0 and cost > 0:
            return "every %.1f s (Daly: %.3f %%/h, a node's MTBF %.0f h; a checkpoint took %.3f s)" % (
                self.interval, self.rate, mtbf(self.rate) / 3600, cost)
        return "every %.1f s (fixed; checkpoint took %.3f s)" % (self.interval, cost)
