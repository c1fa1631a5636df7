"""The notice: the deadline, from the environment, files or a signal."""

import datetime as _dt
import json
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import Callable, List, Optional

ANNOTATION_DEADLINE = "sparecap.dev/preempt-deadline"
EXTRA_DEADLINE = "sparecap.dev/deadline"  # in a Slurm node's Extra field (JSON)
DEFAULT_ANNOTATIONS_FILE = "/etc/podinfo/annotations"


@dataclass(frozen=True)
class Notice:
    """The news that the node is being reclaimed."""

    deadline: _dt.datetime  # when the pod is killed at the latest (UTC)
    source: str  # "environment", "deadline-file", "annotation" or a signal name


def _parse(text: str) -> Optional[_dt.datetime]:
    text = text.strip()
    if not text:
        return None
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    # Python before 3.11 takes at most 6 fractional digits.
    if "." in text:
        head, rest = text.split(".", 1)
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        text = head + "." + digits[:6].ljust(6, "0") + rest
    try:
        t = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if t.tzinfo is None:
        return None
    return t.astimezone(_dt.timezone.utc)


def read_annotation(path: str) -> Optional[_dt.datetime]:
    """The deadline from a Downward API file of the pod's annotations
    (``key="value"`` lines), or from a file holding that one value."""
    return _annotation(path, ANNOTATION_DEADLINE)


def _annotation(path: str, name: str) -> Optional[_dt.datetime]:
    """Annotation ``name``'s time from a Downward API file of the pod's
    annotations; a file of one value is the deadline's alone."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key == name:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1].encode("utf-8").decode("unicode_escape")
            return _parse(value)
    if len(lines) == 1 and name == ANNOTATION_DEADLINE:
        return _parse(lines[0])
    return None


def _read_file(path: Optional[str]) -> Optional[_dt.datetime]:
    if not path or path == "-":
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return _parse(f.read())
    except OSError:
        return None


_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def slurm_deadline(show: str) -> Optional[_dt.datetime]:
    """The deadline in ``scontrol --oneliner show node`` output: the Extra
    field's JSON, key ``sparecap.dev/deadline``."""
    return _slurm_extra(show, EXTRA_DEADLINE)


def _slurm_extra(show: str, name: str) -> Optional[_dt.datetime]:
    """Key ``name``'s time in the Extra field's JSON of ``scontrol
    --oneliner show node`` output."""
    _, sep, extra = show.partition(" Extra=")
    if not sep:
        return None
    end = extra.rfind("}")
    if end >= 0:
        extra = extra[: end + 1]
    try:
        x = json.loads(extra)
    except ValueError:
        return None
    if not isinstance(x, dict):
        return None
    return _parse(str(x.get(name, "")))


def read_slurm_deadline() -> Optional[_dt.datetime]:
    """The deadline of the Slurm node the job runs on (SLURMD_NODENAME),
    from ``scontrol show node``; None outside Slurm or when it has none.
    It asks slurmctld, so it is read at a signal, not polled."""
    out = _show_node()
    return slurm_deadline(out) if out else None


