// The agent: registers, long-polls leases, runs handlers, heartbeats every
// held lease in one call, ships logs, reports results in batches, drains.
import { hostname, loadavg, availableParallelism } from "node:os";
import { basename } from "node:path";

import { createAxClient, type AxClient, type Schema } from "@ax-scheduler/client";

import { checkJobs, wireJob, type JobSpec } from "./jobs.js";
import { TaskCancelled, TaskError, validErrorCode, type CancelReason, type Task } from "./task.js";

/** Handler runs one task; what it resolves to (JSON-able) is the task's result. */
export type Handler = (task: Task) => Promise<unknown> | unknown;

/** Logger receives the agent's own lines; console by default. */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** AgentOptions configure an Agent; unset fields take the documented defaults. */
export interface AgentOptions {
  /** url is the ax server, e.g. "http://127.0.0.1:8080". Required. */
  url: string;
  /** key is the bootstrap API key (scope agent) the agent registers with. Required. */
  key: string;
  /** name is how operators see the agent. Defaults to the host name. */
  name?: string;
  /** labels are matched against jobs' target labels. */
  labels?: Record<string, string>;
  /** capacity is how many tasks run at once, 1..10000. Defaults to 4. */
  capacity?: number;
  /** weight is the agent's share under the weighted strategy, 1..1000; unset: the server's default. */
  weight?: number;
  /** version is reported at registration and is the version of the declared jobs. */
  version?: string;
  /** drainGraceMs is how long running tasks may go on once draining. Defaults to 90 s. */
  drainGraceMs?: number;
  /** leaseWaitSeconds is how long one lease call waits for work, 0..25. Defaults to 25. */
  leaseWaitSeconds?: number;
  /** heartbeatIntervalMs overrides the interval the server asks for. */
  heartbeatIntervalMs?: number;
  /** jobs are declared once registered, as set jobSet at version. */
  jobs?: JobSpec[];
  /** jobSet names the declaration set. Defaults to sdk:<script name>. */
  jobSet?: string;
  /** declareKey is the key (scope submit) that declares jobs. Defaults to key. */
  declareKey?: string;
  logger?: Logger;
}

/** StatusError is an answer of the server other than 2xx, with its problem body. */
export class StatusError extends Error {
  constructor(
    readonly operation: string,
    readonly status: number,
    readonly problem: unknown,
  ) {
    const detail = (problem as { detail?: string } | undefined)?.detail ?? "";
    super(`${operation}: ${status} ${detail}`);
    this.name = "StatusError";
  }
  /** temporary says trying again later may succeed (a 5xx or 429). */
  get temporary(): boolean {
    return this.status >= 500 || this.status === 429;
  }
}

type LeasedTask = Schema<"LeasedTask">;
type TaskResult = Schema<"TaskResult">;
type TaskRef = Schema<"TaskRef">;
type LogChunk = Schema<"LogChunk">;

/** Held is a task whose lease the agent holds: running, or its result not yet reported. */
interface Held {
  task: Task;
  ref: TaskRef;
  leaseExpires: number; // Date.now() when the lease ends unless renewed
  abort: AbortController;
  executing: boolean;
  reported?: boolean; // its result is queued to be reported
  done: Promise<void>;
  timer?: NodeJS.Timeout;
}

// Batching: the server records a batch in one statement, so a few
// milliseconds of waiting for company pay off under load. A batch is also
// bounded by its size: the server takes 8 MiB a request, and refuses a
// larger one before reading it (resultBatchBytes leaves room to spare).
const resultBatchMax = 1000;
const resultBatchBytes = 4 << 20;
const resultFlushDelayMs = 5;
const logFlushDelayMs = 50;
const logBatchMax = 1000;
const logBatchBytes = 512 << 10;
const maxChunkChars = 256 << 10;
const maxErrorChars = 60 << 10;
const maxResultBytes = 1 << 20;
const maxLeasePerCall = 1000;
// How long a drain waits for the lease call under way before cutting it.
const pollCutMs = 2000;

