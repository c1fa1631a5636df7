"""Atomic checkpoints in a directory, in the Go SDK's layout.

Each checkpoint is a directory ``ckpt-<step, 16 digits>`` holding the job's
files and a ``MANIFEST.json`` (step, time, files with size and SHA-256,
cost_ns). It is written under a temporary name, every file and the
directory are fsynced, and only then is it renamed into place, so a
process killed mid-save leaves nothing that looks complete. Go's
``preempt.Store`` and this one read each other's checkpoints.
"""

import datetime as _dt
import hashlib
import json
import os
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional

MANIFEST_NAME = "MANIFEST.json"


class NoCheckpoint(Exception):
    """There is no complete checkpoint."""


@dataclass(frozen=True)
class File:
    name: str  # path relative to the checkpoint, with "/" separators
    size: int
    sha256: str


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint."""

    dir: str
    step: int
    time: _dt.datetime
    files: List[File] = field(default_factory=list)
    cost: float = 0.0  # seconds the save took


def _dir_name(step: int) -> str:
    return "ckpt-%016d" % step


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _hash(path: str, sync: bool) -> "tuple[str, int]":
    h = hashlib.sha256()
    size = 0
    with open(path, "rb+" if sync else "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
        if sync:
            os.fsync(f.fileno())
    return h.hexdigest(), size


def _format_time(t: _dt.datetime) -> str:
    # RFC 3339 with a Z, as Go writes time.Time.
    return t.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Store:
    """Checkpoints in ``directory`` (created if needed); one writer, any
    number of readers. ``keep`` complete checkpoints are left after each
    save. ``verify_checksums`` makes :meth:`latest` read every file and
    check its SHA-256; by default it checks sizes."""

    def __init__(self, directory: Optional[str] = None, keep: int = 3, verify_checksums: bool = False):
        directory = directory or os.environ.get("SPARECAP_CHECKPOINT_DIR", "")
        if not directory:
            raise ValueError("checkpoint directory not set (SPARECAP_CHECKPOINT_DIR)")
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        self.keep = keep if keep > 0 else 3
        self.verify_checksums = verify_checksums
        self._cost = 0.0
        self._lock = threading.Lock()

    def save(self, step: int, write: Callable[[str], None]) -> Checkpoint:
        """Save a checkpoint of ``step``: ``write(tmpdir)`` puts the job's
        files in ``tmpdir``; then every file is fsynced, the manifest is
        written, the directory is fsynced and renamed into place, and the
        store's directory is fsynced. Returns the checkpoint; its cost is
        the whole save's duration."""
        if step < 0:
            raise ValueError("step must not be negative")
        start = time.monotonic()
        self._clean_temp()
        tag = secrets.token_hex(6)
        tmp = os.path.join(self.dir, ".tmp-" + _dir_name(step) + "-" + tag)
        os.mkdir(tmp)
        try:
            write(tmp)
            files = []
            for root, dirs, names in os.walk(tmp):
                dirs.sort()
                for name in sorted(names):
                    path = os.path.join(root, name)
                    rel = os.path.relpath(path, tmp).replace(os.sep, "/")
                    if rel == MANIFEST_NAME:
                        raise ValueError("a checkpoint file may not be called " + MANIFEST_NAME)
                    sha, size = _hash(path, sync=True)
                    files.append(File(rel, size, sha))
                if root != tmp:
                    _fsync_path(root)
            # In the order Go's filepath.WalkDir lists them.
            files.sort(key=lambda f: f.name.split("/"))
            now = _dt.datetime.now(_dt.timezone.utc)
            cost = time.monotonic() - start
            manifest = {
                "step": step,
                "time": _format_time(now),
                "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in files],
                "cost_ns": int(cost * 1e9),
            }
            with open(os.path.join(tmp, MANIFEST_NAME), "x", encoding="utf-8") as f:
                json.dump(manifest, f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            _fsync_path(tmp)
            final = os.path.join(self.dir, _dir_name(step))
            old = None
            if os.path.exists(final):
                # The same step again (a resumed job saved it): moved aside
                # first, as a rename does not replace a directory.
                old = final + ".old-" + tag
                os.rename(final, old)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_path(self.dir)
        if old:
            shutil.rmtree(old, ignore_errors=True)
        cost = time.monotonic() - start
        with self._lock:
            self._cost = cost
        self._prune()
        return Checkpoint(final, step, now, files, cost)

    def cost(self) -> float:
        """Seconds the last save took (the checkpoint cost of the interval
        formulas); before any save, the cost in the latest manifest, or 0."""
        with self._lock:
            if self._cost > 0:
                return self._cost
        try:
            return self.latest().cost
        except NoCheckpoint:
            return 0.0

    def latest(self) -> Checkpoint:
        """The newest complete checkpoint; torn or corrupt ones are
        skipped. Raises :class:`NoCheckpoint` if there is none."""
        for d in reversed(self._candidates()):
            try:
                return self._check(d)
            except (OSError, ValueError, KeyError, TypeError):
                continue
        raise NoCheckpoint("no complete checkpoint in " + self.dir)

    def all(self) -> List[Checkpoint]:
        """The complete checkpoints, oldest first."""
        out = []
        for d in self._candidates():
            try:
                out.append(self._check(d))
            except (OSError, ValueError, KeyError, TypeError):
                pass
        return out

    def _candidates(self) -> List[str]:
        out = []
        for name in os.listdir(self.dir):
            if not name.startswith("ckpt-") or ".old-" in name:
                continue
            digits = name[len("ckpt-"):]
            if digits.isdigit() and os.path.isdir(os.path.join(self.dir, name)):
                out.append(name)
        out.sort()  # zero-padded steps sort as numbers
        return [os.path.join(self.dir, n) for n in out]

    def _check(self, d: str) -> Checkpoint:
        with open(os.path.join(d, MANIFEST_NAME), encoding="utf-8") as f:
            m = json.load(f)
        step = int(m["step"])
        if os.path.basename(d) != _dir_name(step):
            raise ValueError("%s: manifest of step %d" % (d, step))
        files = []
        for e in m.get("files") or []:
            fl = File(str(e["name"]), int(e["size"]), str(e["sha256"]))
            path = os.path.join(d, *fl.name.split("/"))
            if os.path.getsize(path) != fl.size:
                raise ValueError("%s: size does not match the manifest" % path)
            if self.verify_checksums and _hash(path, sync=False)[0] != fl.sha256:
                raise ValueError("%s: checksum does not match the manifest" % path)
            files.append(fl)
        from .notice import _parse  # the same RFC 3339 reader

        t = _parse(str(m.get("time", ""))) or _dt.datetime.fromtimestamp(0, _dt.timezone.utc)
        return Checkpoint(d, step, t, files, int(m.get("cost_ns", 0)) / 1e9)

    def _prune(self) -> None:
        good = self.all()
        while len(good) > self.keep:
            shutil.rmtree(good[0].dir, ignore_errors=True)
            good = good[1:]

    def _clean_temp(self) -> None:
        for name in os.listdir(self.dir):
            if name.startswith(".tmp-") or ".old-" in name:
                shutil.rmtree(os.path.join(self.dir, name), ignore_errors=True)
