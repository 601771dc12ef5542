// AsyncZ dashboard: no framework, no build step. Every value from the API reaches the page as
// a text node or an attribute set through the DOM (never innerHTML), so a job's payload or
// error is shown as text and can run nothing. URLs are relative: the page works at /ui and
// under API Gateway's /<stage>/ui alike. The key lives in sessionStorage (this tab only).
"use strict";

const KEY = "asyncz.api-key";
const REFRESH_MS = 5000;
const MAX_REFRESH_MS = 60000; // after failures the refresh backs off up to this
const SERIES_REFRESH_MS = 30000;
const STATUSES = ["waiting", "queued", "processing", "suspended", "completed", "dead",
  "cancelled"];
let timer = null;
let me = { name: "", scopes: [] }; // the signed-in key (GET /whoami): what to offer
let delay = REFRESH_MS;
let generation = 0; // a page rendered for an older route ignores its late answers

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || "HTTP " + status);
    this.status = status;
  }
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

async function api(path, options) {
  const opts = options || {};
  const headers = { "x-api-key": sessionStorage.getItem(KEY) || "" };
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, {
    method: opts.method || "GET",
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    cache: "no-store",
    credentials: "omit",
  });
  const text = await res.text();
  const body = text ? JSON.parse(text) : null;
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "overview";
  const [path, query] = hash.split("?");
  return { parts: path.split("/"), params: new URLSearchParams(query || "") };
}

function go(path, params) {
  const q = params ? new URLSearchParams(
    Object.entries(params).filter(([, v]) => v)).toString() : "";
  location.hash = "#/" + path + (q ? "?" + q : "");
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "—";
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 90) return Math.round(seconds) + " s";
  if (seconds < 5400) return Math.round(seconds / 60) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function statusBadge(status) {
  return el("span", { class: "status status-" + status }, status);
}

// An action the key may not do is not offered; a refused one still shows the API's message.
function may(scope) {
  return me.scopes.includes(scope);
}

function flash(message) {
  const box = document.getElementById("flash");
  box.textContent = message || "";
  box.hidden = !message;
}

// ---- sign-in ----------------------------------------------------------------------------

function showSignIn(message) {
  sessionStorage.removeItem(KEY);
  clearTimeout(timer);
  timer = null;
  document.getElementById("page").replaceChildren();
  document.getElementById("signin").hidden = false;
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  document.getElementById("signin-error").textContent = message || "";
  flash("");
}

async function signIn(event) {
  event.preventDefault();
  const input = document.getElementById("key");
  sessionStorage.setItem(KEY, input.value.trim());
  input.value = "";
  start();
}

async function start() {
  try {
    me = await api("whoami");
  } catch (err) {
    showSignIn(err.status === 401 ? "That API key was refused: check it and try again."
                                  : "Could not reach the API: " + err.message);
    return;
  }
  document.getElementById("whoami").textContent = `${me.name} (${me.scopes.join(", ")})`;
  document.getElementById("signin").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = false;
  delay = REFRESH_MS;
  render(true).then(schedule);
}

// The refresh asks only for what the page shows, never while the tab is hidden (a
// forgotten tab costs the database nothing), and backs off while requests fail.
function schedule() {
  clearTimeout(timer);
  timer = null;
  if (document.hidden || !sessionStorage.getItem(KEY)) return;
  timer = setTimeout(async () => {
    const ok = await render(false);
    delay = ok ? REFRESH_MS : Math.min(MAX_REFRESH_MS, delay * 2);
    schedule();
  }, delay);
}

document.addEventListener("visibilitychange", () => {
  if (document.hidden) {
    clearTimeout(timer);
    timer = null;
  } else if (sessionStorage.getItem(KEY) && !document.getElementById("nav").hidden) {
    render(false).then(schedule); // back in view: fresh data at once
  }
});

// ---- pages ------------------------------------------------------------------------------

// A page is a frame (built once per route: headings, filter forms) and a refresh that only
// replaces its data, so the auto refresh never resets what the user is typing.
let current = null;