/**
 * Agent runs async functions as ax tasks of executor kind handler.
 *
 * ```ts
 * const agent = new Agent({ url, key, labels: { pool: "node" } });
 * agent.handle("reports.nightly", async (task) => buildReport(task.params, task.signal));
 * await agent.run(); // until SIGTERM/SIGINT, then drains
 * ```
 *
 * Every held lease is renewed by one heartbeat per interval; results leave
 * in batches; a task's `signal` aborts when it must stop. On drain the
 * agent stops leasing, tells the server, lets running tasks finish for
 * drainGraceMs, aborts the rest and hands their leases back (another agent
 * runs them at once), reports what finished and deregisters.
 */
export class Agent {
  private readonly opts: Required<Omit<AgentOptions, "weight" | "heartbeatIntervalMs" | "logger">> &
    Pick<AgentOptions, "weight" | "heartbeatIntervalMs">;
  private readonly log: Logger;
  private readonly handlers = new Map<string, Handler>();
  private readonly held = new Map<string, Held>();
  private pendingResults: TaskResult[] = [];
  private logChunks: LogChunk[] = [];
  private started = false;
  private stopping = false;
  private paused = false;
  private api!: AxClient;
  private agentId = "";
  private leaseSeconds = 30;
  private heartbeatMs = 5000;
  private wake = new Signal();
  private resultsReady = new Signal();
  private logsReady = new Signal();
  private graceOver = new AbortController();
  private logSend: Promise<void> = Promise.resolve();

  constructor(options: AgentOptions) {
    this.opts = {
      name: hostname() || "ax-agent",
      labels: {},
      capacity: 4,
      version: "",
      drainGraceMs: 90_000,
      leaseWaitSeconds: 25,
      jobs: [],
      jobSet: "sdk:" + basename(process.argv[1] ?? "agent").replace(/\.[cm]?js$/, ""),
      declareKey: options.key,
      ...stripUndefined(options),
    };
    this.log = options.logger ?? consoleLogger;
    const errs: string[] = [];
    if (!this.opts.key) errs.push("no key: an API key with scope agent is needed to register");
    if (!/^https?:\/\/[^/]/.test(this.opts.url)) errs.push(`server URL ${JSON.stringify(this.opts.url)} is not http(s)`);
    if (!(this.opts.capacity >= 1 && this.opts.capacity <= 10000)) errs.push(`capacity ${this.opts.capacity} is outside 1..10000`);
    if (this.opts.weight !== undefined && !(this.opts.weight >= 1 && this.opts.weight <= 1000)) {
      errs.push(`weight ${this.opts.weight} is outside 1..1000`);
    }
    if (!(this.opts.leaseWaitSeconds >= 0 && this.opts.leaseWaitSeconds <= 25)) errs.push("leaseWaitSeconds is outside 0..25");
    if (Object.keys(this.opts.labels).some((k) => k === "")) errs.push("a label has an empty name");
    errs.push(...checkJobs(this.opts.jobs));
    if (errs.length > 0) throw new Error("invalid agent config: " + errs.join("; "));
  }

  /** handle registers fn for tasks whose executor names handler name. */
  handle(name: string, fn: Handler): this {
    if (!name || typeof fn !== "function") throw new Error("agent: handle needs a name and a function");
    if (this.handlers.has(name)) throw new Error(`agent: handler ${JSON.stringify(name)} registered twice`);
    this.handlers.set(name, fn);
    return this;
  }

  /**
   * run registers and runs tasks until SIGTERM or SIGINT (or `stop`
   * aborts), then drains and resolves. A second signal cuts the grace
   * short. It rejects only when the agent could not register at all.
   */
  async run(stop?: AbortSignal): Promise<void> {
    if (this.started) throw new Error("agent: run called twice");
    this.started = true;
    const ctl = new AbortController();
    const onSignal = () => (ctl.signal.aborted ? this.endGrace() : ctl.abort());
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    stop?.addEventListener("abort", () => ctl.abort(), { once: true });
    try {
      await this.main(ctl.signal);
    } finally {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    }
  }

