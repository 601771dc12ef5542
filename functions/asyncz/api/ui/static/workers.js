// The Workers page: the live workers (GET /workers) and what each runs now (job, task,
// attempt, elapsed time, progress), refreshed with the rest of the dashboard. Loaded before
// app.js, which routes #/workers here; it uses app.js's el(), api(), when() and age().
"use strict";

function workersPage() {
  const workers = el("tbody");
  const running = el("tbody");
  const note = el("p", { class: "muted" });
  const frame = el("div", {}, el("h1", {}, "Workers"),
    el("p", { class: "muted" }, "Live workers (their heartbeat in Redis) and the attempts " +
      "each runs now."), note,
    el("table", { id: "workers" }, el("thead", {}, el("tr", {},
      ["worker", "since", "presence until", "running"].map((h) => el("th", {}, h)))), workers),
    el("h2", {}, "Running now"),
    el("table", { id: "running" }, el("thead", {}, el("tr", {},
      ["job", "task", "queue", "attempt", "elapsed", "progress", "worker"]
        .map((h) => el("th", {}, h)))), running));
  async function refresh(live) {
    const view = await api("workers");
    if (!live()) return;
    const all = [...view.workers, ...view.unknown_workers.map((w) => ({ ...w, unknown: true }))];
    note.textContent = view.presence_available ? "" :
      "Redis cannot be reached: attempts are listed without their workers' presence.";
    workers.replaceChildren(...view.workers.map((w) => el("tr", { "data-worker": w.worker_id },
      el("td", { class: "mono" }, w.worker_id), el("td", {}, when(w.since)),
      el("td", {}, when(w.presence_until)), el("td", { class: "num" }, w.running.length))));
    if (!view.workers.length) workers.append(el("tr", {}, el("td", { colspan: 4,
      class: "muted" }, "no live worker")));
    const rows = all.flatMap((w) => w.running.map((j) => el("tr", { "data-job": j.job_id },
      el("td", { class: "mono" }, el("a", { href: "#/jobs/" + j.job_id }, j.job_id.slice(0, 8))),
      el("td", {}, j.task), el("td", {}, j.queue), el("td", { class: "num" }, j.attempt),
      el("td", { class: "num elapsed" }, age(j.elapsed_seconds)),
      el("td", {}, j.progress === null || j.progress === undefined ? "—" :
        Math.round(j.progress * 100) + "%" + (j.progress_message ? " " + j.progress_message : "")),
      el("td", { class: w.unknown ? "mono error" : "mono" },
        w.worker_id + (w.unknown ? " (no presence)" : "")))));
    running.replaceChildren(...rows);
    if (!rows.length) running.append(el("tr", {}, el("td", { colspan: 7, class: "muted" },
      "nothing is running")));
  }
  return { frame, refresh };
}
