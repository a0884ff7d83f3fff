// Jobs declared in code, next to their handlers (POST /v1/declarations).
import type { paths, Writable } from "@ax-scheduler/client";

/** RetryPolicy: maxAttempts counts the first; backoff doubles up to maxBackoffSeconds. */
export interface RetryPolicy {
  maxAttempts?: number;
  backoffSeconds?: number;
  maxBackoffSeconds?: number;
}

/**
 * JobSpec declares a job that runs one of the program's handlers. The agent
 * declares its jobs once registered, all in one call: they are created or
 * updated to match, the set's jobs no longer declared are paused, and a
 * declaration older than the set's version is refused (so two builds
 * running side by side do not undo each other). One trigger at most:
 * `cron` (with `timezone`, default UTC), `everySeconds` or `at`; none
 * makes a job fired only through the API.
 */
export interface JobSpec {
  name: string;
  group?: string;
  owner?: string;
  description?: string;
  /** handler defaults to name. */
  handler?: string;
  cron?: string;
  timezone?: string;
  everySeconds?: number;
  at?: Date;
  shards?: number;
  shardParams?: string[];
  timeoutSeconds?: number;
  retry?: RetryPolicy;
  priority?: number;
  route?: string;
  routeKey?: string;
  rateClass?: string;
  callback?: string;
  /** labels an agent needs to run the job; undefined: the declaring agent's labels. */
  labels?: Record<string, string>;
  params?: Record<string, unknown>;
  concurrency?: "allow" | "forbid" | "replace";
}

/** checkJobs returns what is wrong with the specs before any call. */
export function checkJobs(jobs: readonly JobSpec[]): string[] {
  const errs: string[] = [];
  const seen = new Set<string>();
  jobs.forEach((j, i) => {
    if (!j.name?.trim()) errs.push(`jobs[${i}]: no name`);
    const key = `${j.group || "default"}/${j.name}`;
    if (seen.has(key)) errs.push(`jobs[${i}]: ${key} declared twice`);
    seen.add(key);
    if ([j.cron, j.everySeconds, j.at].filter(Boolean).length > 1) {
      errs.push(`jobs[${i}] (${j.name}): give one of cron, everySeconds, at`);
    }
    for (const d of [j.everySeconds ?? 0, j.timeoutSeconds ?? 0]) {
      if (d < 0 || !Number.isInteger(d)) errs.push(`jobs[${i}] (${j.name}): durations are whole seconds, not ${d}`);
    }
  });
  return errs;
}

/** DeclarationBody is the body of POST /v1/declarations, as the client sends it. */
export type DeclarationBody = paths["/v1/declarations"]["post"]["requestBody"]["content"]["application/json"];
type WireJob = Writable<NonNullable<DeclarationBody["jobs"]>[number]>;

/** wireJob is a JobSpec as POST /v1/jobs takes it. */
export function wireJob(j: JobSpec, agentLabels: Record<string, string>): WireJob {
  const out: Record<string, unknown> = { name: j.name, executor: { kind: "handler", handler: j.handler || j.name } };
  put(out, "group", j.group);
  put(out, "owner", j.owner);
  put(out, "description", j.description);
  if (j.cron) out.trigger = { kind: "cron", cron: j.cron, timezone: j.timezone || "UTC" };
  else if (j.everySeconds) out.trigger = { kind: "interval", interval_seconds: j.everySeconds };
  else if (j.at) out.trigger = { kind: "delay", run_at: j.at.toISOString() };
  else out.trigger = { kind: "manual" };
  if (j.shards || j.shardParams?.length) {
    out.shards = { count: Math.max(j.shards ?? 0, 1), ...(j.shardParams?.length ? { params: j.shardParams } : {}) };
  }
  put(out, "timeout_seconds", j.timeoutSeconds);
  if (j.retry) {
    const retry: Record<string, unknown> = {};
    put(retry, "max_attempts", j.retry.maxAttempts);
    put(retry, "backoff_seconds", j.retry.backoffSeconds);
    put(retry, "backoff_max_seconds", j.retry.maxBackoffSeconds);
    out.retry = retry;
  }
  put(out, "priority", j.priority);
  if (j.route || j.routeKey) {
    const route: Record<string, unknown> = {};
    put(route, "strategy", j.route);
    put(route, "key", j.routeKey);
    out.route = route;
  }
  put(out, "rate_limit_class", j.rateClass);
  put(out, "concurrency_policy", j.concurrency);
  if (j.callback) out.callback = { url: j.callback };
  const labels = j.labels ?? agentLabels;
  if (Object.keys(labels).length > 0) out.target = { labels };
  if (j.params) out.params = j.params;
  return out as WireJob;
}

function put(m: Record<string, unknown>, key: string, value: unknown): void {
  if (value) m[key] = value;
}