async function render(routeChanged) {
  if (!sessionStorage.getItem(KEY)) return showSignIn();
  const r = route();
  const name = r.parts[0] === "jobs" && r.parts[1] ? "job" : r.parts[0];
  for (const a of document.querySelectorAll("#nav a[data-page]")) {
    a.classList.toggle("active", a.dataset.page === (name === "job" ? "jobs" : name));
  }
  if (routeChanged || !current) {
    generation += 1;
    const pages = { overview: overviewPage, jobs: jobsPage, dlq: dlqPage, job: jobPage,
                    audit: auditPage, tasks: tasksPage, workers: workersPage,
                    webhooks: webhooksPage }; // their .js
    const make = pages[name] || overviewPage;
    current = make(r);
    document.getElementById("page").replaceChildren(current.frame);
    flash("");
  }
  const mine = generation;
  try {
    await current.refresh(() => mine === generation);
    document.getElementById("updated").textContent =
      "updated " + new Date().toLocaleTimeString();
    return true;
  } catch (err) {
    if (err.status === 401) {
      showSignIn("Your API key is no longer accepted.");
      return false;
    }
    flash(err.message);
    return false;
  }
}

function overviewPage() {
  const cards = el("div", { class: "cards" });
  const chart = el("div", { class: "card" });
  const queues = el("tbody");
  const limits = el("tbody");
  const frame = el("div", {},
    el("h1", {}, "Overview"), cards,
    el("h2", {}, "Last hour, per minute"), chart,
    el("h2", {}, "Queues"),
    el("table", { id: "queues" },
      el("thead", {}, el("tr", {}, ["queue", ...STATUSES, "ready", "delayed", "oldest queued", ""]
        .map((h, i) => el("th", { class: i ? "num" : null }, h)))),
      queues),
    el("h2", {}, "Limits"),
    el("table", { id: "limits" },
      el("thead", {}, el("tr", {}, ["task", "key", "limits", "running", "waiting"]
        .map((h, i) => el("th", { class: i > 2 ? "num" : null }, h)))),
      limits));
  // The chart's points are minutes: it is fetched every 30 s, the counts every refresh. The
  // chart is asked for only once the counts answered: while the API fails, a refresh sends
  // one request, not two.
  let series = null;
  let seriesAt = 0;
  async function refresh(live) {
    const again = Date.now() - seriesAt >= SERIES_REFRESH_MS;
    const stats = await api("stats");
    const fresh = again ? await api("stats/series") : null;
    if (!live()) return;
    if (fresh) [series, seriesAt] = [fresh, Date.now()];
    const sum = (k) => series.minutes.reduce((n, m) => n + m[k], 0);
    const total = (s) => Object.values(stats.queues).reduce((n, q) => n + q.counts[s], 0);
    // GET /stats' cost estimate: Lambda, API Gateway and logs, no fixed monthly costs
    const usd = (d) => `$${d.toFixed(d < 1 ? 4 : 2)}`;
    const c = stats.cost;
    const cost = c ? `${usd(c.last_hour.dollars)} / ${usd(c.last_day.dollars)}` : "—";
    const note = c ? `estimate at the prices of ${c.prices_of} (${c.api}, ${c.architecture})` : null;
    cards.replaceChildren(
      ...[["live workers", stats.live_workers ?? "—"], ["queued", total("queued")],
          ["processing", total("processing")], ["dead", total("dead")],
          ["completed (1 h)", sum("completed")], ["failed (1 h)", sum("failed")],
          ["est. cost (1 h / 1 d)", cost]]
        .map(([label, value]) => el("div", { class: "card", "data-stat": label,
          title: label.startsWith("est.") ? note : null },
          el("div", { class: "muted" }, label), el("div", { class: "big" }, value))));
    chart.replaceChildren(drawChart(series.minutes));
    queues.replaceChildren(...Object.entries(stats.queues).map(([name, q]) =>
      el("tr", {}, el("td", {}, name),
        ...STATUSES.map((s) => el("td", { class: "num" }, q.counts[s] ?? 0)),
        el("td", { class: "num" }, q.ready ?? "—"), el("td", { class: "num" }, q.delayed ?? "—"),
        el("td", { class: "num" }, age(q.oldest_queued_age_seconds)),
        el("td", {}, el("button", { type: "button", "data-queue": name,
          class: q.paused ? "primary" : "danger", onclick: () => act(q.paused ? "resume" : "pause",
            () => api(`queues/${encodeURIComponent(name)}/${q.paused ? "resume" : "pause"}`,
              { method: "POST" })) }, q.paused ? "Resume" : "Pause")))));
    const terms = (l) => Object.entries(l).map(([k, v]) => `${k} ${v}`).join(", ");
    limits.replaceChildren(...(stats.limits || []).flatMap((t) => [
      el("tr", {}, el("td", {}, t.task), el("td", {}, "—"), el("td", {}, terms(t.limits)),
        el("td", { class: "num" }, t.running), el("td", { class: "num" }, t.waiting)),
      ...t.keys.map((k) => el("tr", {}, el("td", {}, ""), el("td", { class: "mono" }, k.key),
        el("td", {}, ""), el("td", { class: "num" }, k.running),
        el("td", { class: "num" }, k.waiting)))]));
    if (!(stats.limits || []).length) {
      limits.replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no limited task")));
    }
  }
  return { frame, refresh };
}

