// ax console: follows a running execution's logs (server-sent events from
// /ui/executions/{id}/live) and reloads the page once the run has ended.
// Everything shown is set as text, never as HTML.
"use strict";
(function () {
  const logs = document.getElementById("logs");
  if (!logs || !logs.dataset.live || !window.EventSource) return;
  const stream = new EventSource(logs.dataset.live);
  const state = document.getElementById("exec-state");
  const line = (cls, d, text) => {
    const span = document.createElement("span");
    span.className = cls;
    const at = document.createElement("time");
    at.textContent = d.at;
    at.title = d.at_utc;
    span.appendChild(at);
    span.appendChild(document.createTextNode(" " + text));
    logs.appendChild(span);
    logs.scrollTop = logs.scrollHeight;
  };
  stream.addEventListener("log", (e) => {
    const d = JSON.parse(e.data);
    if (d.kind === "state") {
      line("state", d, `[${d.shard}] ${d.state}${d.agent ? " on " + d.agent : ""}${d.text ? ": " + d.text : ""}\n`);
      const cell = document.getElementById(`shard-${d.shard}-state`);
      if (cell) { cell.textContent = d.state; cell.className = "state " + d.state; }
    } else {
      line("log", d, `[${d.shard}] ${d.text}`);
    }
  });
  stream.addEventListener("execution", (e) => {
    const d = JSON.parse(e.data);
    if (state) { state.textContent = d.state; state.className = "state " + d.state; }
  });
  stream.addEventListener("end", (e) => {
    stream.close();
    const d = JSON.parse(e.data);
    if (state) { state.textContent = d.state; state.className = "state " + d.state; }
    const note = document.getElementById("live-note");
    if (note) note.textContent = "run ended";
    // The final page has the shards' durations and the callback.
    setTimeout(() => window.location.reload(), 1500);
  });
  stream.addEventListener("failure", () => stream.close());
})();
