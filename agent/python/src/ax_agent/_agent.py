"""The agent: registers, long-polls leases, runs handlers, heartbeats, reports, drains."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Callable, Iterable, TypeVar, Union

from ._http import Client, StatusError
from ._jobs import JobSpec
from ._task import Task, TaskError, valid_error_code

__all__ = ["Agent", "Handler"]

Handler = Callable[[Task], Union[Any, Awaitable[Any]]]
H = TypeVar("H", bound=Handler)

# Batching of results and logs: the server records a batch in one
# statement, so a few milliseconds of waiting for company pay off under
# load; a lone result still leaves after RESULT_FLUSH_DELAY. A batch is
# also bounded by its size: the server takes 8 MiB a request, and refuses
# a larger one before reading it (RESULT_BATCH_BYTES leaves room for
# JSON's escapes).
RESULT_BATCH_MAX = 1000
RESULT_BATCH_BYTES = 4 << 20
RESULT_FLUSH_DELAY = 0.005
LOG_FLUSH_DELAY = 0.05
LOG_BATCH_MAX = 1000
LOG_BATCH_BYTES = 512 << 10
MAX_CHUNK_CHARS = 256 << 10
# The server takes errors up to 65,536 characters and results up to 1 MiB.
MAX_ERROR_CHARS = 60 << 10
MAX_RESULT_BYTES = 1 << 20
MAX_LEASE_PER_CALL = 1000
# How long a drain waits for the lease call under way before cutting it.
POLL_CUT = 2.0


@dataclass
class _Held:
    """A task whose lease the agent holds: running, or its result not yet reported."""

    task: Task
    lease_expires: float  # time.monotonic() when the lease ends unless renewed
    is_async: bool
    aio: asyncio.Task[None] | None = None
    executing: bool = True
    reported: bool = False  # its result is queued to be reported
    timer: asyncio.TimerHandle | None = None

    def ref(self) -> dict[str, str]:
        return {"task_id": self.task.task_id, "lease_token": self.task.lease_token}


class Agent:
    """Agent runs Python functions as ax tasks of executor kind handler.

    Register handlers with the ``handler`` decorator, then call ``run()``
    (blocking; SIGTERM or SIGINT drains) or ``await run_async(stop)``::

        agent = Agent("http://127.0.0.1:8080", key, labels={"pool": "py"})

        @agent.handler("reports.nightly")
        async def nightly(task: Task) -> dict:
            return await build_report(task.params, key=task.idempotency_key)

        agent.run()

    ``capacity`` tasks run at once. Sync handlers run in a thread pool of
    that size and watch ``task.cancellation``; async handlers run on the
    event loop and are also cancelled with CancelledError. On drain the
    agent stops leasing, tells the server, lets running tasks finish for
    ``drain_grace`` seconds, cancels the rest and hands their leases back
    (another agent runs them at once), reports what finished and
    deregisters.
    """

    def __init__(
        self,
        url: str,
        key: str,
        *,
        name: str | None = None,
        labels: dict[str, str] | None = None,
        capacity: int = 4,
        weight: int = 0,
        version: str = "",
        drain_grace: float = 90.0,
        lease_wait: float = 25.0,
        heartbeat_interval: float | None = None,
        jobs: Iterable[JobSpec] = (),
        job_set: str | None = None,
        declare_key: str | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        errs = []
        if not key:
            errs.append("no key: an API key with scope agent is needed to register")
        if not 1 <= capacity <= 10000:
            errs.append(f"capacity {capacity} is outside 1..10000")
        if not 0 <= weight <= 1000:
            errs.append(f"weight {weight} is outside 1..1000")
        if not 0 <= lease_wait <= 25:
            errs.append(f"lease_wait {lease_wait} is outside 0..25 seconds")
        if drain_grace < 0:
            errs.append("drain_grace is negative")
        if any(not k for k in (labels or {})):
            errs.append("a label has an empty name")
        self._jobs = list(jobs)
        for i, j in enumerate(self._jobs):
            errs.extend(j.check(i))
        if errs:
            raise ValueError("invalid agent config: " + "; ".join(errs))
        self._client = Client(url)
        # Long polls go through a client of their own: a drain cuts the one
        # under way short instead of waiting up to lease_wait for it.
        self._poll_client = Client(url)
        self._key = key
        self._name = name or socket.gethostname() or "ax-agent"
        self._labels = dict(labels or {})
        self._capacity = capacity
        self._weight = weight
        self._version = version
        self._drain_grace = drain_grace
        self._lease_wait = int(lease_wait)
        self._heartbeat_override = heartbeat_interval
        self._job_set = job_set or "sdk:" + os.path.basename(sys.argv[0] or "agent")
        self._declare_key = declare_key or key
        self._log = logger or logging.getLogger("ax_agent")
        self._handlers: dict[str, Handler] = {}
        self._held: dict[str, _Held] = {}
        self._pending_results: list[dict[str, Any]] = []
        self._log_chunks: list[dict[str, str]] = []
        self._log_lock = threading.Lock()
        self._started = False
        # Set in run_async, on the loop.
        self._agent_id = ""
        self._token = ""
        self._lease_seconds = 30
        self._heartbeat_seconds = 5.0
        self._paused = False

    # Public API -------------------------------------------------------

    def handler(self, name: str) -> Callable[[H], H]:
        """handler registers the decorated function for tasks naming handler ``name``.

        The function takes the Task and returns a JSON-able result (or None);
        it may be ``async``. Raising fails the task (TaskError carries a code).
        """
        if not name:
            raise ValueError("a handler needs a name")

        def register(fn: H) -> H:
            if name in self._handlers:
                raise ValueError(f"handler {name!r} registered twice")
            self._handlers[name] = fn
            return fn

        return register

    def run(self) -> None:
        """run registers and runs tasks until SIGTERM or SIGINT, then drains and returns.

        A second signal cuts the drain grace short.
        """
        asyncio.run(self._run_with_signals())

    def end_grace(self) -> None:
        """end_grace stops waiting for running tasks once draining: they are cancelled and handed back."""
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.call_soon_threadsafe(self._grace_over.set)

    async def run_async(self, stop: asyncio.Event) -> None:
        """run_async registers, runs tasks until ``stop`` is set, then drains and returns.

        It raises only when the agent could not register at all (a wrong
        key or URL); once registered, it rides out server outages.
        """
        if self._started:
            raise RuntimeError("agent: run called twice")
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._grace_over = asyncio.Event()
        self._wake = asyncio.Event()
        self._results_ready = asyncio.Event()
        self._logs_ready = asyncio.Event()
        self._logs_send = asyncio.Lock()
        self._stopping = False
        self._http_pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="ax-http")
        self._handler_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._capacity, thread_name_prefix="ax-handler"
        )
        try:
            await self._main(stop)
        finally:
            self._http_pool.shutdown(wait=False, cancel_futures=True)
            self._handler_pool.shutdown(wait=False, cancel_futures=True)

    # Life --------------------------------------------------------------

    async def _run_with_signals(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set():
                self.end_grace()
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        try:
            await self.run_async(stop)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    async def _main(self, stop: asyncio.Event) -> None:
        if not await self._register(stop):
            return
        # Heard from (and ready) before it asks for work: a server answers an
        # agent it has not heard from at once with nothing.
        await self._heartbeat()
        background = [
            asyncio.create_task(self._heartbeat_loop()),
            asyncio.create_task(self._report_loop()),
            asyncio.create_task(self._log_loop()),
        ]
        declared = asyncio.create_task(self._declare_jobs()) if self._jobs else None
        inflight = await self._lease_loop(stop)
        handback = asyncio.create_task(self._hand_back_inflight(inflight))
        announce = asyncio.create_task(self._announce_drain())
        await self._drain()
        await handback
        await announce
        for t in background[:1]:  # no heartbeat may bring the agent back after its goodbye
            t.cancel()
        await self._deregister()
        for t in background[1:] + ([declared] if declared else []):
            t.cancel()
        await asyncio.gather(*background, *([declared] if declared else []), return_exceptions=True)

    async def _call(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                    timeout: float | None = None, client: Client | None = None) -> Any:
        fn = functools.partial((client or self._client).call, method, path, token or self._token, body, timeout)
        return await self._loop.run_in_executor(self._http_pool, fn)

    async def _agent_call(self, op: str, body: Any = None, timeout: float | None = None,
                          client: Client | None = None) -> Any:
        """_agent_call calls /v1/agents/{id}/op; a 401 (the server forgot the agent) registers again."""
        try:
            return await self._call("POST", f"/v1/agents/{self._agent_id}/{op}", body, timeout=timeout, client=client)
        except StatusError as e:
            if e.status != 401 or self._stopping:
                raise
            self._log.warning("the server refused the agent's token: registering again", extra={"agent_id": self._agent_id})
            await self._register(None)
            raise

    async def _register(self, stop: asyncio.Event | None) -> bool:
        body: dict[str, Any] = {
            "name": self._name,
            "labels": self._labels,
            "capacity": self._capacity,
            "executors": ["handler"],
            "version": self._version,
            "host_name": socket.gethostname()[:255],
        }
        if self._weight:
            body["weight"] = self._weight
        attempt = 0
        while True:
            try:
                creds = await self._call("POST", "/v1/agents/register", body, token=self._key)
                break
            except StatusError as e:
                if not e.temporary:
                    raise
                err: Exception = e
            except OSError as e:
                err = e
            attempt += 1
            self._log.warning("error registering; retrying: %s", err)
            if stop is not None and stop.is_set():
                return False
            await asyncio.sleep(_backoff(attempt))
        self._agent_id = creds["agent_id"]
        self._token = creds["token"]
        self._lease_seconds = int(creds.get("lease_seconds") or 30)
        self._heartbeat_seconds = float(self._heartbeat_override or creds.get("heartbeat_interval_seconds") or 5)
        self._log.info("agent registered", extra={"agent_id": self._agent_id, "capacity": self._capacity})
        return True

    # Leasing -------------------------------------------------------------

    def _executing(self) -> int:
        return sum(1 for h in self._held.values() if h.executing)

    async def _lease_loop(self, stop: asyncio.Event) -> asyncio.Task[Any] | None:
        """_lease_loop leases while there is room, until stop; it returns a lease call still under way."""
        stopped = asyncio.create_task(stop.wait())
        failures = empties = 0
        try:
            while not stop.is_set():
                free = self._capacity - self._executing()
                if free <= 0 or self._paused:
                    self._wake.clear()
                    waker = asyncio.create_task(self._wake.wait())
                    await asyncio.wait({waker, stopped}, return_when=asyncio.FIRST_COMPLETED)
                    waker.cancel()
                    continue
                began = time.monotonic()
                body = {"max": min(free, MAX_LEASE_PER_CALL), "wait_seconds": self._lease_wait}
                call = asyncio.create_task(self._agent_call("lease", body, timeout=self._lease_wait + 30,
                                                            client=self._poll_client))
                await asyncio.wait({call, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not call.done():
                    # Draining: a poll of a busy agent is answered at once,
                    # and what it brings is handed back (another agent runs
                    # it now); an idle agent's poll is cut short after
                    # POLL_CUT seconds rather than left to run out.
                    self._loop.call_later(POLL_CUT, self._poll_client.abort)
                    return call
                try:
                    tasks = call.result().get("tasks") or []
                except (OSError, StatusError) as e:
                    failures += 1
                    self._log.error("error leasing tasks: %s", e)
                    await _sleep_or(stop, _backoff(failures))
                    continue
                failures = 0
                if not tasks and time.monotonic() - began < self._lease_wait / 2:
                    # The server answered at once with nothing, as it does for an
                    # agent it does not hold active: do not spin on it.
                    empties += 1
                    await _sleep_or(stop, _backoff(empties))
                    continue
                empties = 0
                self._start_all(tasks, free)
            return None
        finally:
            stopped.cancel()

    async def _hand_back_inflight(self, call: asyncio.Task[Any] | None) -> None:
        """A lease call under way when the drain began: what it brings is handed back unstarted."""
        if call is None:
            return
        try:
            tasks = (await call).get("tasks") or []
        except (OSError, StatusError):
            return
        await self._release([{"task_id": t["task_id"], "lease_token": t["lease_token"]} for t in tasks], "agent is draining")

    def _start_all(self, tasks: list[dict[str, Any]], free: int) -> None:
        if len(tasks) > free:  # the server handed out more than asked: hand the extra back
            extra = [{"task_id": t["task_id"], "lease_token": t["lease_token"]} for t in tasks[free:]]
            asyncio.create_task(self._release(extra, "over capacity"))
            tasks = tasks[:free]
        expires = time.monotonic() + self._lease_seconds
        for raw in tasks:
            self._start(raw, expires)

    def _start(self, raw: dict[str, Any], expires: float) -> None:
        ex = raw.get("executor") or {}
        task = Task(
            task_id=raw["task_id"], execution_id=raw["execution_id"], job_id=raw["job_id"],
            job_name=raw.get("job_name", ""), handler=ex.get("handler") or "", params=raw.get("params"),
            shard_index=raw.get("shard_index", 0), shard_total=raw.get("shard_total", 1),
            shard_param=raw.get("shard_param", ""), attempt=raw.get("attempt", 1),
            max_attempts=raw.get("max_attempts", 1), deadline=_parse_time(raw.get("deadline")),
            scheduled_for=_parse_time(raw.get("scheduled_for")), lease_token=raw["lease_token"],
            traceparent=raw.get("traceparent", ""), timeout_seconds=raw.get("timeout_seconds", 0),
        )
        task._log = functools.partial(self._queue_log, task)
        fn = self._handlers.get(task.handler)
        held = _Held(task=task, lease_expires=expires, is_async=fn is not None and inspect.iscoroutinefunction(fn))
        self._held[task.task_id] = held
        if task.timeout_seconds > 0:
            held.timer = self._loop.call_later(task.timeout_seconds, self._cancel, held, "timeout")
        held.aio = asyncio.create_task(self._run_task(held, fn))

    def _cancel(self, held: _Held, reason: str) -> None:
        """_cancel tells a running handler to stop: the token always, the asyncio task for async handlers."""
        if held.executing and held.task.cancellation.cancel(reason) and held.is_async and held.aio is not None:
            held.aio.cancel(f"task cancelled: {reason}")

    # Running -------------------------------------------------------------

    def _task_extra(self, t: Task) -> dict[str, Any]:
        return {"execution_id": t.execution_id, "task_id": t.task_id, "job_id": t.job_id, "shard_index": t.shard_index}

    async def _run_task(self, held: _Held, fn: Handler | None) -> None:
        t = held.task
        result: Any = None
        error: BaseException | None = None
        try:
            if fn is None:
                raise TaskError(f"no handler {t.handler!r} in this agent", code="unknown_handler")
            if held.is_async:
                result = await fn(t)  # type: ignore[misc]
            else:
                result = await self._loop.run_in_executor(self._handler_pool, fn, t)
        except asyncio.CancelledError as e:
            if not t.cancellation.cancelled:  # not ours: the loop is shutting down
                raise
            error = e
        except Exception as e:  # a handler's failure is the task's, not the agent's
            error = e
        finally:
            if held.timer is not None:
                held.timer.cancel()
        reason = t.cancellation.reason
        report = self._outcome(t, result, error)
        # A handler that ended with success as the drain stopped it did its
        # work: it is reported, not handed back (another agent would run it
        # again). Lost leases are never reported.
        if reason == "lease_lost" or (reason == "drain" and report["state"] != "succeeded"):
            held.executing = False  # _lose or _drain forgets its lease
            self._wake.set()
            self._log.warning("task stopped and not reported", extra={**self._task_extra(t), "reason": reason})
            return
        await self._flush_logs_of(t)
        held.executing = False
        self._wake.set()
        if self._held.get(t.task_id) is not held:  # the lease was lost or handed back meanwhile
            return
        held.reported = True
        self._pending_results.append(report)
        self._results_ready.set()

    def _outcome(self, t: Task, result: Any, error: BaseException | None) -> dict[str, Any]:
        r: dict[str, Any] = {"task_id": t.task_id, "lease_token": t.lease_token, "state": "succeeded"}
        reason = t.cancellation.reason
        if error is None:
            try:
                encoded = json.dumps(result, allow_nan=False)
            except (TypeError, ValueError) as e:
                r.update(state="failed", error=f"the handler's result is not JSON: {e}", error_code="result_not_json")
                return r
            if len(encoded.encode()) > MAX_RESULT_BYTES:
                r.update(state="failed", error=f"result is more than {MAX_RESULT_BYTES} bytes",
                         error_code="result_too_large")
                return r
            if result is not None:
                r["result"] = result
            return r
        text = str(error) or type(error).__name__
        if reason == "server":
            r.update(state="cancelled", error="cancelled by the server: " + text)
        elif reason == "timeout":
            r.update(state="timed_out", error=f"timed out after {t.timeout_seconds} s: {text}", error_code="timeout")
        else:
            r.update(state="failed", error=text)
            code = getattr(error, "error_code", None)
            if isinstance(code, str) and valid_error_code(code):
                r["error_code"] = code
        r["error"] = _storable(r["error"])[:MAX_ERROR_CHARS]
        return r

    # Heartbeats ----------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        # The first heartbeat went before leasing began. The interval runs
        # from when a heartbeat was sent: a slow answer does not push the
        # next one back.
        sent = time.monotonic()
        while True:
            await asyncio.sleep(max(self._heartbeat_seconds - (time.monotonic() - sent), 0))
            sent = time.monotonic()
            await self._heartbeat()

    async def _heartbeat(self) -> None:
        """_heartbeat renews every held lease in one call and acts on the answer."""
        now = time.monotonic()
        for held in [h for h in self._held.values() if h.lease_expires < now]:
            self._lose(held, "lease expired without renewal")
        helds = list(self._held.values())
        body: dict[str, Any] = {"tasks": [h.ref() for h in helds], "running": self._executing(), "ready": True}
        load = _load1()
        if load is not None:
            body["load1"] = load
        try:
            reply = await self._agent_call("heartbeat", body, timeout=min(3 * self._heartbeat_seconds, self._lease_seconds))
        except (OSError, StatusError) as e:
            self._log.warning("heartbeat failed: %s", e)
            return
        renewed = set(reply.get("renewed") or [])
        for h in helds:
            if h.task.task_id in renewed:
                h.lease_expires = now + self._lease_seconds
        for task_id in reply.get("lost") or []:
            if (held := self._held.get(task_id)) is not None:
                self._lose(held, "lease lost")
        for task_id in reply.get("cancel") or []:
            if (held := self._held.get(task_id)) is not None:
                self._log.info("server cancelled the task: stopping it", extra=self._task_extra(held.task))
                self._cancel(held, "server")
        paused = reply.get("state") == "draining"
        if paused != self._paused:
            self._paused = paused
            self._wake.set()

    def _lose(self, held: _Held, why: str) -> None:
        self._log.warning("%s: stopping the task, its result will not be reported", why, extra=self._task_extra(held.task))
        self._held.pop(held.task.task_id, None)
        self._cancel(held, "lease_lost")

    # Results -------------------------------------------------------------

    async def _report_loop(self) -> None:
        while True:
            await self._results_ready.wait()
            self._results_ready.clear()
            if len(self._pending_results) < RESULT_BATCH_MAX:
                await asyncio.sleep(RESULT_FLUSH_DELAY)
            while self._pending_results:
                await self._deliver(_take_batch(self._pending_results, RESULT_BATCH_MAX, RESULT_BATCH_BYTES, _result_size))

    def _reportable(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Results whose lease is still held: a stale result must never be sent."""
        now = time.monotonic()
        return [r for r in batch if (h := self._held.get(r["task_id"])) is not None and h.lease_expires > now]

    async def _deliver(self, batch: list[dict[str, Any]], fallback: bool = False) -> None:
        attempt = 0
        try:
            while batch := self._reportable(batch):
                try:
                    reply = await self._agent_call("complete", {"results": batch})
                except StatusError as e:
                    if e.status == 409:  # every result was a conflict: the leases are gone
                        self._log.warning("server refused %d results: their leases are no longer ours", len(batch))
                        return
                    if e.status == 401 or e.temporary:
                        attempt += 1
                        await asyncio.sleep(_backoff(attempt))
                        continue
                    await self._refused(batch, e, fallback)
                    return
                except OSError as e:
                    attempt += 1
                    self._log.warning("error reporting results; retrying: %s", e)
                    await asyncio.sleep(_backoff(attempt))
                    continue
                for o in reply.get("results") or []:
                    if o.get("status") == "conflict":
                        self._log.warning("server refused the result: the lease is no longer ours", extra={"task_id": o.get("task_id")})
                return
        finally:
            for r in batch:
                self._held.pop(r["task_id"], None)

    async def _refused(self, batch: list[dict[str, Any]], e: StatusError, fallback: bool) -> None:
        """A batch the server refuses is sent in halves; a lone refused result is reported as bad_result."""
        if len(batch) > 1:
            half = len(batch) // 2
            await self._deliver(batch[:half], fallback)
            await self._deliver(batch[half:], fallback)
        elif not fallback:
            r = batch[0]
            bad = {"task_id": r["task_id"], "lease_token": r["lease_token"], "state": "failed",
                   "error_code": "bad_result", "error": _storable(f"the server refused the result: {e}")[:4096]}
            await self._deliver([bad], True)

    # Logs ----------------------------------------------------------------

    def _queue_log(self, task: Task, stream: str, text: str) -> None:
        """_queue_log takes a task's output from any thread; the log loop ships it."""
        with self._log_lock:
            for i in range(0, max(len(text), 1), MAX_CHUNK_CHARS):
                self._log_chunks.append({"task_id": task.task_id, "lease_token": task.lease_token, "stream": stream,
                                         "data": _storable(text[i:i + MAX_CHUNK_CHARS])})
        self._loop.call_soon_threadsafe(self._logs_ready.set)

    async def _log_loop(self) -> None:
        while True:
            await self._logs_ready.wait()
            self._logs_ready.clear()
            await asyncio.sleep(LOG_FLUSH_DELAY)
            await self._ship_logs()

    async def _flush_logs_of(self, task: Task) -> None:
        """Output reaches the server while the lease token is current, that is before the result."""
        with self._log_lock:
            queued = any(c["task_id"] == task.task_id for c in self._log_chunks)
        if queued:
            await self._ship_logs()

    async def _ship_logs(self) -> None:
        async with self._logs_send:  # one send at a time: a flush waits for the one under way
            while True:
                with self._log_lock:
                    chunks = _take_batch(self._log_chunks, LOG_BATCH_MAX, LOG_BATCH_BYTES, _log_chunk_size)
                chunks = [c for c in chunks if c["task_id"] in self._held]
                if not chunks:
                    return
                for attempt in range(1, 6):
                    try:
                        await self._agent_call("logs", {"chunks": chunks})
                        break
                    except StatusError as e:
                        if e.status == 409 or not e.temporary:
                            break
                    except OSError:
                        pass
                    await asyncio.sleep(_backoff(attempt))

    # Drain -----------------------------------------------------------------

    async def _announce_drain(self) -> None:
        """Tell the server the agent drains, so it routes no new task to it."""
        try:
            await self._agent_call("drain", None, timeout=5)
        except (OSError, StatusError) as e:
            self._log.warning("error telling the server the agent drains: %s", e)

    async def _drain(self) -> None:
        running = [h.aio for h in self._held.values() if h.executing and h.aio is not None]
        self._log.info("draining", extra={"running": len(running), "grace": self._drain_grace})
        if running:
            all_done = asyncio.create_task(asyncio.wait(running))
            grace_over = asyncio.create_task(self._grace_over.wait())
            await asyncio.wait({all_done, grace_over}, timeout=self._drain_grace, return_when=asyncio.FIRST_COMPLETED)
            all_done.cancel()
            grace_over.cancel()
        unfinished = [h for h in self._held.values() if h.executing]
        if unfinished:
            self._log.warning("drain grace over: stopping and handing back the tasks still running",
                              extra={"tasks": len(unfinished)})
            for h in unfinished:
                self._cancel(h, "drain")
            # Give them a moment to stop before another agent may start them.
            pending = [h.aio for h in unfinished if h.aio is not None]
            if pending:
                await asyncio.wait(pending, timeout=5)
            # Those that ended with success as they were stopped are reported instead.
            hand_back = [h for h in unfinished if not h.reported]
            for h in hand_back:
                self._held.pop(h.task.task_id, None)
            await self._release([h.ref() for h in hand_back], "agent drained")
        self._stopping = True
        deadline = time.monotonic() + self._lease_seconds + 1
        # Results are pending until delivered (or given up): their held entry goes then.
        while any(not h.executing for h in self._held.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await self._ship_logs()

    async def _release(self, refs: list[dict[str, str]], why: str) -> None:
        if not refs:
            return
        try:
            await self._agent_call("release", {"tasks": refs}, timeout=10)
            self._log.info("leases handed back", extra={"tasks": len(refs), "why": why})
        except (OSError, StatusError) as e:
            self._log.error("error handing leases back; they will expire instead: %s", e)

    async def _deregister(self) -> None:
        try:
            await self._agent_call("deregister", None, timeout=10)
            self._log.info("agent deregistered", extra={"agent_id": self._agent_id})
        except (OSError, StatusError) as e:
            self._log.error("error deregistering; the server will find the agent offline: %s", e)

    # Declared jobs --------------------------------------------------------

    async def _declare_jobs(self) -> None:
        """Declares the jobs in one call; a refusal (an older version, an invalid job) is logged, not retried."""
        body = {
            "managed_by": self._job_set, "version": self._version, "prune": True,
            "source": f"{self._job_set.removeprefix('sdk:')} on {socket.gethostname()}",
            "jobs": [j.to_wire(self._labels) for j in self._jobs],
        }
        for attempt in range(1, 1000):
            try:
                report = await self._call("POST", "/v1/declarations", body, token=self._declare_key)
                break
            except StatusError as e:
                if not e.temporary:
                    self._log.error("jobs not declared: %s", e, extra={"managed_by": self._job_set, "version": self._version})
                    return
            except OSError as e:
                self._log.warning("error declaring jobs; retrying: %s", e)
            await asyncio.sleep(_backoff(attempt))
        else:
            return
        self._log.info("jobs declared", extra={"managed_by": self._job_set, "version": self._version,
                                               "changed": report.get("changed"), "counts": report.get("counts")})


def _take_batch(queue: list[dict[str, Any]], max_items: int, max_bytes: int,
                size: Callable[[dict[str, Any]], int]) -> list[dict[str, Any]]:
    """Takes the next batch off the front of queue: up to max_items and
    about max_bytes by size, and at least one. The server refuses a
    request over 8 MiB before reading it, and the whole batch with it."""
    total, n = 0, 0
    for item in queue[:max_items]:
        total += size(item)
        if n > 0 and total > max_bytes:
            break
        n += 1
    batch = queue[:n]
    del queue[:n]
    return batch


def _log_chunk_size(c: dict[str, Any]) -> int:
    """About the bytes an output chunk takes in a request body."""
    return 128 + len(json.dumps(c["data"]))


def _result_size(r: dict[str, Any]) -> int:
    """About the bytes a result takes in a request body, which is encoded
    as here (json.dumps escapes every non-ASCII character) but compact."""
    size = 256
    for field in ("result", "error"):
        if r.get(field) is not None:
            size += len(json.dumps(r[field]))
    return size


def _backoff(attempt: int) -> float:
    """Retry delays: 200 ms doubling, at most 5 s."""
    return min(0.2 * 2 ** max(attempt - 1, 0), 5.0)


async def _sleep_or(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


def _parse_time(v: Any) -> datetime:
    if not isinstance(v, str):
        return datetime.fromtimestamp(0).astimezone()
    return datetime.fromisoformat(v.replace("Z", "+00:00"))


def _storable(s: str) -> str:
    """The server refuses NUL and lone surrogates: replace them."""
    return s.replace("\x00", "\u2400").encode("utf-8", "replace").decode("utf-8")


def _load1() -> float | None:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return None
