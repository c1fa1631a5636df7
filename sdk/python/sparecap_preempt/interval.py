"""The checkpoint interval from the preemption rate (seconds throughout)."""

import json
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Optional


def young(cost: float, mtbf: float) -> float:
    """Young's interval sqrt(2*cost*mtbf); 0 when either is not positive."""
    if cost <= 0 or mtbf <= 0:
        return 0.0
    return math.sqrt(2 * cost * mtbf)


def daly(cost: float, mtbf: float) -> float:
    """Daly's refinement of Young's interval:
    sqrt(2dM)*(1 + sqrt(d/2M)/3 + (d/2M)/9) - d for d < 2M, else M."""
    if cost <= 0 or mtbf <= 0:
        return 0.0
    if cost >= 2 * mtbf:
        return mtbf
    x = cost / (2 * mtbf)
    return math.sqrt(2 * cost * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - cost


def mtbf(rate_percent_per_hour: float) -> float:
    """Mean seconds between preemptions of a node at a rate of
    ``rate_percent_per_hour`` percent of nodes an hour; 0 if not positive."""
    if rate_percent_per_hour <= 0:
        return 0.0
    return 100.0 / rate_percent_per_hour * 3600.0


def interval(rate_percent_per_hour: float, cost: float) -> float:
    """Daly's interval for a preemption rate (percent an hour) and a
    checkpoint cost (seconds); 0 when either is unknown."""
    return daly(cost, mtbf(rate_percent_per_hour))


def checkpoint_interval(default: float) -> float:
    """The interval sparecap run hands the job (SPARECAP_CHECKPOINT_INTERVAL,
    from the measured preemption rate or its --interval), in seconds; else
    ``default``."""
    from .notice import parse_duration

    try:
        return parse_duration(os.environ.get("SPARECAP_CHECKPOINT_INTERVAL", "")) or default
    except ValueError:
        return default


@dataclass(frozen=True)
class Expected:
    overhead: float  # fraction of time lost to checkpoints and redone work
    lost_per_preemption: float  # seconds a preemption loses without a notice checkpoint


def expect(interval_s: float, cost: float, mtbf_s: float) -> Expected:
    """What an interval costs to first order: cost/interval spent saving,
    plus (interval+cost)/2 redone once every mtbf."""
    if interval_s <= 0:
        return Expected(0.0, 0.0)
    lost = (interval_s + cost) / 2
    overhead = cost / interval_s
    if mtbf_s > 0:
        overhead += lost / mtbf_s
    return Expected(overhead, lost)


@dataclass(frozen=True)
class Advice:
    interval: float  # seconds; 0 when the server had no rate (basis "none")
    rate_percent_per_hour: float
    rate_basis: str  # "measured", "upper_bound" or "none"
    formula: str
    overhead: float  # fraction
    lost_per_preemption: float  # seconds


class AdviceError(Exception):
    """The API could not be reached or refused."""


def advise(
    region: str,
    gpu_type: str,
    cost: float,
    url: Optional[str] = None,
    token: Optional[str] = None,
    timeout: float = 5.0,
) -> Advice:
    """Ask sparecap (``SPARECAP_URL``, ``SPARECAP_TOKEN``) for the checkpoint
    interval of a job in ``region`` on ``gpu_type`` whose checkpoints take
    ``cost`` seconds. Raises :class:`AdviceError`; fall back to
    :func:`interval` or a fixed value then."""
    url = url or os.environ.get("SPARECAP_URL", "")
    token = token or os.environ.get("SPARECAP_TOKEN", "")
    if not url:
        raise AdviceError("no API address (SPARECAP_URL)")
    q = urllib.parse.urlencode({"region": region, "gpu_type": gpu_type, "checkpoint_seconds": repr(float(cost))})
    req = urllib.request.Request(url.rstrip("/") + "/v1/advice/checkpoint?" + q, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as e:
        try:
            msg = json.load(e)["error"]["message"]
        except Exception:  # noqa: BLE001 - any unreadable body
            msg = e.reason
        raise AdviceError("checkpoint advice: %d: %s" % (e.code, msg)) from None
    except (OSError, ValueError) as e:
        raise AdviceError("checkpoint advice: %s" % e) from None
    return Advice(
        interval=float(body["recommended_interval_seconds"]),
        rate_percent_per_hour=float(body["preemption_rate_percent_per_hour"]),
        rate_basis=str(body["rate_basis"]),
        formula=str(body["formula"]),
        overhead=float(body["expected_overhead_percent"]) / 100,
        lost_per_preemption=float(body["expected_lost_seconds_per_preemption"]),
    )
