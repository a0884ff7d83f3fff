// Run a shell job on an ax agent, wait for it, print its output and verify
// the signed callback it sends when it ends. Needs a server and an agent
// that runs shell tasks (make run prints both commands), then:
//
//   AX_SERVER=http://127.0.0.1:8080 AX_API_KEY=ax_… node example.mjs
import { createServer } from "node:http";

import { createAxClient, verifyCallback } from "@ax-scheduler/client";

const ax = createAxClient(process.env.AX_SERVER ?? "http://127.0.0.1:8080", { apiKey: process.env.AX_API_KEY });

// A receiver for the callback on a free port of this machine: resolves
// with the first request's raw body and headers.
let resolveCallback;
const callback = new Promise((resolve) => (resolveCallback = resolve));
const receiver = createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    res.writeHead(204).end();
    resolveCallback({ body: Buffer.concat(chunks).toString("utf8"), headers: req.headers });
  });
});
await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));

// A job to run on demand; the answer to the create holds its signing
// secret, shown only then.
const { data: job, error } = await ax.POST("/v1/jobs", {
  body: {
    name: `example-${process.pid}`,
    group: "examples",
    trigger: { kind: "manual" },
    executor: { kind: "shell", command: "echo hello from the TypeScript example" },
    callback: { url: `http://127.0.0.1:${receiver.address().port}/callbacks` },
  },
});
if (error) throw new Error(`create job: ${error.title}: ${error.detail}`);

try {
  // Run it now, then wait (the server answers as soon as the run ends, at most 60 s).
  const { data: run } = await ax.POST("/v1/jobs/{id}/trigger", { params: { path: { id: job.id } } });
  const { data: ended } = await ax.GET("/v1/executions/{id}", {
    params: { path: { id: run.id }, query: { wait: "60s" } },
  });
  console.log(`run ${ended.id}: ${ended.state}`);

  const { data: logs } = await ax.GET("/v1/executions/{id}/logs", {
    params: { path: { id: run.id }, query: { kind: "log" } },
  });
  for (const event of logs.events ?? []) process.stdout.write(`  ${event.message}`);

  // Verify before trusting: the signature under the job's secret, fresh.
  const { body, headers } = await callback;
  const summary = verifyCallback(job.signing_secret, body, headers);
  console.log(`callback ${headers["webhook-id"]} verified: ${summary.job_group}/${summary.job_name} ${summary.state}`);
} finally {
  await ax.DELETE("/v1/jobs/{id}", { params: { path: { id: job.id } } });
  receiver.close();
}
