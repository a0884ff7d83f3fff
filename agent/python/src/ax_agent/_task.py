"""What a handler gets: the task, its cancellation token and its log."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

__all__ = ["Task", "TaskError", "CancellationToken", "Cancelled"]

_ERROR_CODE = re.compile(r"[a-z0-9_.\-]{1,64}")


def valid_error_code(code: str | None) -> bool:
    """The server's rule for an error code: 1 to 64 of a-z, 0-9, '_', '.', '-'."""
    return code is not None and _ERROR_CODE.fullmatch(code) is not None


class TaskError(Exception):
    """TaskError fails a task with its message and a machine-readable code.

    ``raise TaskError("quota exceeded", code="quota_exceeded")`` records the
    task as failed with error "quota exceeded" and error_code
    "quota_exceeded". A code the server would refuse (anything but 1 to 64
    of a-z, 0-9, '_', '.', '-') is dropped; the task still fails. Any other
    exception fails the task too, with its text and no code (or the value of
    an ``error_code`` attribute it carries).
    """

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.error_code = code


class Cancelled(Exception):
    """Cancelled is raised by CancellationToken.raise_if_cancelled."""


class CancellationToken:
    """CancellationToken says when a task must stop, from any thread.

    A sync handler polls ``cancelled`` or waits on ``wait(timeout)``; an
    async handler is also cancelled the asyncio way (CancelledError at its
    next await). ``reason`` is one of "server" (the run was cancelled),
    "timeout", "lease_lost" or "drain", once cancelled.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None
        self._callbacks: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """wait blocks up to timeout seconds and returns whether the task was cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled(f"task cancelled: {self.reason}")

    def on_cancel(self, fn: Callable[[str], None]) -> None:
        """on_cancel calls fn(reason) once the task is cancelled (at once if it is)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        fn(self.reason or "")

    def cancel(self, reason: str) -> bool:
        """cancel marks the token cancelled; only the first reason counts."""
        with self._lock:
            if self._event.is_set():
                return False
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(reason)
        return True


@dataclass
class Task:
    """Task is what a handler knows about the task it runs.

    Tasks run at least once: after a crash or a lost lease the same task may
    run again, so side effects that must happen once key on
    ``idempotency_key`` (the same for every attempt of this task).
    """

    task_id: str
    execution_id: str
    job_id: str
    job_name: str
    handler: str
    params: Any
    shard_index: int
    shard_total: int
    shard_param: str
    attempt: int
    max_attempts: int
    deadline: datetime
    scheduled_for: datetime
    lease_token: str
    traceparent: str
    timeout_seconds: int
    cancellation: CancellationToken = field(default_factory=CancellationToken, repr=False)
    _log: Callable[[str, str], None] = field(default=lambda stream, text: None, repr=False)

    @property
    def idempotency_key(self) -> str:
        """The execution id, followed by ":<shard_index>" when the run has several shards."""
        if self.shard_total > 1:
            return f"{self.execution_id}:{self.shard_index}"
        return self.execution_id

    @property
    def cancelled(self) -> bool:
        return self.cancellation.cancelled

    def log(self, text: str, stream: str = "stdout") -> None:
        """log ships text to the server as the task's output (stdout or stderr)."""
        if stream not in ("stdout", "stderr"):
            raise ValueError("stream is stdout or stderr")
        self._log(stream, text)
