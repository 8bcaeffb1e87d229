"""The write lock of one run folder (`<run>/LOCK`), so two processes never write one run.

It needs no torch: a process that only holds or inspects a lock (a test's stand-in for another
trainer, a monitor) starts in a tenth of a second, not the 2-3 s of importing torch.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import filelock

from nblib.cli import UserError
from nblib.store.atomic import atomic_write_text


class RunLockedError(UserError, RuntimeError):
    """Another process holds the write lock of this run."""


class RunLock:
    """An exclusive lock on `<run>/LOCK`, so two processes never write one run.

    The lock is `filelock`'s flock on the file, opened with O_NOFOLLOW: a symlink planted
    at LOCK is refused, never followed. The holder's pid goes to `<run>/LOCK.owner`
    (written atomically, by rename), so a refused writer can say who holds the run.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = filelock.FileLock(str(self.path), mode=0o644, thread_local=False)

    @property
    def owner_path(self) -> Path:
        return self.path.with_name(self.path.name + ".owner")

    def holder(self) -> str:
        """Who holds the lock: 'pid P on HOST since TIME' (what the holder wrote), or '?'."""
        try:
            info = json.loads(self.owner_path.read_text())
            return f"pid {info['pid']} on {info['host']} since {info['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "an unknown process"

    def acquire(self, blocking: bool = False, timeout: float | None = None, poll: float = 0.5) -> None:
        """Take the lock. Not blocking: raise RunLockedError at once if another process holds
        it. Blocking: wait (saying so once on stderr) up to `timeout` seconds, or forever."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_symlink():
            raise RunLockedError(f"{self.path} is a symbolic link; a run's LOCK must be a plain file "
                                 f"(remove the link)")
        try:
            self._lock.acquire(timeout=0, poll_interval=poll)
        except filelock.Timeout:
            if not blocking:
                raise self._locked_error() from None
            print(f"[nblib] run {self.path.parent.name} is being written by {self.holder()}; waiting for it "
                  f"to finish" + (f" (up to {timeout:g} s)" if timeout is not None else "") + " ...",
                  file=sys.stderr, flush=True)
            try:
                self._lock.acquire(timeout=-1 if timeout is None else timeout, poll_interval=poll)
            except filelock.Timeout:
                raise self._locked_error() from None
        atomic_write_text(self.owner_path, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                                       "since": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n")

    def _locked_error(self) -> "RunLockedError":
        return RunLockedError(f"run {self.path.parent.name} is being written by {self.holder()}; "
                              f"wait for it or stop it")

    def release(self) -> None:
        if self._lock.is_locked:
            self.owner_path.unlink(missing_ok=True)
            self._lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