function drawChart(minutes) {
  const NS = "http://www.w3.org/2000/svg";
  const W = 900, H = 200, L = 40, B = 22, T = 10;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  const max = Math.max(1, ...minutes.flatMap((m) => [m.completed, m.failed, m.dead]));
  const x = (i) => L + (i * (W - L - 10)) / Math.max(1, minutes.length - 1);
  const y = (v) => H - B - ((H - B - T) * v) / max;
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = String(text);
    svg.append(node);
  };
  add("line", { class: "axis", x1: L, y1: H - B, x2: W - 10, y2: H - B });
  add("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B });
  add("text", { x: 4, y: T + 10 }, max);
  add("text", { x: 4, y: H - B }, 0);
  for (const i of [0, 15, 30, 45, minutes.length - 1]) {
    if (!minutes[i]) continue;
    const t = new Date(minutes[i].minute);
    add("text", { x: x(i) - 16, y: H - 6 }, t.toLocaleTimeString([], { hour: "2-digit",
                                                                          minute: "2-digit" }));
  }
  for (const kind of ["completed", "failed", "dead"]) {
    add("polyline", { class: kind, "data-series": kind,
                      points: minutes.map((m, i) => `${x(i)},${y(m[kind])}`).join(" ") });
  }
  const legend = el("div", { class: "legend" },
    ...["completed", "failed", "dead"].map((k) => el("span", { class: k }, "— " + k)));
  return el("div", {}, svg, legend);
}

function filterForm(fields, params, onApply) {
  const inputs = {};
  const controls = fields.map(([name, options]) => {
    inputs[name] = options
      ? el("select", { name }, el("option", { value: "" }, "any"),
        ...options.map((o) => el("option", { value: o, selected: params.get(name) === o }, o)))
      : el("input", { name, value: params.get(name) || "", size: 14 });
    return el("label", {}, name, inputs[name]);
  });
  const values = () => Object.fromEntries(fields.map(([n]) => [n, inputs[n].value.trim()]));
  const form = el("form", { class: "filters", onsubmit: (e) => { e.preventDefault();
    onApply(values()); } }, ...controls, el("button", { type: "submit" }, "Apply"));
  return { form, values };
}

function jobRows(items, withActions) {
  return items.map((j) => el("tr", { "data-job": j.job_id },
    el("td", { class: "mono" }, el("a", { href: "#/jobs/" + j.job_id }, j.job_id.slice(0, 8))),
    el("td", {}, j.task), el("td", {}, j.queue), el("td", {}, statusBadge(j.status)),
    el("td", { class: "num" }, j.attempts), el("td", {}, when(j.created_at)),
    el("td", {}, j.last_error ? j.last_error.slice(0, 80) : ""),
    withActions ? withActions(j) : null));
}

function listPage(title, path, fields, withActions, extra) {
  return (r) => {
    const params = r.params;
    const cursor = params.get("cursor");
    const body = el("tbody");
    const pager = el("div", { class: "pager" });
    const tail = extra ? extra(params) : null;
    const { form } = filterForm(fields, params, (v) => go(path, v));
    const heads = ["job", "task", "queue", "status", "attempts", "created", "last error"];
    if (withActions) heads.push("");
    const frame = el("div", {}, el("h1", {}, title), form, tail ? tail.node : null,
      el("table", { id: "list" }, el("thead", {}, el("tr", {}, heads.map((h) =>
        el("th", {}, h)))), body), pager);
    async function refresh(live) {
      const q = new URLSearchParams({ limit: "25" });
      for (const [n] of fields) if (params.get(n)) q.set(n, params.get(n));
      if (cursor) q.set("cursor", cursor);
      const page = await api(path + "?" + q.toString());
      if (!live()) return;
      body.replaceChildren(...jobRows(page.items, withActions));
      if (!page.items.length) body.append(el("tr", {}, el("td", { colspan: 8, class: "muted" },
        "nothing here")));
      const keep = Object.fromEntries(fields.map(([n]) => [n, params.get(n)]));
      pager.replaceChildren(...[
        cursor ? el("button", { type: "button", onclick: () => go(path, keep) }, "First page")
               : null,
        page.next_cursor ? el("button", { type: "button", onclick: () =>
          go(path, { ...keep, cursor: page.next_cursor }) }, "Next page") : null,
      ].filter(Boolean));
    }
    return { frame, refresh };
  };
}