  /** endGrace stops waiting for running tasks once draining: they are aborted and handed back. */
  endGrace(): void {
    this.graceOver.abort();
  }

  private async main(stop: AbortSignal): Promise<void> {
    if (!(await this.register(stop))) return;
    // Heard from (and ready) before it asks for work: a server answers an
    // agent it has not heard from at once with nothing.
    await this.heartbeat();
    const loops = new AbortController();
    const heartbeats = this.heartbeatLoop(loops.signal);
    const reporter = this.reportLoop(loops.signal);
    const shipper = this.logLoop(loops.signal);
    const declared = this.opts.jobs.length > 0 ? this.declareJobs(loops.signal) : Promise.resolve();
    const inflight = await this.leaseLoop(stop);
    const handback = this.handBackInflight(inflight);
    const announced = this.announceDrain();
    await this.drain();
    await handback;
    await announced;
    loops.abort(); // no heartbeat may bring the agent back after its goodbye
    await Promise.allSettled([heartbeats, reporter, shipper, declared]);
    await this.deregister();
  }

  // Calls --------------------------------------------------------------

  /** call runs one operation of the client and throws StatusError for a non-2xx answer. */
  private async call<T>(
    operation: string,
    fn: () => Promise<{ data?: T; error?: unknown; response: Response }>,
  ): Promise<T> {
    const { data, error, response } = await fn();
    if (!response.ok) {
      if (response.status === 401 && this.agentId && !this.stopping && operation !== "register") {
        this.log.warn("the server refused the agent's token: registering again", { agent_id: this.agentId });
        void this.register(undefined);
      }
      throw new StatusError(operation, response.status, error);
    }
    return data as T;
  }

  private path() {
    return { params: { path: { id: this.agentId } } };
  }

  private async register(stop: AbortSignal | undefined): Promise<boolean> {
    const client = createAxClient(this.opts.url, { apiKey: this.opts.key });
    const body = {
      name: this.opts.name,
      labels: this.opts.labels,
      capacity: this.opts.capacity,
      executors: ["handler"] as ("handler" | "http" | "shell")[],
      version: this.opts.version,
      host_name: hostname().slice(0, 255),
      ...(this.opts.weight ? { weight: this.opts.weight } : {}),
    };
    for (let attempt = 1; ; attempt++) {
      try {
        const creds = await this.call("register", () => client.POST("/v1/agents/register", { body }));
        this.agentId = creds.agent_id;
        this.leaseSeconds = creds.lease_seconds || 30;
        this.heartbeatMs = this.opts.heartbeatIntervalMs ?? (creds.heartbeat_interval_seconds || 5) * 1000;
        this.api = createAxClient(this.opts.url, { apiKey: creds.token });
        this.log.info("agent registered", { agent_id: this.agentId, capacity: this.opts.capacity });
        return true;
      } catch (e) {
        if (e instanceof StatusError && !e.temporary) throw e;
        this.log.warn("error registering; retrying", { error: String(e) });
      }
      if (stop?.aborted) return false;
      await sleep(backoff(attempt), stop);
    }
  }

  // Leasing -----------------------------------------------------------

  private executing(): number {
    let n = 0;
    for (const h of this.held.values()) if (h.executing) n++;
    return n;
  }

