// The Audit page: every operator action (GET /audit) with the key that took it, newest first,
// filtered by key and action, a page at a time. Loaded before app.js, which routes #/audit
// here; it uses app.js's el(), api(), filterForm(), go() and when() when the page is opened.
"use strict";

function auditPage(r) {
  const params = r.params;
  const cursor = params.get("cursor");
  const body = el("tbody");
  const pager = el("div", { class: "pager" });
  const fields = [["key_name"], ["action"]];
  const { form } = filterForm(fields, params, (v) => go("audit", v));
  const frame = el("div", {}, el("h1", {}, "Audit"),
    el("p", { class: "muted" }, "Every operator action, with the key that took it."), form,
    el("table", { id: "audit" }, el("thead", {}, el("tr", {},
      ["at", "key", "action", "target", "detail", "outcome"].map((h) => el("th", {}, h)))),
      body), pager);
  async function refresh(live) {
    const q = new URLSearchParams({ limit: "50" });
    for (const [n] of fields) if (params.get(n)) q.set(n, params.get(n));
    if (cursor) q.set("cursor", cursor);
    const page = await api("audit?" + q.toString());
    if (!live()) return;
    body.replaceChildren(...page.items.map((a) => el("tr", { "data-action": a.action },
      el("td", {}, when(a.at)), el("td", {}, a.key_name), el("td", {}, a.action),
      el("td", { class: "mono" }, a.target || "—"),
      el("td", { class: "mono" }, JSON.stringify(a.detail)),
      el("td", { class: a.outcome === "ok" ? "" : "error" }, a.outcome))));
    if (!page.items.length) body.append(el("tr", {}, el("td", { colspan: 6, class: "muted" },
      "no operator action yet")));
    const keep = Object.fromEntries(fields.map(([n]) => [n, params.get(n)]));
    pager.replaceChildren(...[
      cursor ? el("button", { type: "button", onclick: () => go("audit", keep) }, "First page")
             : null,
      page.next_cursor ? el("button", { type: "button", onclick: () =>
        go("audit", { ...keep, cursor: page.next_cursor }) }, "Next page") : null,
    ].filter(Boolean));
  }
  return { frame, refresh };
}