const jobsPage = listPage("Jobs", "jobs",
  [["status", STATUSES], ["queue"], ["task"], ["spawned_by"]], null, null);

async function act(label, call) {
  try {
    await call();
    flash("");
  } catch (err) {
    flash(label + ": " + err.message);
  }
  render(false);
}

const dlqPage = listPage("Dead letters", "dlq", [["queue"], ["task"]],
  (j) => el("td", {}, !may("operate") ? null : el("div", { class: "actions" },
    el("button", { type: "button", onclick: () => act("replay", () =>
      api("dlq/" + j.job_id + "/replay", { method: "POST" })) }, "Replay"),
    el("button", { type: "button", class: "danger", onclick: () => act("purge", () =>
      api("dlq/" + j.job_id, { method: "DELETE" })) }, "Purge"))),
  (params) => {
    const box = el("div", { class: "actions" });
    if (!may("operate")) return { node: box };
    const filter = { queue: params.get("queue") || undefined, task: params.get("task") || undefined };
    const ask = async () => {
      let n = 0, cursor = null;
      do { // count what the filter matches (a bulk replay takes at most 1,000)
        const q = new URLSearchParams({ limit: "500" });
        if (filter.queue) q.set("queue", filter.queue);
        if (filter.task) q.set("task", filter.task);
        if (cursor) q.set("cursor", cursor);
        const page = await api("dlq?" + q.toString());
        n += page.items.length;
        cursor = page.next_cursor;
      } while (cursor && n < 1000);
      const count = Math.min(n, 1000);
      const what = count === 0 ? "No dead job matches this filter."
        : `Replay ${count}${cursor ? " (the first 1,000 of more)" : ""} dead job${
          count === 1 ? "" : "s"} matching this filter?`;
      box.replaceChildren(el("div", { class: "card confirm", id: "confirm" }, what, " ",
        count ? el("button", { type: "button", class: "primary", onclick: () => act(
          "replay all", async () => {
            await api("dlq/replay", { method: "POST", body: { ...filter, limit: count } });
            box.replaceChildren(replayAll);
          }) }, `Replay ${count}`) : null,
        el("button", { type: "button", onclick: () => box.replaceChildren(replayAll) },
          "Cancel")));
    };
    const replayAll = el("button", { type: "button", onclick: () => act("count", ask) },
      "Replay all matching…");
    box.append(replayAll);
    return { node: box };
  });

