"""When the node's notice is scheduled to come, hours or days ahead.

sparecap knows ahead of the capacity it will take back when a cluster is
booked or a machine goes to maintenance; the node and its pods then carry
the annotation ``sparecap.dev/preempt-at`` (RFC 3339), and a Slurm node the
same key in its Extra. It goes away if the booking moves elsewhere or is
cancelled. A job can checkpoint before then, or not start a step that would
not end by then.
"""

import datetime as _dt
import os
from typing import Optional

from .notice import DEFAULT_ANNOTATIONS_FILE, _annotation, _show_node, _slurm_extra

ANNOTATION_PREEMPT_AT = "sparecap.dev/preempt-at"


def slurm_scheduled(show: str) -> Optional[_dt.datetime]:
    """The scheduled notice in ``scontrol --oneliner show node`` output:
    the Extra field's JSON, key ``sparecap.dev/preempt-at``."""
    return _slurm_extra(show, ANNOTATION_PREEMPT_AT)


def scheduled(annotations_file: Optional[str] = None) -> Optional[_dt.datetime]:
    """When the node's notice is scheduled to come: from the pod's
    annotations file (default ``$SPARECAP_ANNOTATIONS_FILE``, else
    /etc/podinfo/annotations), or in a Slurm job from its node's Extra;
    None when none is scheduled."""
    path = annotations_file or os.environ.get("SPARECAP_ANNOTATIONS_FILE") or DEFAULT_ANNOTATIONS_FILE
    if path != "-":
        t = _annotation(path, ANNOTATION_PREEMPT_AT)
        if t is not None:
            return t
    out = _show_node()
    return slurm_scheduled(out) if out else None
