"""The Python SDK's conformance fixture (see README.md in this folder)."""

import asyncio
import logging
import os
import sys
import time

from ax_agent import Agent, JobSpec, Task, TaskError


def labels() -> dict[str, str]:
    out = {}
    for pair in filter(None, os.environ.get("AX_LABELS", "").split(",")):
        k, _, v = pair.partition("=")
        out[k] = v
    return out


def jobs(version: str) -> list[JobSpec]:
    if not version:
        return []
    group = os.environ.get("AX_JOB_GROUP", "declared")
    a = JobSpec(name="decl-a", group=group, handler="echo", priority=7 if version == "2" else 1, timeout_seconds=30)
    b = JobSpec(name="decl-b", group=group, handler="echo", shards=2, shard_params=["x", "y"])
    return [a] if version == "2" else [a, b]


def say(line: str) -> None:
    # One write per line: stderr's log lines share the test's buffer.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    version = os.environ.get("AX_DECLARE_VERSION", "")
    agent = Agent(
        os.environ["AX_SERVER"], os.environ["AX_AGENT_KEY"], name=os.environ.get("AX_AGENT_NAME"),
        labels=labels(), capacity=int(os.environ.get("AX_CAPACITY", "4")),
        drain_grace=int(os.environ.get("AX_DRAIN_GRACE_MS", "90000")) / 1000,
        lease_wait=int(os.environ.get("AX_LEASE_WAIT", "25")), version=version, jobs=jobs(version),
        job_set=os.environ.get("AX_JOB_SET") or None,
    )

    @agent.handler("echo")
    def echo(task: Task) -> dict:
        task.log(f"echo {task.shard_param}\n")
        return {
            "params": task.params, "shard_index": task.shard_index, "shard_total": task.shard_total,
            "shard_param": task.shard_param, "attempt": task.attempt, "idempotency_key": task.idempotency_key,
            "deadline": task.deadline.isoformat(), "execution_id": task.execution_id,
        }

    @agent.handler("sleep")
    async def sleep(task: Task) -> dict:
        ms = (task.params or {}).get("ms") or int(task.shard_param)
        say(f"STARTED {task.task_id}")
        try:
            await asyncio.sleep(ms / 1000)
        except asyncio.CancelledError:
            say(f"CANCELLED {task.task_id} {task.cancellation.reason}")
            raise
        say(f"DONE {task.task_id}")
        return {"slept_ms": ms}

    @agent.handler("stubborn")
    def stubborn(task: Task) -> dict:
        """Sleeps params.ms whether or not it is told to stop."""
        ms = task.params["ms"]
        say(f"STARTED {task.task_id}")
        time.sleep(ms / 1000)
        say(f"DONE {task.task_id}")
        return {"slept_ms": ms}

    @agent.handler("fail")
    def fail(task: Task) -> None:
        raise TaskError(task.params["message"], code=task.params["code"])

    @agent.handler("print")
    def print_(task: Task) -> dict:
        """Writes params.count pieces of params.size characters to its log."""
        size, count = task.params["size"], task.params["count"]
        piece = "x" * (size - 1) + "\n"
        for _ in range(count):
            task.log(piece)
        return {"written": size * count}

    @agent.handler("blob")
    def blob(task: Task) -> dict:
        """Returns params.size characters."""
        return {"blob": "x" * task.params["size"]}

    @agent.handler("noop")
    async def noop(task: Task) -> None:
        return None

    agent.run()


if __name__ == "__main__":
    main()