function jobPage(r) {
  const id = r.parts[1];
  const head = el("div");
  const fields = el("dl", { class: "fields" });
  const data = el("div");
  const timeline = el("ol", { class: "timeline", id: "attempts" });
  const steps = el("div");
  const frame = el("div", {}, el("p", {}, el("a", { href: "#/jobs" }, "← jobs")), head,
    el("div", { class: "card" }, fields), data, el("h2", {}, "Attempts"), timeline, steps);
  async function refresh(live) {
    const [job, attempts, stored] = await Promise.all([api("jobs/" + id),
      api("jobs/" + id + "/attempts"), api("jobs/" + id + "/steps?limit=200")]);
    if (!live()) return;
    const buttons = [];
    if (!may("operate")) {
      // a read key sees the job, not the actions it may not take
    } else if (["waiting", "queued", "processing", "suspended"].includes(job.status)) {
      buttons.push(el("button", { type: "button", class: "danger", onclick: () => act("cancel",
        () => api("jobs/" + id + "/cancel", { method: "POST" })) }, "Cancel"));
    }
    if (may("operate") && job.status === "dead") {
      buttons.push(el("button", { type: "button", class: "primary", onclick: () => act("replay",
        () => api("dlq/" + id + "/replay", { method: "POST" })) }, "Replay"));
      if (stored.items.length) {
        buttons.push(el("button", { type: "button", onclick: () => act("replay", () =>
          api("dlq/" + id + "/replay", { method: "POST", body: { reset_steps: true } })) },
          "Replay, steps reset"));
      }
      buttons.push(el("button", { type: "button", class: "danger", onclick: () => act("purge",
        async () => { await api("dlq/" + id, { method: "DELETE" }); go("dlq"); }) }, "Purge"));
    }
    head.replaceChildren(el("h1", {}, "Job ", el("span", { class: "mono" }, job.job_id), " ",
      statusBadge(job.status)), el("div", { class: "actions" }, buttons));
    const rows = [["task", job.task], ["queue", job.queue], ["priority", job.priority],
      ["attempts", `${job.attempts} (max retries ${job.max_retries})`],
      ["worker", job.worker_id || "—"], ["submitted by", job.submitted_by || "—"],
      ["created", when(job.created_at)],
      ["started", when(job.started_at)], ["finished", when(job.finished_at)],
      ["run at", when(job.run_at)], ["cancel requested", job.cancel_requested ? "yes" : "no"]];
    if (job.status === "waiting") rows.push(["waiting for", `${job.open_parents} parent(s)`]);
    if (job.waiting_for) {
      rows.push([job.status === "suspended" ? "waiting for" : "held back", job.waiting_for]);
    }
    if (job.concurrency_key) rows.push(["concurrency key", job.concurrency_key]);
    const links = (list, id) => el("dd", { id }, ...(list || []).flatMap((p, i) => [
      i ? ", " : "", el("a", { href: "#/jobs/" + p.job_id, class: "mono" },
        p.ref || p.job_id.slice(0, 8)), " ", statusBadge(p.status)]));
    if ((job.depends_on || []).length) rows.push(["parents", links(job.depends_on, "parents")]);
    if ((job.dependents || []).length) {
      rows.push([`children (${job.dependents_total})`, links(job.dependents, "children")]);
    }
    // spawned jobs (ctx.spawn) are not children: a link up to the spawner, one down to its list
    if (job.spawned_by) {
      rows.push(["spawned by", el("dd", { id: "spawned-by" }, el("a", {
        href: "#/jobs/" + job.spawned_by, class: "mono" }, job.spawned_by.slice(0, 8)))]);
    }
    if (job.spawned) {
      const counts = Object.entries(job.spawned.by_status).map(([s, n]) => `${n} ${s}`);
      rows.push([`spawned (${job.spawned.total}${job.spawned.capped ? "+" : ""})`,
        el("dd", { id: "spawned" }, counts.join(", "), " · ",
          el("a", { href: "#/jobs?spawned_by=" + job.job_id }, "list them"))]);
    }
    fields.replaceChildren(...rows.flatMap(([k, v]) =>
      [el("dt", {}, k), v instanceof Node ? v : el("dd", {}, v)]));
    data.replaceChildren(
      el("h2", {}, "Payload"), el("pre", { id: "payload" }, JSON.stringify(job.payload, null, 2)),
      el("h2", {}, "Result"), el("pre", { id: "result" },
        job.result === null || job.result === undefined ? "—" : JSON.stringify(job.result, null, 2)),
      el("h2", {}, "Last error"), el("pre", { id: "last-error" }, job.last_error || "—"));
    timeline.replaceChildren(...attempts.items.slice().reverse().map((a) =>
      el("li", { class: "outcome-" + (a.outcome || "open") },
        el("strong", {}, `#${a.attempt} ${a.outcome || "running"}`),
        el("span", { class: "muted" }, ` · ${a.worker_id || "?"} · ${
          a.duration_ms === null || a.duration_ms === undefined ? "…" : a.duration_ms + " ms"} · ${
          when(a.started_at)}`),
        a.error ? el("pre", {}, a.error) : null)));
    if (!attempts.items.length) timeline.append(el("li", { class: "muted" }, "no attempt yet"));
    // a durable job's steps, in the order first stored (docs/durable.md)
    steps.replaceChildren(...(stored.items.length ? [el("h2", {}, "Steps"),
      el("ol", { class: "timeline", id: "steps" }, ...stored.items.map((s) =>
        el("li", { class: "outcome-" + s.status },
          el("strong", { class: "mono" }, s.name), ` ${s.status}`,
          el("span", { class: "muted" }, ` · ${s.kind} · ${s.attempts} run(s) · attempt ${
            s.job_attempt} · ${s.duration_ms} ms · ${s.result_bytes} B · ${when(s.started_at)}`),
          s.error ? el("pre", {}, s.error) : null))),
      stored.next_cursor ? el("p", { class: "muted" }, "more steps: asyncz steps " + id) : null]
      : []).filter(Boolean));
  }
  return { frame, refresh };
}

window.addEventListener("hashchange", () => render(true));
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("signin-form").addEventListener("submit", signIn);
  document.getElementById("signout").addEventListener("click", () => showSignIn("Signed out."));
  if (sessionStorage.getItem(KEY)) start(); else showSignIn();
});
