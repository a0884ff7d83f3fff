"""Jobs declared in code, next to their handlers (POST /v1/declarations)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = ["JobSpec", "RetryPolicy"]


@dataclass
class RetryPolicy:
    """RetryPolicy: max_attempts counts the first; backoff doubles up to max_backoff (seconds)."""

    max_attempts: int = 0
    backoff_seconds: float = 0
    max_backoff_seconds: float = 0


@dataclass
class JobSpec:
    """JobSpec declares a job that runs one of the program's handlers.

    The agent declares its jobs once registered, all in one call: they are
    created or updated to match, the set's jobs no longer declared are
    paused, and a declaration older than the set's version is refused (so
    two builds running side by side do not undo each other). One trigger at
    most: ``cron`` (with ``timezone``, default UTC), ``every_seconds`` or
    ``at``; none makes a job fired only through the API. ``labels`` None
    means the agent's own labels.
    """

    name: str
    group: str = ""
    owner: str = ""
    description: str = ""
    handler: str = ""
    cron: str = ""
    timezone: str = ""
    every_seconds: float = 0
    at: datetime | None = None
    shards: int = 0
    shard_params: list[str] | None = None
    timeout_seconds: float = 0
    retry: RetryPolicy | None = None
    priority: int = 0
    route: str = ""
    route_key: str = ""
    rate_class: str = ""
    callback: str = ""
    labels: dict[str, str] | None = None
    params: dict[str, Any] | None = None
    concurrency: str = ""

    def check(self, index: int) -> list[str]:
        """check returns what is wrong with the spec before any call."""
        errs = []
        if not self.name.strip():
            errs.append(f"jobs[{index}]: no name")
        if sum(bool(x) for x in (self.cron, self.every_seconds, self.at)) > 1:
            errs.append(f"jobs[{index}] ({self.name}): give one of cron, every_seconds, at")
        for v in (self.every_seconds, self.timeout_seconds):
            if v < 0 or v != int(v):
                errs.append(f"jobs[{index}] ({self.name}): durations are whole seconds, not {v}")
        return errs

    def to_wire(self, agent_labels: dict[str, str]) -> dict[str, Any]:
        """to_wire is the job as POST /v1/jobs takes it."""
        out: dict[str, Any] = {"name": self.name, "executor": {"kind": "handler", "handler": self.handler or self.name}}
        _put(out, "group", self.group)
        _put(out, "owner", self.owner)
        _put(out, "description", self.description)
        if self.cron:
            out["trigger"] = {"kind": "cron", "cron": self.cron, "timezone": self.timezone or "UTC"}
        elif self.every_seconds:
            out["trigger"] = {"kind": "interval", "interval_seconds": _seconds(self.every_seconds)}
        elif self.at is not None:
            at = self.at if self.at.tzinfo else self.at.replace(tzinfo=timezone.utc)
            out["trigger"] = {"kind": "delay", "run_at": at.astimezone(timezone.utc).isoformat()}
        else:
            out["trigger"] = {"kind": "manual"}
        if self.shards or self.shard_params:
            shards: dict[str, Any] = {"count": max(self.shards, 1)}
            if self.shard_params:
                shards["params"] = list(self.shard_params)
            out["shards"] = shards
        _put(out, "timeout_seconds", _seconds(self.timeout_seconds))
        if self.retry is not None:
            retry: dict[str, Any] = {}
            _put(retry, "max_attempts", self.retry.max_attempts)
            _put(retry, "backoff_seconds", _seconds(self.retry.backoff_seconds))
            _put(retry, "backoff_max_seconds", _seconds(self.retry.max_backoff_seconds))
            out["retry"] = retry
        _put(out, "priority", self.priority)
        if self.route or self.route_key:
            route: dict[str, Any] = {}
            _put(route, "strategy", self.route)
            _put(route, "key", self.route_key)
            out["route"] = route
        _put(out, "rate_limit_class", self.rate_class)
        _put(out, "concurrency_policy", self.concurrency)
        if self.callback:
            out["callback"] = {"url": self.callback}
        labels = agent_labels if self.labels is None else self.labels
        if labels:
            out["target"] = {"labels": dict(labels)}
        if self.params is not None:
            out["params"] = self.params
        return out


def _seconds(v: float) -> int:
    return int(math.ceil(v))


def _put(m: dict[str, Any], key: str, value: Any) -> None:
    if value:
        m[key] = value
