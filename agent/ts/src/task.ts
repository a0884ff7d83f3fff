// What a handler gets: the task, its AbortSignal and its log.

/** CancelReason says why a task's signal aborted. */
export type CancelReason = "server" | "timeout" | "lease_lost" | "drain";

/**
 * Task is what a handler knows about the task it runs. Tasks run at least
 * once: after a crash or a lost lease the same task may run again, so side
 * effects that must happen once key on `idempotencyKey` (the same for every
 * attempt of this task).
 */
export interface Task {
  readonly taskId: string;
  readonly executionId: string;
  readonly jobId: string;
  readonly jobName: string;
  /** handler is the name the job's executor gives. */
  readonly handler: string;
  /** params are the run's params (a JSON object, or null). */
  readonly params: unknown;
  readonly shardIndex: number;
  readonly shardTotal: number;
  readonly shardParam: string;
  /** attempt counts from 1; maxAttempts is how many the job allows. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** deadline is when the attempt times out by the server's clock, at the earliest. */
  readonly deadline: Date;
  readonly scheduledFor: Date;
  readonly timeoutSeconds: number;
  /** traceparent is the run's W3C trace context ("" when none). */
  readonly traceparent: string;
  /** idempotencyKey is the execution id, then ":<shardIndex>" when the run has several shards. */
  readonly idempotencyKey: string;
  /**
   * signal aborts when the task must stop: the run was cancelled, it timed
   * out, its lease was lost, or the agent drains past its grace.
   * `signal.reason` is a TaskCancelled naming which.
   */
  readonly signal: AbortSignal;
  /** log ships text to the server as the task's output. */
  log(text: string, stream?: "stdout" | "stderr"): void;
}

/** TaskCancelled is the reason of an aborted task signal. */
export class TaskCancelled extends Error {
  constructor(readonly reason: CancelReason) {
    super(`task cancelled: ${reason}`);
    this.name = "TaskCancelled";
  }
}

const errorCodePattern = /^[a-z0-9_.-]{1,64}$/;

/** validErrorCode is the server's rule: 1 to 64 of a-z, 0-9, '_', '.', '-'. */
export function validErrorCode(code: unknown): code is string {
  return typeof code === "string" && errorCodePattern.test(code);
}

/**
 * TaskError fails a task with its message and a machine-readable code:
 * `throw new TaskError("quota exceeded", "quota_exceeded")`. A code the
 * server would refuse is dropped; the task still fails. Any other thrown
 * error fails the task too, with its message (and its `code` property when
 * that is a valid code).
 */
export class TaskError extends Error {
  constructor(message: string, readonly code?: string) {
    super(message);
    this.name = "TaskError";
  }
}
