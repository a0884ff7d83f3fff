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
// What the home page's charts must show of the runs and tasks the Go test
// seeded: runs by state, (minute, state) bars, each job's finished hours,
// pending tasks by "class/priority".
const homeWant = JSON.parse(env("AX_HOME_EXPECT"));
const jobNames = { [job]: "billing/report", [slowJob]: "ops/slow", [notifyJob]: "ops/notify" };

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

  step("read key: the home page's charts, drawn by the server as SVG");
  await reader.goto(`${base}/ui/`);
  const series = await reader.$$eval("#runs-chart g.series", (gs) => gs.map((g) => {
    const bars = [...g.querySelectorAll("rect.bar")];
    return { state: g.getAttribute("data-state"), total: Number(g.getAttribute("data-total")), bars: bars.length,
      sum: bars.reduce((n, r) => n + Number(r.getAttribute("data-runs")), 0),
      inside: bars.every((r) => Number(r.getAttribute("x")) >= 56 && Number(r.getAttribute("height")) > 0) };
  }));
  assert.deepEqual(series.map((x) => x.state).sort(), Object.keys(homeWant.states).sort(), "a series per state seeded");
  for (const x of series) {
    assert.equal(x.total, homeWant.states[x.state], `runs ${x.state}: ${JSON.stringify(x)}`);
    assert.equal(x.sum, homeWant.states[x.state], `the bars of ${x.state} add up to its runs`);
    assert.ok(x.inside, `the bars of ${x.state} are drawn in the plot`);
  }
  assert.equal(series.reduce((n, x) => n + x.bars, 0), homeWant.bars, "a bar per minute and state");
  for (const [state, n] of Object.entries(homeWant.states)) {
    assert.equal(await text(reader, `#runs-legend [data-state="${state}"]`), `${state} ${n}`, "the legend counts it");
  }
  const lines = await reader.$$eval("#durations-chart g.series", (gs) => gs.map((g) => ({
    job: g.getAttribute("data-job"), hours: Number(g.getAttribute("data-hours")),
    p50: [...g.querySelectorAll("circle[data-stat=p50]")].map((c) => Number(c.getAttribute("data-runs"))),
    p95: g.querySelectorAll("circle[data-stat=p95]").length,
    polylines: g.querySelectorAll("polyline").length })));
  assert.deepEqual(lines.map((l) => l.job).sort(), Object.keys(homeWant.hours).map((id) => jobNames[id]).sort());
  for (const [id, hours] of Object.entries(homeWant.hours)) {
    const l = lines.find((x) => x.job === jobNames[id]);
    assert.equal(l.hours, Object.keys(hours).length, `${l.job}: a point per hour with finished runs`);
    assert.equal(l.p50.length, l.hours);
    assert.equal(l.p95, l.hours);
    assert.equal(l.polylines, 2, "a p50 and a p95 line");
    assert.deepEqual(l.p50.slice().sort((a, b) => a - b), Object.values(hours).sort((a, b) => a - b), `${l.job}: runs per hour`);
  }
  const queue = await reader.$$eval("#queue-chart g.row", (rows) => Object.fromEntries(rows.map((r) =>
    [`${r.getAttribute("data-class")}/${r.getAttribute("data-priority")}`, Number(r.getAttribute("data-tasks"))])));
  assert.deepEqual(queue, homeWant.queue, "pending tasks by class and priority");
  const agentRows = await reader.$$eval("#agents-chart g.row", (rows) => rows.map((r) =>
    [r.getAttribute("data-agent"), Number(r.getAttribute("data-capacity"))]));
  assert.deepEqual(agentRows.map(([name]) => name), ["console-runner", "console-spare"]);
  assert.ok(agentRows.every(([, capacity]) => capacity > 0), "each agent's capacity is drawn");
  await shot(reader, "read-home");

  step("read key: the executions filter takes a job's name");
  for (const ref of ["billing/report", "report"]) {
    await reader.goto(`${base}/ui/executions?job=${encodeURIComponent(ref)}&state=succeeded`);
    const jobsShown = await reader.$$eval("#executions tbody tr td:nth-child(2)", (cells) => cells.map((c) => c.textContent.trim()));
    assert.ok(jobsShown.length > 0 && jobsShown.every((j) => j === "billing/report"), `${ref}: ${jobsShown}`);
  }
  await reader.click("#executions tbody tr a");
  await reader.waitForURL(/\/ui\/executions\/[0-9a-f-]{36}$/);
  assert.equal(await text(reader, "#exec-state"), "succeeded");
  assert.equal(await reader.locator("#rerun-execution").count(), 0, "no re-run for a read key");
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
  const classCells = await reader.$$eval(`tr[data-class="${rateClass}"] td`, (cells) => cells.map((c) => c.textContent.trim()));
  assert.ok(!(await reader.locator("#classes").textContent()).includes("%!"), "no Go format error on the classes page");
  assert.match(classCells[3], /^\d+(\.\d)?$/, `tokens as a number: ${classCells}`);
  assert.match(classCells[5], /^(—|-?\d+(\.\d)? s)$/, `oldest wait as seconds or —: ${classCells}`);
  await shot(reader, "read-classes");
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
  assert.equal(await text(admin, "#trigger"), "every day at 03:00 Europe/Paris (cron 0 3 * * *)", "the trigger in words");
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

  step("admin: the run's times in the job's timezone, UTC on hover; log lines timed");
  assert.equal(await text(admin, "#exec-zone"), "Europe/Paris");
  const started = admin.locator("#exec-started time");
  const iso = await started.getAttribute("datetime");
  const paris = new Intl.DateTimeFormat("sv-SE", { timeZone: "Europe/Paris", year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false }).format(new Date(iso));
  assert.match(await started.textContent(), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d CES?T$/);
  assert.equal((await started.textContent()).slice(0, 19), paris, "the start in Paris time");
  assert.equal(await started.getAttribute("title"), `${new Date(iso).toISOString().slice(0, 19).replace("T", " ")}Z (UTC)`);
  const logTimes = await admin.$$eval("#logs time", (ts) => ts.map((t) => [t.textContent, t.title]));
  assert.ok(logTimes.length >= 5, `a time on each log line: ${JSON.stringify(logTimes)}`);
  for (const [local, utc] of logTimes) {
    assert.match(local, /^\d\d:\d\d:\d\d\.\d{3}$/);
    assert.match(utc, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z$/);
  }
  await shot(admin, "execution-timezone");

  step("admin: why did it run then? The answer at the top of the job's page");
  await admin.click("#explain-run");
  await admin.waitForURL(/\/ui\/jobs\/.*\?explain=/);
  const answer = await admin.locator("#explanation, #explanation-error").first().boundingBox();
  assert.ok(answer && answer.y + answer.height <= 900, `the answer is in the first screen: ${JSON.stringify(answer)}`);
  await shot(admin, "job-explain");

  step("admin: re-run the ended run");
  const original = runURL.match(/executions\/([0-9a-f-]{36})/)[1];
  await admin.goto(`${base}/ui/executions/${original}`);
  await admin.click("#rerun-execution");
  await admin.waitForURL(/\/ui\/executions\/[0-9a-f-]{36}\?done=rerun$/);
  const rerun = admin.url().match(/executions\/([0-9a-f-]{36})/)[1];
  assert.notEqual(rerun, original, "a new run");
  assert.equal(await text(admin, "#done"), "Re-run started.");
  assert.equal(await admin.locator("#rerun-of").getAttribute("href"), `/ui/executions/${original}`, "linked by rerun_of");
  assert.match(await admin.locator("dl.facts").textContent(), /"who":\s*"console"/, "with the original's params");
  await shot(admin, "rerun");
  await reloadUntil(admin, async () => (await text(admin, "#exec-state")) === "succeeded" &&
    (await admin.locator("#logs[data-live]").count()) === 0, "the re-run to succeed", 60_000);
  await admin.goto(`${base}/ui/executions/${original}`);
  assert.equal(await text(admin, "#reruns"), rerun, "the original lists its re-run");
  await shot(admin, "rerun-original");

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
