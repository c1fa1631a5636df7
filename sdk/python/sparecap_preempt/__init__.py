"""Jobs that survive preemption on sparecap (standard library only).

The deadline reaches a pod from three places, whichever comes first: the
pod annotation ``sparecap.dev/preempt-deadline`` (a Downward API volume
shows it as a file the kubelet refreshes), the environment and the file that
``sparecap run`` keeps (``SPARECAP_DEADLINE``, ``SPARECAP_DEADLINE_FILE``),
and SIGTERM (then the pod has its grace period). :func:`on_notice` calls you
once with the deadline.

Checkpoints are saved atomically in the layout the Go SDK uses
(``ckpt-<step>/`` with a ``MANIFEST.json`` of sizes and SHA-256 sums), so a
job killed mid-save resumes from the last complete one: :class:`Store`.
:class:`PodReporter` tells sparecap when the last one was committed (the
pod's ``sparecap.dev/last-checkpoint``), so a reclaim takes that node
before one whose work has run longer since its last checkpoint.

:func:`interval` picks the checkpoint interval from the preemption rate
(Young's sqrt(2*cost*mtbf), refined by Daly); :func:`advise` asks sparecap
for it, from the rate it measured. :class:`Schedule` says when a checkpoint
is due, from the rate ``sparecap run`` hands the job and the time the
store really took to save.

:mod:`sparecap_preempt.webhooks` verifies the signed notice webhooks
sparecap sends to schedulers outside the cluster (``webhooks.verify``,
``Dedup``).

:mod:`sparecap_preempt.api` is a client of sparecap's REST API, built from
its OpenAPI document: one method per operation (``Client``, ``APIError``).
"""

from .notice import (
    ANNOTATION_DEADLINE,
    DEFAULT_ANNOTATIONS_FILE,
    EXTRA_DEADLINE,
    Notice,
    deadline,
    on_notice,
    parse_duration,
    read_annotation,
    read_slurm_deadline,
    slurm_deadline,
)
from .checkpoint import Checkpoint, NoCheckpoint, Store
from .report import ANNOTATION_LAST_CHECKPOINT, ANNOTATION_PROGRESS, PodReporter, ReportError
from .interval import Advice, AdviceError, Expected, advise, checkpoint_interval, daly, expect, interval, mtbf, young
from .scheduled import ANNOTATION_PREEMPT_AT, scheduled, slurm_scheduled
from .schedule import ENV_PREEMPTION_RATE, Schedule, preemption_rate
from . import api, webhooks
from .webhooks import Dedup, WebhookVerificationError

__all__ = [
    "api",
    "ANNOTATION_DEADLINE",
    "ANNOTATION_LAST_CHECKPOINT",
    "ANNOTATION_PROGRESS",
    "PodReporter",
    "ReportError",
    "Advice",
    "AdviceError",
    "Expected",
    "DEFAULT_ANNOTATIONS_FILE",
    "EXTRA_DEADLINE",
    "Checkpoint",
    "Dedup",
    "NoCheckpoint",
    "Notice",
    "Store",
    "Schedule",
    "ENV_PREEMPTION_RATE",
    "preemption_rate",
    "WebhookVerificationError",
    "advise",
    "checkpoint_interval",
    "daly",
    "deadline",
    "expect",
    "interval",
    "mtbf",
    "on_notice",
    "parse_duration",
    "webhooks",
    "read_annotation",
    "read_slurm_deadline",
    "scheduled",
    "slurm_scheduled",
    "ANNOTATION_PREEMPT_AT",
    "slurm_deadline",
    "young",
]
