// Browser test of the ax web console, run by tests/e2e/console_test.go
// (TestWebConsole) against a real `ax serve` with real agents: Chromium
// headless, driven by Playwright, logs in with a read key and then an
// admin key and goes through the console's flows, saving a screenshot of
// every page it sees to AX_SHOTS. Any failed check throws: node exits
// non-zero and the Go test fails with this program's output.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const base = env("AX_URL");
const shots = env("AX_SHOTS");
const job = env("AX_JOB_ID"); // cron job whose runs print three lines two seconds apart
const slowJob = env("AX_SLOW_JOB_ID"); // runs long: cancelled from the console
const notifyJob = env("AX_NOTIFY_JOB_ID"); // its callback fails until the receiver is healed
const receiver = env("AX_RECEIVER_URL");
const rateClass = env("AX_CLASS");
const drainAgent = env("AX_DRAIN_AGENT");

let shotCount = 0;
const shot = async (page, name) => {
  const file = path.join(shots, `${String(++shotCount).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`screenshot ${file}`);
};
const step = (msg) => console.log(`--- ${msg}`);
const text = async (page, selector) => (await page.locator(selector).textContent())?.trim();

// waitText waits until the element's text is want.
const waitText = (page, selector, want, timeout = 30_000) =>
  page.waitForFunction(([s, w]) => document.querySelector(s)?.textContent.trim() === w, [selector, want], { timeout });

// reloadUntil reloads the page until check passes (for what the page does
// not follow live, such as a callback's state).
const reloadUntil = async (page, check, what, timeout = 30_000) => {
  const end = Date.now() + timeout;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await page.waitForTimeout(500);
    await page.reload();
  }
};

const browser = await chromium.launch({
  executablePath: env("AX_CHROMIUM"),
  headless: true,
  // As root (CI) Chromium's sandbox cannot start.
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
const problems = [];
const newPage = async () => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  // The console's own script and styles must pass its CSP; a page error
  // or a refused resource fails the test at the end.
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error" && !/status of 403/.test(m.text())) problems.push(`console: ${m.text()}`); });
  return page;
};
const login = async (page, key) => {
  await page.goto(`${base}/ui/jobs`);
  assert.match(page.url(), /\/ui\/login\?next=/, "a visitor without a session is sent to the login form");
  await page.fill("input[name=key]", key);
  await page.click("button[type=submit]");
  await page.waitForURL(`${base}/ui/jobs`);
};

try {
  // ---------------------------------------------------------------- read key
  step("read key: logs in, sees, cannot act");
  const reader = await newPage();
  await login(reader, env("AX_READ_KEY"));
  assert.match(await text(reader, "#whoami"), /\(read\)$/);
  assert.equal(await reader.evaluate(() => document.cookie), "", "the session cookie is not readable by scripts");
  await shot(reader, "read-jobs");
  await reader.goto(`${base}/ui/jobs/${job}`);
  assert.equal(await reader.locator("#job-actions").count(), 0, "a read key is shown no actions");
  assert.equal(await reader.locator("#next-fires tbody tr").count(), 5);
  await shot(reader, "read-job");
  // Posting an action anyway, as a form of this page with its token: 403.
  const [refused] = await Promise.all([
    reader.waitForNavigation(),
    reader.evaluate((action) => {
      const f = document.createElement("form");
      f.method = "post";
      f.action = action;
      const csrf = document.querySelector("input[name=csrf]").cloneNode();
      f.appendChild(csrf);
      document.body.appendChild(f);
      f.submit();
    }, `/ui/jobs/${job}/pause`),
  ]);
  assert.equal(refused.status(), 403);
  assert.match(await text(reader, "#problem-detail"), /lacks scope submit/);
  await shot(reader, "read-refused");
  await reader.goto(`${base}/ui/executions`);
  await shot(reader, "read-executions");
  await reader.goto(`${base}/ui/agents`);
  assert.equal(await reader.locator("[data-role=drain]").count(), 0, "no drain for a read key");
  await reader.goto(`${base}/ui/classes`);
  assert.equal(await reader.locator("[data-role=degrade]").count(), 0, "no degrade for a read key");
  await reader.goto(`${base}/ui/cron?cron=${encodeURIComponent("30 2 * * *")}&timezone=Europe%2FBerlin&count=5`);
  assert.equal(await reader.locator("#cron-fires tbody tr").count(), 5);
  await shot(reader, "read-cron");

  // --------------------------------------------------------------- admin key
  step("admin: the job's next fire times");
  const admin = await newPage();
  await login(admin, env("AX_ADMIN_KEY"));
  assert.match(await text(admin, "#whoami"), /\(admin\)$/);
  await admin.goto(`${base}/ui/jobs?q=report`);
  assert.equal(await admin.locator("#jobs tbody tr").count(), 1, "the name filter finds the job");
  assert.equal(await admin.locator("#jobs .fires div").count(), 5, "the list shows its next 5 fires");
  await shot(admin, "jobs");
  await admin.goto(`${base}/ui/jobs/${job}`);
  assert.match(await text(admin, "#trigger"), /^cron 0 3 \* \* \* in Europe\/Paris/);
  const fires = admin.locator("#next-fires tbody tr");
  assert.equal(await fires.count(), 5);
  assert.match(await fires.first().locator("td").first().textContent(), /T03:00:00\+0[12]:00/, "local times");
  assert.match(await fires.first().locator("td").last().textContent(), /0[12]:00:00Z/, "UTC times");
  await shot(admin, "job");

  step("admin: trigger, logs live, succeeded");
  await admin.fill("textarea[name=params]", '{"who": "console"}');
  await admin.click("#trigger-job");
  await admin.waitForURL(/\/ui\/executions\/[0-9a-f-]{36}\?done=triggered$/);
  const runURL = admin.url();
  const atLoad = await admin.evaluate(() => { window.axNotReloaded = true; return document.getElementById("logs").textContent; });
  assert.ok(!atLoad.includes("report line 2"), "the second line is printed two seconds after the first");
  await admin.waitForFunction(() => document.getElementById("logs").textContent.includes("report line 2"));
  // The second line arrived while the run went on, through the stream:
  // the page was not reloaded and the run has four more seconds to go.
  assert.equal(await admin.evaluate(() => window.axNotReloaded), true, "the line came live, not with a reload");
  // Running, unless a loaded machine delivered the line after the run's
  // last four seconds (seen in CI): the page has not reloaded yet either way.
  assert.match(await text(admin, "#exec-state"), /^(running|succeeded)$/);
  await shot(admin, "execution-running");
  await waitText(admin, "#exec-state", "succeeded");
  await admin.waitForFunction(() => document.getElementById("logs").textContent.includes("report line 3"));
  await shot(admin, "execution-succeeded");
  // The page reloads itself once the run has ended: the finished page.
  await admin.waitForFunction(() => window.axNotReloaded === undefined);
  await admin.waitForLoadState();
  assert.equal(await text(admin, "#shard-0-state"), "succeeded");
  const shard = await admin.$$eval("#shards tbody tr td", (cells) => cells.map((c) => c.textContent.trim()));
  assert.match(shard[2], /^console-(runner|spare)$/, "the shard names its agent");
  assert.match(shard[4], /^[5-9](\.\d+)?s$/, `the shard ran about 6 s, from lease to result: ${shard}`);
  assert.match(await admin.locator("dl.facts").textContent(), /"who":\s*"console"/, "the run has the params given");

  step("admin: pause and resume");
  await admin.goto(`${base}/ui/jobs/${job}`);
  await admin.click("#pause-job");
  await admin.waitForURL(/done=paused/);
  await admin.locator("#job-paused").waitFor();
  assert.equal(await text(admin, "#done"), "Job paused.");
  await shot(admin, "job-paused");
  await admin.click("#resume-job");
  await admin.waitForURL(/done=resumed/);
  await admin.locator("#job-active").waitFor();

  step("admin: cancel a running execution");
  await admin.goto(`${base}/ui/jobs/${slowJob}`);
  await admin.click("#trigger-job");
  await admin.waitForURL(/\/ui\/executions\/.*done=triggered$/);
  await waitText(admin, "#exec-state", "running");
  await admin.click("#cancel-execution");
  await admin.waitForURL(/done=cancelled/);
  // Until the page is the ended run's, not a live page that shows the end
  // and reloads itself 1.5 s later: that reload aborted the next step's
  // navigation on a loaded machine.
  await reloadUntil(admin, async () => (await text(admin, "#exec-state")) === "cancelled" &&
    (await admin.locator("#logs[data-live]").count()) === 0, "the run to end cancelled");
  await shot(admin, "execution-cancelled");

  step("admin: redeliver a failed callback");
  await admin.goto(`${base}/ui/jobs/${notifyJob}`);
  await admin.click("#trigger-job");
  await admin.waitForURL(/\/ui\/executions\/.*done=triggered$/);
  await reloadUntil(admin, async () => (await admin.locator("#callback-state").textContent().catch(() => "")) === "callback_failed",
    "the callback to fail for good");
  await shot(admin, "callback-failed");
  const healed = await fetch(`${receiver}/heal`, { method: "POST" });
  assert.equal(healed.status, 204);
  await admin.click("#redeliver-callback");
  await admin.waitForURL(/done=redelivered/);
  await reloadUntil(admin, async () => (await text(admin, "#callback-state")) === "delivered", "the redelivery");
  const attempts = await admin.$$eval("#callback-attempts tbody tr",
    (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent.trim())));
  assert.ok(attempts.some(([delivery, attempt, , , status]) => delivery === "2" && attempt === "1" && status === "200"),
    `delivery 2 answered 200: ${JSON.stringify(attempts)}`);
  assert.ok(attempts.some(([delivery, , , , status]) => delivery === "1" && status === "500"), "delivery 1 had failed");
  await shot(admin, "callback-redelivered");

  step("admin: degrade and restore a class");
  await admin.goto(`${base}/ui/classes`);
  const row = admin.locator(`tr[data-class="${rateClass}"]`);
  await row.locator("input[name=min_priority]").fill("50");
  await row.locator("[data-role=degrade]").click();
  await admin.waitForURL(/done=degraded/);
  assert.match(await row.locator("[data-role=floor]").textContent(), /^50 /);
  await shot(admin, "class-degraded");
  await row.locator("[data-role=restore]").click();
  await admin.waitForURL(/done=restored/);
  assert.equal((await row.locator("[data-role=floor]").textContent()).trim(), "none");
  await shot(admin, "class-restored");

  step("admin: drain an agent");
  await admin.goto(`${base}/ui/agents`);
  await shot(admin, "agents");
  const agent = admin.locator(`tr[data-agent="${drainAgent}"]`);
  await agent.locator("[data-role=drain]").click();
  await admin.waitForURL(/done=drained/);
  await reloadUntil(admin, async () => /drained/.test(await agent.textContent()), "the drain to show");
  assert.equal(await agent.locator("[data-role=drain]").count(), 0);
  await shot(admin, "agent-drained");

  step("admin: executions list and cron playground");
  await admin.goto(`${base}/ui/executions?state=succeeded`);
  assert.ok((await admin.locator("#executions tbody tr a").count()) >= 1);
  await shot(admin, "executions");
  await admin.goto(`${base}/ui/cron?cron=${encodeURIComponent("0 9 * * 1-5")}&timezone=America%2FNew_York`);
  assert.equal(await admin.locator("#cron-fires tbody tr").count(), 10);
  await shot(admin, "cron");

  step("admin: log out");
  await admin.click("header .logout button");
  await admin.waitForURL(`${base}/ui/login`);
  await admin.goto(runURL);
  assert.match(admin.url(), /\/ui\/login\?next=/, "logged out");

  assert.deepEqual(problems, [], "no page errors, nothing refused by the CSP");
  console.log("console browser test passed");
} finally {
  await browser.close();
}