  /** leaseLoop leases while there is room, until stop; it returns a lease call still under way. */
  private async leaseLoop(stop: AbortSignal): Promise<{ call: Promise<LeasedTask[]> } | undefined> {
    const stopped = abortPromise(stop);
    let failures = 0;
    let empties = 0;
    while (!stop.aborted) {
      const free = this.opts.capacity - this.executing();
      if (free <= 0 || this.paused) {
        await Promise.race([this.wake.next(), stopped]);
        continue;
      }
      const began = Date.now();
      const body = { max: Math.min(free, maxLeasePerCall), wait_seconds: this.opts.leaseWaitSeconds };
      // Draining: a poll of a busy agent is answered at once, and what it
      // brings is handed back by handBackInflight (another agent runs it
      // now); an idle agent's poll is cut short after pollCutMs rather
      // than left to run out.
      const poll = new AbortController();
      const timeout = setTimeout(() => poll.abort(), (this.opts.leaseWaitSeconds + 30) * 1000);
      const cut = () => setTimeout(() => poll.abort(), pollCutMs).unref();
      stop.addEventListener("abort", cut, { once: true });
      const call = this.call("lease", () => this.api.POST("/v1/agents/{id}/lease", { ...this.path(), body, signal: poll.signal }))
        .then((l) => l.tasks ?? [])
        .finally(() => {
          clearTimeout(timeout);
          stop.removeEventListener("abort", cut);
        });
      const first = await Promise.race([call.then(
        (tasks) => ({ tasks }),
        (error: unknown) => ({ error }),
      ), stopped.then(() => undefined)]);
      if (first === undefined) return { call }; // wrapped: an async function would wait for it
      if ("error" in first) {
        failures++;
        this.log.error("error leasing tasks", { error: String(first.error) });
        await sleep(backoff(failures), stop);
        continue;
      }
      failures = 0;
      if (first.tasks.length === 0 && Date.now() - began < (this.opts.leaseWaitSeconds * 1000) / 2) {
        // The server answered at once with nothing, as it does for an agent
        // it does not hold active: do not spin on it.
        empties++;
        await sleep(backoff(empties), stop);
        continue;
      }
      empties = 0;
      this.startAll(first.tasks, free);
    }
    return undefined;
  }

  private async handBackInflight(inflight: { call: Promise<LeasedTask[]> } | undefined): Promise<void> {
    if (!inflight) return;
    const tasks = await inflight.call.catch(() => [] as LeasedTask[]);
    await this.release(tasks.map(refOf), "agent is draining");
  }

  private startAll(tasks: LeasedTask[], free: number): void {
    if (tasks.length > free) {
      void this.release(tasks.slice(free).map(refOf), "over capacity");
      tasks = tasks.slice(0, free);
    }
    const expires = Date.now() + this.leaseSeconds * 1000;
    for (const t of tasks) this.start(t, expires);
  }

  private start(raw: LeasedTask, expires: number): void {
    const abort = new AbortController();
    const shardTotal = raw.shard_total || 1;
    const task: Task = {
      taskId: raw.task_id,
      executionId: raw.execution_id,
      jobId: raw.job_id,
      jobName: raw.job_name,
      handler: raw.executor.handler ?? "",
      params: raw.params ?? null,
      shardIndex: raw.shard_index,
      shardTotal,
      shardParam: raw.shard_param,
      attempt: raw.attempt,
      maxAttempts: raw.max_attempts,
      deadline: new Date(raw.deadline),
      scheduledFor: new Date(raw.scheduled_for),
      timeoutSeconds: raw.timeout_seconds,
      traceparent: raw.traceparent ?? "",
      idempotencyKey: shardTotal > 1 ? `${raw.execution_id}:${raw.shard_index}` : raw.execution_id,
      signal: abort.signal,
      log: (text, stream = "stdout") => this.queueLog(raw, text, stream),
    };
    const held: Held = { task, ref: refOf(raw), leaseExpires: expires, abort, executing: true, done: Promise.resolve() };
    this.held.set(task.taskId, held);
    if (task.timeoutSeconds > 0) {
      held.timer = setTimeout(() => this.cancel(held, "timeout"), task.timeoutSeconds * 1000);
    }
    held.done = this.runTask(held);
  }

  private cancel(held: Held, reason: CancelReason): void {
    if (held.executing && !held.abort.signal.aborted) held.abort.abort(new TaskCancelled(reason));
  }

  // Running -----------------------------------------------------------

