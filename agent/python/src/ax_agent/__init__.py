"""ax_agent: run Python functions as tasks of the ax job scheduler.

An Agent registers with an ax server, long-polls it for tasks of executor
kind handler, runs the function registered under the task's handler name,
renews every held lease in one heartbeat, ships output, reports results in
batches and drains on SIGTERM, handing back what did not finish. Standard
library only.
"""

from ._agent import Agent, Handler
from ._http import StatusError
from ._jobs import JobSpec, RetryPolicy
from ._task import CancellationToken, Cancelled, Task, TaskError

__all__ = [
    "Agent",
    "Handler",
    "Task",
    "TaskError",
    "Cancelled",
    "CancellationToken",
    "JobSpec",
    "RetryPolicy",
    "StatusError",
]
__version__ = "0.1.0"
