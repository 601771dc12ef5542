// The Webhooks page: the registered webhooks (GET /webhooks) and, for the one picked, its
// recent deliveries with each attempt (GET /webhooks/{id}/deliveries); a test event and a
// redelivery for a key with the admin scope. Loaded before app.js, which routes #/webhooks
// here; it uses app.js's el(), api(), act(), go(), may() and when().
"use strict";

function webhooksPage(r) {
  const picked = r.parts[1] || "";
  const hooks = el("tbody");
  const deliveries = el("tbody");
  const heading = el("h2", {}, picked ? "Deliveries of webhook " + picked : "Deliveries");
  const frame = el("div", {}, el("h1", {}, "Webhooks"),
    el("p", { class: "muted" }, "Signed HTTP calls when jobs end (docs/events.md). Pick a " +
      "webhook to see its recent deliveries and their attempts."),
    el("table", { id: "webhooks" }, el("thead", {}, el("tr", {},
      ["id", "url", "types", "queues", "tasks", "created", ""].map((h) => el("th", {}, h)))),
      hooks),
    heading,
    el("table", { id: "deliveries" }, el("thead", {}, el("tr", {},
      ["delivery", "event", "type", "status", "attempts", "last answer", "created", ""]
        .map((h) => el("th", {}, h)))), deliveries));
  const all = (list) => (list.length ? list.join(", ") : "all");
  const answer = (d) => d.last_error || (d.last_status_code ? String(d.last_status_code) : "—");
  async function refresh(live) {
    const page = await api("webhooks");
    if (!live()) return;
    hooks.replaceChildren(...page.items.map((w) => el("tr", { "data-webhook": String(w.id) },
      el("td", { class: "num" }, el("a", { href: "#/webhooks/" + w.id }, String(w.id))),
      el("td", { class: "mono" }, w.url), el("td", {}, all(w.types)),
      el("td", {}, all(w.queues)), el("td", {}, all(w.tasks)), el("td", {}, when(w.created_at)),
      el("td", {}, !may("admin") ? null : el("button", { type: "button", class: "send-test",
        onclick: () => act("test event", () => api("webhooks/" + w.id + "/test",
          { method: "POST" })) }, "Send test event")))));
    if (!page.items.length) hooks.append(el("tr", {}, el("td", { colspan: 7, class: "muted" },
      "no webhook: register one with POST /webhooks or `asyncz webhooks add`")));
    if (!picked) {
      deliveries.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "muted" },
        "pick a webhook above")));
      return;
    }
    const sent = await api("webhooks/" + encodeURIComponent(picked) + "/deliveries?limit=25");
    if (!live()) return;
    deliveries.replaceChildren(...sent.items.map((d) => el("tr",
      { "data-delivery": String(d.id), "data-event": d.event_id, title: d.attempt_log.map((a) =>
        a.at + " " + (a.error || a.status_code) + " (" + a.duration_ms + " ms)").join("\n") },
      el("td", { class: "num" }, String(d.id)), el("td", { class: "mono" }, d.event_id),
      el("td", {}, d.event_type),
      el("td", { class: d.status === "failed" ? "error status" : "status" }, d.status),
      el("td", { class: "num" }, String(d.attempts)), el("td", { class: "mono" }, answer(d)),
      el("td", {}, when(d.created_at)),
      el("td", {}, !may("admin") ? null : el("button", { type: "button", onclick: () =>
        act("redeliver", () => api("webhooks/" + picked + "/deliveries/" + d.id +
          "/redeliver", { method: "POST" })) }, "Redeliver")))));
    if (!sent.items.length) deliveries.append(el("tr", {}, el("td", { colspan: 8,
      class: "muted" }, "no delivery yet")));
  }
  return { frame, refresh };
}