  private taskFields(t: Task): Record<string, unknown> {
    return { execution_id: t.executionId, task_id: t.taskId, job_id: t.jobId, shard_index: t.shardIndex };
  }

  private async runTask(held: Held): Promise<void> {
    const t = held.task;
    const fn = this.handlers.get(t.handler);
    let result: unknown;
    let error: unknown;
    let failed = false;
    try {
      if (!fn) throw new TaskError(`no handler ${JSON.stringify(t.handler)} in this agent`, "unknown_handler");
      result = await fn(t);
    } catch (e) {
      failed = true;
      error = e;
    } finally {
      clearTimeout(held.timer);
    }
    const reason = cancelReason(t.signal);
    const report = outcome(held, result, failed, error, reason);
    // A handler that ended with success as the drain stopped it did its
    // work: it is reported, not handed back (another agent would run it
    // again). Lost leases are never reported.
    if (reason === "lease_lost" || (reason === "drain" && report.state !== "succeeded")) {
      held.executing = false; // lose or drain forgets its lease
      this.wake.fire();
      this.log.warn("task stopped and not reported", { ...this.taskFields(t), reason });
      return;
    }
    await this.flushLogsOf(t.taskId);
    held.executing = false;
    this.wake.fire();
    if (this.held.get(t.taskId) !== held) return; // the lease was lost or handed back meanwhile
    held.reported = true;
    this.pendingResults.push(report);
    this.resultsReady.fire();
  }

  // Heartbeats --------------------------------------------------------

  private async heartbeatLoop(stop: AbortSignal): Promise<void> {
    // The first heartbeat went before leasing began.
    for (let sent = Date.now(); !stop.aborted; sent = Date.now()) {
      await sleep(Math.max(this.heartbeatMs - (Date.now() - sent), 0), stop);
      if (!stop.aborted) await this.heartbeat();
    }
  }

  /** heartbeat renews every held lease in one call and acts on the answer. */
  private async heartbeat(): Promise<void> {
    const now = Date.now();
    for (const h of [...this.held.values()]) if (h.leaseExpires < now) this.lose(h, "lease expired without renewal");
    const helds = [...this.held.values()];
    const body = {
      tasks: helds.map((h) => h.ref),
      running: this.executing(),
      ready: true,
      load1: loadavg()[0]! / availableParallelism(),
    };
    let reply: Schema<"HeartbeatReply">;
    try {
      reply = await this.call("heartbeat", () =>
        this.api.POST("/v1/agents/{id}/heartbeat", {
          ...this.path(),
          body,
          signal: AbortSignal.timeout(Math.min(3 * this.heartbeatMs, this.leaseSeconds * 1000)),
        }),
      );
    } catch (e) {
      this.log.warn("heartbeat failed", { error: String(e), tasks: helds.length });
      return;
    }
    const renewed = new Set(reply.renewed ?? []);
    for (const h of helds) if (renewed.has(h.task.taskId)) h.leaseExpires = now + this.leaseSeconds * 1000;
    for (const id of reply.lost ?? []) {
      const h = this.held.get(id);
      if (h) this.lose(h, "lease lost");
    }
    for (const id of reply.cancel ?? []) {
      const h = this.held.get(id);
      if (h) {
        this.log.info("server cancelled the task: stopping it", this.taskFields(h.task));
        this.cancel(h, "server");
      }
    }
    const paused = reply.state === "draining";
    if (paused !== this.paused) {
      this.paused = paused;
      this.wake.fire();
    }
  }

  private lose(h: Held, why: string): void {
    this.log.warn(`${why}: stopping the task, its result will not be reported`, this.taskFields(h.task));
    this.held.delete(h.task.taskId);
    this.cancel(h, "lease_lost");
  }

  // Results -----------------------------------------------------------

  private async reportLoop(stop: AbortSignal): Promise<void> {
    const stopped = abortPromise(stop);
    while (!stop.aborted) {
      await Promise.race([this.resultsReady.next(), stopped]);
      if (this.pendingResults.length < resultBatchMax) await sleep(resultFlushDelayMs);
      while (this.pendingResults.length > 0) {
        await this.deliver(takeBatch(this.pendingResults, resultBatchMax, resultBatchBytes, resultSize));
      }
    }
  }

