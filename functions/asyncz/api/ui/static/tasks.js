// The Tasks page: how each task did over the last hour (GET /stats/tasks: runs, failures,
// retries, run time and queue wait percentiles, per task and queue), refreshed with the rest
// of the dashboard; and every registered task (GET /tasks) with its defaults and the JSON
// Schemas of its payload and result. Loaded before app.js, which routes #/tasks here; it uses
// app.js's el() and api() when the page is opened. The list changes only with a deploy, so
// it is fetched once per visit: the auto refresh does not close an opened schema.
"use strict";

function tasksPage() {
  const body = el("tbody");
  const schemas = el("div", { id: "task-schemas" });
  const figures = el("tbody");
  const frame = el("div", {}, el("h1", {}, "Tasks"),
    el("h2", {}, "The last hour"),
    el("table", { id: "task-figures" }, el("thead", {}, el("tr", {},
      ["task", "queue", "runs", "completed", "failures", "retries", "run p50", "run p95",
       "wait p50", "wait p95"].map((h) => el("th", {}, h)))), figures),
    el("h2", {}, "Registered"),
    el("p", { class: "muted" }, "What POST /jobs accepts: a typed task's payload is checked " +
      "against its schema at submit (422 invalid_payload)."),
    el("table", { id: "tasks" }, el("thead", {}, el("tr", {},
      ["task", "typed", "queue", "retries", "timeout", "schedule", "description"]
        .map((h) => el("th", {}, h)))), body),
    el("h2", {}, "Schemas"), schemas);
  let loaded = false;
  async function refresh(live) {
    const stats = await api("stats/tasks");
    if (!live()) return;
    const ms = (v) => (v === null || v === undefined ? "—" : v + " ms");
    figures.replaceChildren(...stats.items.map((f) => el("tr", { "data-task": f.task },
      el("td", {}, f.task), el("td", {}, f.queue),
      ...[f.runs, f.completed, f.failures, f.retries].map((n) => el("td", { class: "num" }, n)),
      ...[f.run_p50_ms, f.run_p95_ms, f.wait_p50_ms, f.wait_p95_ms]
        .map((v) => el("td", { class: "num" }, ms(v))))));
    if (!stats.items.length) figures.append(el("tr", {}, el("td", { colspan: 10,
      class: "muted" }, "no attempt finished in the last hour")));
    if (loaded) return;
    const list = await api("tasks");
    if (!live()) return;
    loaded = true;
    body.replaceChildren(...list.items.map((t) => el("tr", { "data-task": t.name },
      el("td", {}, el("a", { href: "#/tasks", onclick: (e) => { e.preventDefault();
        show(t.name); } }, t.name)),
      el("td", {}, t.typed ? "yes" : "no"), el("td", {}, t.queue),
      el("td", { class: "num" }, t.max_retries), el("td", { class: "num" }, t.timeout_seconds + " s"),
      el("td", {}, t.schedule ? `${t.schedule.schedule} (${t.schedule.timezone})` : "—"),
      el("td", {}, t.description || ""))));
    schemas.replaceChildren(...list.items.map((t) => el("details", { id: "task-" + t.name },
      el("summary", {}, t.name, t.is_async ? " · async" : "", t.takes_context ? " · context" : ""),
      el("h3", {}, "Payload"), el("pre", { class: "payload-schema" },
        JSON.stringify(t.payload_schema, null, 2)),
      el("h3", {}, "Result"), el("pre", { class: "result-schema" },
        JSON.stringify(t.result_schema, null, 2)))));
  }
  function show(name) {
    const box = document.getElementById("task-" + name);
    if (box) { box.open = true; box.scrollIntoView(); }
  }
  return { frame, refresh };
}
