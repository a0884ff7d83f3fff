// The TypeScript SDK's conformance fixture: the agent program the
// conformance suite (tests/conformance) starts for the TypeScript SDK. Its
// environment and handlers are those of every SDK's fixture
// (tests/conformance/testdata/README.md).
import { Agent, TaskError, type JobSpec, type Task } from "../src/index.js";

function labels(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (process.env.AX_LABELS ?? "").split(",").filter(Boolean)) {
    const [k, ...v] = pair.split("=");
    out[k!] = v.join("=");
  }
  return out;
}

function jobs(version: string): JobSpec[] {
  if (!version) return [];
  const group = process.env.AX_JOB_GROUP ?? "declared";
  const a: JobSpec = { name: "decl-a", group, handler: "echo", priority: version === "2" ? 7 : 1, timeoutSeconds: 30 };
  const b: JobSpec = { name: "decl-b", group, handler: "echo", shards: 2, shardParams: ["x", "y"] };
  return version === "2" ? [a] : [a, b];
}

const env = process.env;
const version = env.AX_DECLARE_VERSION ?? "";
const agent = new Agent({
  url: env.AX_SERVER ?? "",
  key: env.AX_AGENT_KEY ?? "",
  name: env.AX_AGENT_NAME,
  labels: labels(),
  capacity: Number(env.AX_CAPACITY ?? 4),
  drainGraceMs: Number(env.AX_DRAIN_GRACE_MS ?? 90_000),
  leaseWaitSeconds: Number(env.AX_LEASE_WAIT ?? 25),
  version,
  jobs: jobs(version),
  jobSet: env.AX_JOB_SET || undefined,
});

agent.handle("echo", (task: Task) => {
  task.log(`echo ${task.shardParam}\n`);
  return {
    params: task.params,
    shard_index: task.shardIndex,
    shard_total: task.shardTotal,
    shard_param: task.shardParam,
    attempt: task.attempt,
    idempotency_key: task.idempotencyKey,
    deadline: task.deadline.toISOString(),
    execution_id: task.executionId,
  };
});

agent.handle("sleep", async (task: Task) => {
  const ms = Number((task.params as { ms?: number } | null)?.ms ?? task.shardParam);
  console.log(`STARTED ${task.taskId}`);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    task.signal.addEventListener("abort", () => {
      clearTimeout(timer);
      console.log(`CANCELLED ${task.taskId} ${String((task.signal.reason as Error).message)}`);
      reject(task.signal.reason);
    }, { once: true });
  });
  console.log(`DONE ${task.taskId}`);
  return { slept_ms: ms };
});

// stubborn sleeps params.ms whether or not it is told to stop.
agent.handle("stubborn", async (task: Task) => {
  const ms = Number((task.params as { ms?: number } | null)?.ms);
  console.log(`STARTED ${task.taskId}`);
  await new Promise<void>((resolve) => setTimeout(resolve, ms));
  console.log(`DONE ${task.taskId}`);
  return { slept_ms: ms };
});

agent.handle("fail", (task: Task) => {
  const p = task.params as { message: string; code: string };
  throw new TaskError(p.message, p.code);
});

// print writes params.count pieces of params.size characters to its log.
agent.handle("print", (task: Task) => {
  const p = task.params as { size: number; count: number };
  const piece = "x".repeat(p.size - 1) + "\n";
  for (let i = 0; i < p.count; i++) task.log(piece);
  return { written: p.size * p.count };
});

// blob returns params.size characters.
agent.handle("blob", (task: Task) => ({ blob: "x".repeat((task.params as { size: number }).size) }));

agent.handle("noop", async () => undefined);

agent.run().catch((e: unknown) => {
  console.error("ts-fixture:", e);
  process.exit(1);
});