def _show_node() -> str:
    """``scontrol --oneliner show node`` of the job's node; "" outside
    Slurm or when slurmctld does not answer."""
    node = os.environ.get("SLURMD_NODENAME", "")
    if not node:
        return ""
    try:
        return subprocess.run(["scontrol", "--oneliner", "show", "node", node],
                              capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def parse_duration(text: str) -> float:
    """Seconds in a Go duration such as "5m0s", "1h27m28s" or "250ms", as
    sparecap run writes SPARECAP_CHECKPOINT_INTERVAL and SPARECAP_GRACE.
    Raises ValueError on anything else (negative durations included)."""
    rest, total = text.strip(), 0.0
    if not rest:
        raise ValueError("empty duration")
    if rest == "0":
        return 0.0
    while rest:
        i = 0
        while i < len(rest) and (rest[i].isdigit() or rest[i] == "."):
            i += 1
        if i == 0:
            raise ValueError("bad duration %r" % text)
        number, rest = rest[:i], rest[i:]
        for unit in ("ns", "us", "\u00b5s", "ms", "s", "m", "h"):  # "ms" before "m"
            if rest.startswith(unit):
                total += float(number) * _UNITS[unit]
                rest = rest[len(unit):]
                break
        else:
            raise ValueError("bad duration %r: a unit (h, m, s, ms, us, ns) must follow %s" % (text, number))
    return total


def _grace() -> float:
    try:
        return parse_duration(os.environ.get("SPARECAP_GRACE", ""))
    except ValueError:
        return 30.0


def _signal_of(name: str) -> signal.Signals:
    name = (name or "USR1").upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    return getattr(signal, name, signal.SIGUSR1)


def deadline(
    annotations_file: Optional[str] = None, deadline_file: Optional[str] = None
) -> Optional[_dt.datetime]:
    """The deadline if it is known now, else None."""
    t = _parse(os.environ.get("SPARECAP_DEADLINE", ""))
    if t:
        return t
    t = _read_file(deadline_file or os.environ.get("SPARECAP_DEADLINE_FILE"))
    if t:
        return t
    path = annotations_file or os.environ.get("SPARECAP_ANNOTATIONS_FILE") or DEFAULT_ANNOTATIONS_FILE
    if path != "-":
        return read_annotation(path)
    return None


def on_notice(
    callback: Callable[[Notice], None],
    *,
    annotations_file: Optional[str] = None,
    deadline_file: Optional[str] = None,
    signals: Optional[List[signal.Signals]] = None,
    grace: Optional[float] = None,
    poll: float = 0.25,
) -> Callable[[], None]:
    """Call ``callback`` once, with the first notice: the deadline in the
    environment, the deadline file, the annotations file, or a signal
    (SIGTERM and the checkpoint signal, ``SPARECAP_CHECKPOINT_SIGNAL``, by
    default; then the files' deadline if known, else now plus the grace).

    The callback runs on a background thread. Signal handlers are installed
    here, so call this from the main thread. Returns a function that stops
    watching."""
    annotations = annotations_file or os.environ.get("SPARECAP_ANNOTATIONS_FILE") or DEFAULT_ANNOTATIONS_FILE
    dfile = deadline_file or os.environ.get("SPARECAP_DEADLINE_FILE") or "-"
    if signals is None:
        signals = [signal.SIGTERM, _signal_of(os.environ.get("SPARECAP_CHECKPOINT_SIGNAL", ""))]
    grace_s = _grace() if grace is None else grace
    stop = threading.Event()
    fired = threading.Lock()
    done = [False]

    def fire(n: Notice) -> None:
        with fired:
            if done[0] or stop.is_set():
                return
            done[0] = True
        stop.set()
        callback(n)

    def from_files(source_default: Optional[str] = None) -> Optional[Notice]:
        t = _read_file(dfile)
        if t:
            return Notice(t, source_default or "deadline-file")
        if annotations != "-":
            t = read_annotation(annotations)
            if t:
                return Notice(t, source_default or "annotation")
        return None

    previous = {}

    def handler(signum, _frame):
        n = from_files(signal.Signals(signum).name)
        if n is None:
            now = _dt.datetime.now(_dt.timezone.utc)
            # Under Slurm the node says the deadline.
            d = read_slurm_deadline() or now + _dt.timedelta(seconds=grace_s)
            n = Notice(d, signal.Signals(signum).name)
        threading.Thread(target=fire, args=(n,), daemon=True).start()

    for s in signals:
        previous[s] = signal.signal(s, handler)

    def watch() -> None:
        t = _parse(os.environ.get("SPARECAP_DEADLINE", ""))
        if t:
            fire(Notice(t, "environment"))
            return
        while not stop.is_set():
            n = from_files()
            if n:
                fire(n)
                return
            stop.wait(poll)

    threading.Thread(target=watch, daemon=True).start()

    def cancel() -> None:
        stop.set()
        for s, h in previous.items():
            signal.signal(s, h)

    return cancel


def seconds_left(d: _dt.datetime) -> float:
    """Seconds until the deadline d (negative once it passed)."""
    return (d - _dt.datetime.now(_dt.timezone.utc)).total_seconds()