  /** reportable keeps the results whose lease is still held: a stale result is never sent. */
  private reportable(batch: TaskResult[]): TaskResult[] {
    const now = Date.now();
    return batch.filter((r) => (this.held.get(r.task_id)?.leaseExpires ?? 0) > now);
  }

  private async deliver(batch: TaskResult[], fallback = false): Promise<void> {
    try {
      for (let attempt = 1; (batch = this.reportable(batch)).length > 0; attempt++) {
        try {
          const reply = await this.call("complete", () =>
            this.api.POST("/v1/agents/{id}/complete", { ...this.path(), body: { results: batch } }),
          );
          for (const o of reply.results ?? []) {
            if (o.status === "conflict") this.log.warn("server refused the result: the lease is no longer ours", { task_id: o.task_id });
          }
          return;
        } catch (e) {
          if (e instanceof StatusError && e.status === 409) {
            this.log.warn("server refused the results: their leases are no longer ours", { results: batch.length });
            return;
          }
          if (e instanceof StatusError && e.status !== 401 && !e.temporary) {
            await this.refused(batch, e, fallback);
            return;
          }
          this.log.warn("error reporting results; retrying", { error: String(e) });
          await sleep(backoff(attempt));
        }
      }
    } finally {
      for (const r of batch) this.held.delete(r.task_id);
    }
  }

  /** refused sends a refused batch in halves; a lone refused result is reported as bad_result. */
  private async refused(batch: TaskResult[], e: StatusError, fallback: boolean): Promise<void> {
    if (batch.length > 1) {
      const half = batch.length >> 1;
      await this.deliver(batch.slice(0, half), fallback);
      await this.deliver(batch.slice(half), fallback);
      return;
    }
    const r = batch[0];
    if (fallback || !r) return;
    const error = storable(`the server refused the result: ${e.message}`).slice(0, 4096);
    await this.deliver([{ task_id: r.task_id, lease_token: r.lease_token, state: "failed", error_code: "bad_result", error }], true);
  }

  // Logs --------------------------------------------------------------

  private queueLog(t: LeasedTask, text: string, stream: "stdout" | "stderr"): void {
    if (stream !== "stdout" && stream !== "stderr") throw new Error("stream is stdout or stderr");
    for (let i = 0; i < Math.max(text.length, 1); i += maxChunkChars) {
      this.logChunks.push({ task_id: t.task_id, lease_token: t.lease_token, stream, data: storable(text.slice(i, i + maxChunkChars)) });
    }
    this.logsReady.fire();
  }

  private async logLoop(stop: AbortSignal): Promise<void> {
    const stopped = abortPromise(stop);
    while (!stop.aborted) {
      await Promise.race([this.logsReady.next(), stopped]);
      await sleep(logFlushDelayMs);
      await this.shipLogs();
    }
  }

  /** Output reaches the server while the lease token is current, that is before the result. */
  private async flushLogsOf(taskId: string): Promise<void> {
    if (this.logChunks.some((c) => c.task_id === taskId)) await this.shipLogs();
  }

  /** shipLogs sends what is queued, one send at a time: a flush waits for the one under way. */
  private shipLogs(): Promise<void> {
    this.logSend = this.logSend.then(async () => {
      while (this.logChunks.length > 0) {
        const chunks = takeBatch(this.logChunks, logBatchMax, logBatchBytes, logChunkSize).filter((c) => this.held.has(c.task_id));
        if (chunks.length === 0) continue;
        for (let attempt = 1; attempt <= 5; attempt++) {
          try {
            await this.call("logs", () => this.api.POST("/v1/agents/{id}/logs", { ...this.path(), body: { chunks } }));
            break;
          } catch (e) {
            if (e instanceof StatusError && (e.status === 409 || !e.temporary)) break;
            await sleep(backoff(attempt));
          }
        }
      }
    });
    return this.logSend;
  }

