// e2e drives a live ax server with the generated client only: it creates a
// shell job whose callback comes back to a receiver of its own on
// 127.0.0.1, triggers it, waits for the run to succeed, reads its output,
// and verifies the callback's signature with standardwebhooks and the
// job's signing secret. tests/e2e/ts_client_test.go runs it against a real
// `ax serve` and ax-agent; it needs AX_SERVER and AX_API_KEY (admin).
//
// It exits 0 when every check passed, 1 with the reason otherwise.
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

import { Webhook, WebhookVerificationError } from "standardwebhooks";

import { createAxClient, type CallbackBody } from "../src/index.js";

/** Received is one request the callback receiver got. */
interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** Deadline bounds each wait: the run, then the callback. */
const deadlineMs = 60_000;

function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set`);
  }
  return value;
}

/**
 * startReceiver listens on 127.0.0.1 (a free port) and answers 204 to
 * every POST; received resolves with the first one.
 */
async function startReceiver() {
  let resolve: (r: Received) => void = () => {};
  const received = new Promise<Received>((r) => (resolve = r));
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(204).end();
      if (req.method === "POST") {
        resolve({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/callbacks/ax`, received, close: () => server.close() };
}

/** within rejects when promise takes longer than ms. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** header returns the one value of a request header. */
function header(headers: IncomingHttpHeaders, name: string): string {
  const value = headers[name];
  assert.equal(typeof value, "string", `header ${name}: ${String(value)}`);
  return value as string;
}

async function main() {
  const ax = createAxClient(env("AX_SERVER"), { apiKey: env("AX_API_KEY") });
  const receiver = await startReceiver();
  try {
    // A shell job with a callback to the receiver; its signing secret is
    // shown once, in the answer to the create.
    const created = await ax.POST("/v1/jobs", {
      body: {
        name: "ts-client-hello",
        trigger: { kind: "manual" },
        executor: { kind: "shell", command: "echo hello" },
        callback: { url: receiver.url },
      },
    });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    const job = created.data!;
    assert.ok(job.id, "the job has an id");
    assert.match(job.signing_secret ?? "", /^whsec_/, "the create shows the signing secret");

    const triggered = await ax.POST("/v1/jobs/{id}/trigger", { params: { path: { id: job.id } } });
    assert.equal(triggered.response.status, 202, JSON.stringify(triggered.error));
    const execID = triggered.data!.id;

    // Long-poll the execution until it ends.
    const ended = ["succeeded", "failed", "timed_out", "cancelled"];
    const start = Date.now();
    let execution = triggered.data!;
    while (!ended.includes(execution.state)) {
      assert.ok(Date.now() - start < deadlineMs, `execution ${execID} still ${execution.state}`);
      const got = await ax.GET("/v1/executions/{id}", {
        params: { path: { id: execID }, query: { wait: "10s" } },
      });
      assert.equal(got.response.status, 200, JSON.stringify(got.error));
      execution = got.data!;
    }
    assert.equal(execution.state, "succeeded", JSON.stringify(execution));

    // Its output, as the agent recorded it.
    const logs = await ax.GET("/v1/executions/{id}/logs", {
      params: { path: { id: execID }, query: { kind: "log" } },
    });
    assert.equal(logs.response.status, 200, JSON.stringify(logs.error));
    const output = (logs.data!.events ?? []).map((e) => e.message ?? "").join("");
    assert.match(output, /hello/, `the run printed hello: ${JSON.stringify(output)}`);

    // The callback: signed with the job's secret over the exact body.
    const cb = await within(receiver.received, deadlineMs, "the callback");
    const wh = new Webhook(job.signing_secret!);
    const headers = {
      "webhook-id": header(cb.headers, "webhook-id"),
      "webhook-timestamp": header(cb.headers, "webhook-timestamp"),
      "webhook-signature": header(cb.headers, "webhook-signature"),
    };
    const payload = wh.verify(cb.body, headers) as CallbackBody;
    assert.equal(headers["webhook-id"], execID, "webhook-id is the execution id");
    assert.equal(payload.type, "execution.ended");
    assert.equal(payload.execution_id, execID);
    assert.equal(payload.job_id, job.id);
    assert.equal(payload.state, "succeeded");
    assert.equal(payload.shards.total, 1);

    // A changed body or another secret fails verification.
    assert.throws(() => wh.verify(cb.body.replace("succeeded", "failed"), headers), WebhookVerificationError);
    const other = new Webhook(Buffer.alloc(32, 7).toString("base64"));
    assert.throws(() => other.verify(cb.body, headers), WebhookVerificationError);

    // The server saw the receiver's 204: the callback is delivered.
    for (;;) {
      const got = await ax.GET("/v1/executions/{id}", { params: { path: { id: execID } } });
      assert.equal(got.response.status, 200, JSON.stringify(got.error));
      if (got.data!.callback?.state === "delivered") {
        break;
      }
      assert.ok(Date.now() - start < 2 * deadlineMs, `callback ${JSON.stringify(got.data!.callback)}`);
      await new Promise((r) => setTimeout(r, 100));
    }

    console.log(`ok: job ${job.id}, execution ${execID} succeeded, said hello, callback verified`);
  } finally {
    receiver.close();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