  // Drain -------------------------------------------------------------

  private async announceDrain(): Promise<void> {
    try {
      await this.call("drain", () => this.api.POST("/v1/agents/{id}/drain", { ...this.path(), signal: AbortSignal.timeout(5000) }));
    } catch (e) {
      this.log.warn("error telling the server the agent drains", { error: String(e) });
    }
  }

  private async drain(): Promise<void> {
    const running = [...this.held.values()].filter((h) => h.executing);
    this.log.info("draining", { running: running.length, grace_ms: this.opts.drainGraceMs });
    if (running.length > 0) {
      await Promise.race([Promise.all(running.map((h) => h.done)), sleep(this.opts.drainGraceMs, this.graceOver.signal)]);
    }
    const unfinished = [...this.held.values()].filter((h) => h.executing);
    if (unfinished.length > 0) {
      this.log.warn("drain grace over: stopping and handing back the tasks still running", { tasks: unfinished.length });
      for (const h of unfinished) this.cancel(h, "drain");
      // Give them a moment to stop before another agent may start them.
      await Promise.race([Promise.all(unfinished.map((h) => h.done)), sleep(5000)]);
      // Those that ended with success as they were stopped are reported instead.
      const handBack = unfinished.filter((h) => !h.reported);
      for (const h of handBack) this.held.delete(h.task.taskId);
      await this.release(handBack.map((h) => h.ref), "agent drained");
    }
    this.stopping = true;
    const deadline = Date.now() + (this.leaseSeconds + 1) * 1000;
    while ((this.pendingResults.length > 0 || [...this.held.values()].some((h) => !h.executing)) && Date.now() < deadline) {
      await sleep(10);
    }
    await this.shipLogs();
  }

  private async release(refs: TaskRef[], why: string): Promise<void> {
    if (refs.length === 0) return;
    try {
      await this.call("release", () =>
        this.api.POST("/v1/agents/{id}/release", { ...this.path(), body: { tasks: refs }, signal: AbortSignal.timeout(10_000) }),
      );
      this.log.info("leases handed back", { tasks: refs.length, why });
    } catch (e) {
      this.log.error("error handing leases back; they will expire instead", { error: String(e) });
    }
  }

  private async deregister(): Promise<void> {
    try {
      await this.call("deregister", () =>
        this.api.POST("/v1/agents/{id}/deregister", { ...this.path(), signal: AbortSignal.timeout(10_000) }),
      );
      this.log.info("agent deregistered", { agent_id: this.agentId });
    } catch (e) {
      this.log.error("error deregistering; the server will find the agent offline", { error: String(e) });
    }
  }

  // Declared jobs ----------------------------------------------------

  /** declareJobs declares the jobs in one call; a refusal is logged, not retried. */
  private async declareJobs(stop: AbortSignal): Promise<void> {
    const client = createAxClient(this.opts.url, { apiKey: this.opts.declareKey });
    const body = {
      managed_by: this.opts.jobSet,
      version: this.opts.version,
      prune: true,
      source: `${this.opts.jobSet.replace(/^sdk:/, "")} on ${hostname()}`,
      jobs: this.opts.jobs.map((j) => wireJob(j, this.opts.labels)),
    };
    const fields = { managed_by: this.opts.jobSet, version: this.opts.version };
    for (let attempt = 1; !stop.aborted; attempt++) {
      try {
        const report = await this.call("declare", () => client.POST("/v1/declarations", { body }));
        this.log.info("jobs declared", { ...fields, changed: report.changed, counts: report.counts });
        return;
      } catch (e) {
        if (e instanceof StatusError && !e.temporary) {
          this.log.error("jobs not declared", { ...fields, error: e.message, problem: e.problem });
          return;
        }
        this.log.warn("error declaring jobs; retrying", { error: String(e) });
      }
      await sleep(backoff(attempt), stop);
    }
  }
}

/**
 * takeBatch takes the next batch off the front of queue: up to maxItems and about maxBytes by size, and at least
 * one. The server refuses a request over 8 MiB before reading it, and the whole batch with it.
 */
function takeBatch<T>(queue: T[], maxItems: number, maxBytes: number, size: (item: T) => number): T[] {
  let total = 0;
  let n = 0;
  for (const item of queue.slice(0, maxItems)) {
    total += size(item);
    if (n > 0 && total > maxBytes) break;
    n++;
  }
  return queue.splice(0, n);
}

/** logChunkSize is about the bytes an output chunk takes in a request body. */
function logChunkSize(c: LogChunk): number {
  return 128 + Buffer.byteLength(JSON.stringify(c.data));
}

/** resultSize is about the bytes a result takes in a request body. */
function resultSize(r: TaskResult): number {
  let size = 256;
  if (r.result !== undefined && r.result !== null) size += Buffer.byteLength(JSON.stringify(r.result));
  if (r.error) size += Buffer.byteLength(JSON.stringify(r.error));
  return size;
}

function outcome(held: Held, result: unknown, failed: boolean, error: unknown, reason: CancelReason | undefined): TaskResult {
  const t = held.task;
  const r: TaskResult = { task_id: t.taskId, lease_token: held.ref.lease_token, state: "succeeded" };
  if (!failed) {
    let encoded: string | undefined;
    try {
      encoded = JSON.stringify(result);
    } catch (e) {
      return { ...r, state: "failed", error: `the handler's result is not JSON: ${String(e)}`, error_code: "result_not_json" };
    }
    if (encoded !== undefined && Buffer.byteLength(encoded) > maxResultBytes) {
      return { ...r, state: "failed", error: `result is more than ${maxResultBytes} bytes`, error_code: "result_too_large" };
    }
    if (result !== undefined && result !== null) r.result = JSON.parse(encoded ?? "null");
    return r;
  }
  const text = error instanceof Error ? error.message || error.name : String(error);
  if (reason === "server") {
    r.state = "cancelled";
    r.error = "cancelled by the server: " + text;
  } else if (reason === "timeout") {
    r.state = "timed_out";
    r.error = `timed out after ${t.timeoutSeconds} s: ${text}`;
    r.error_code = "timeout";
  } else {
    r.state = "failed";
    r.error = text;
    const code = (error as { code?: unknown } | null)?.code;
    if (validErrorCode(code)) r.error_code = code;
  }
  r.error = storable(r.error ?? "").slice(0, maxErrorChars);
  return r;
}

function cancelReason(signal: AbortSignal): CancelReason | undefined {
  return signal.aborted && signal.reason instanceof TaskCancelled ? signal.reason.reason : undefined;
}

function refOf(t: LeasedTask): TaskRef {
  return { task_id: t.task_id, lease_token: t.lease_token };
}

/** storable replaces what the server refuses in text: NUL and lone surrogates. */
function storable(s: string): string {
  // A UTF-8 round trip turns lone surrogates into U+FFFD.
  return Buffer.from(s.replaceAll("\u0000", "\u2400"), "utf8").toString("utf8");
}

/** backoff is the delay before retry n: 200 ms doubling, at most 5 s. */
function backoff(attempt: number): number {
  return Math.min(200 * 2 ** Math.max(attempt - 1, 0), 5000);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

function abortPromise(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** Signal wakes whoever awaits next(): an edge, not a level. */
class Signal {
  private waiters: (() => void)[] = [];
  next(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  fire(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const resolve of w) resolve();
  }
}

const consoleLogger: Logger = {
  info: (msg, fields) => console.error(JSON.stringify({ level: "INFO", msg, ...fields })),
  warn: (msg, fields) => console.error(JSON.stringify({ level: "WARN", msg, ...fields })),
  error: (msg, fields) => console.error(JSON.stringify({ level: "ERROR", msg, ...fields })),
};
