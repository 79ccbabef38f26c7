// toolgate approvals page: the pending approvals, live over /v1/events.
// Plain DOM, textContent only (request contents are untrusted text).
"use strict";

(function () {
  const cards = new Map(); // approval id -> {approval, el, done}
  const maxRecent = 50;
  const maxArgs = 4000;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const byInput = $("#by");
  let source = null;

  byInput.value = localStorage.getItem("toolgate.by") || "";
  byInput.addEventListener("change", () => localStorage.setItem("toolgate.by", byInput.value.trim()));

  function setConn(state, text) {
    const c = $("#conn");
    c.dataset.state = state;
    c.textContent = text;
  }

  function updateCount() {
    let n = 0;
    for (const c of cards.values()) if (!c.done) n++;
    $("#pending-count").textContent = String(n);
    $("#empty").hidden = cards.size > 0;
  }

  function requestOf(a) {
    if (a.request && typeof a.request === "object") return a.request;
    try { return JSON.parse(a.request); } catch (e) { return {}; }
  }

  function fmtLeft(ms) {
    if (ms <= 0) return "expired";
    const s = Math.floor(ms / 1000);
    const m = Math.floor(s / 60);
    return m + ":" + String(s % 60).padStart(2, "0") + " left";
  }

  function tick() {
    const now = Date.now();
    for (const c of cards.values()) {
      if (c.done) continue;
      const left = Date.parse(c.approval.deadline) - now;
      const cd = $(".countdown", c.el);
      cd.textContent = fmtLeft(left);
      cd.classList.toggle("urgent", left < 30000);
    }
  }

  function addCard(a) {
    if (a.status !== "pending" || cards.has(a.id)) return;
    const el = $("#card").content.firstElementChild.cloneNode(true);
    el.dataset.id = a.id;
    const req = requestOf(a);
    const action = req.action || {};
    $(".tool", el).textContent = a.action_type;
    $(".agent", el).textContent = "agent " + a.agent_id;
    $(".meta", el).textContent = "conversation " + a.conversation_id + " · step " + a.step +
      " · asked " + new Date(a.created_at).toLocaleTimeString() + " · " + a.id;
    let args = JSON.stringify(action.arguments || {}, null, 2);
    if (args.length > maxArgs) args = args.slice(0, maxArgs) + "\n… (" + (args.length - maxArgs) + " more characters)";
    $(".args", el).textContent = args;
    const ul = $(".reasons", el);
    for (const r of a.reasons || []) {
      const li = document.createElement("li");
      const code = document.createElement("span");
      code.className = "code " + (r.decision || "");
      code.textContent = r.code || r.rule;
      li.append(code, document.createTextNode(" " + r.message + (r.where ? " (" + r.where + ")" : "")));
      ul.append(li);
    }
    $(".approve", el).addEventListener("click", () => answer(a.id, true));
    $(".deny", el).addEventListener("click", () => answer(a.id, false));
    cards.set(a.id, { approval: a, el: el, done: false });
    $("#pending").prepend(el);
    tick();
    updateCount();
  }

  function resolved(a, text, cls) {
    const c = cards.get(a.id);
    if (!c) return;
    c.done = true;
    c.el.classList.add("done", cls || a.status);
    for (const b of c.el.querySelectorAll("button, input")) b.disabled = true;
    $(".countdown", c.el).textContent = a.status;
    $(".status", c.el).textContent = text;
    updateCount();
    setTimeout(() => { c.el.remove(); cards.delete(a.id); updateCount(); }, 15000);
  }

  function describe(a) {
    if (a.status === "expired") return "expired: no answer before the deadline";
    return a.status + " by " + a.resolved_by + (a.reason ? ": " + a.reason : "");
  }

  async function answer(id, approve) {
    const c = cards.get(id);
    if (!c || c.done) return;
    const by = byInput.value.trim();
    const status = $(".status", c.el);
    if (!by) {
      status.textContent = "Enter your name above before answering.";
      byInput.focus();
      return;
    }
    localStorage.setItem("toolgate.by", by);
    for (const b of c.el.querySelectorAll("button")) b.disabled = true;
    status.textContent = approve ? "approving…" : "denying…";
    let res, body;
    try {
      res = await fetch("/v1/approvals/" + encodeURIComponent(id), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ approve: approve, by: by, reason: $(".reason", c.el).value }),
      });
      body = await res.json();
    } catch (e) {
      status.textContent = "Not sent: " + e.message + ". Try again.";
      for (const b of c.el.querySelectorAll("button")) b.disabled = false;
      return;
    }
    if (res.ok) {
      resolved(body.approval, describe(body.approval) + " (your answer)");
    } else if (res.status === 409 && body.approval) {
      const a = body.approval;
      resolved(a, a.status === "expired" ? describe(a) : "already answered by " + a.resolved_by + " (" + a.status + ")", "conflict");
    } else {
      status.textContent = "Refused: " + ((body.error && body.error.message) || res.status);
      for (const b of c.el.querySelectorAll("button")) b.disabled = false;
    }
  }

  function addDecision(d) {
    const tr = document.createElement("tr");
    const cells = [new Date(d.time).toLocaleTimeString(), d.agent_id, d.action_type, d.decision, String(d.tier),
      (d.codes || []).join(" "), d.latency_ms.toFixed(1)];
    cells.forEach((t, i) => {
      const td = document.createElement("td");
      td.textContent = t;
      if (i === 3) td.className = "decision " + d.decision;
      tr.append(td);
    });
    const body = $("#recent tbody");
    const none = $("tr.none", body);
    if (none) none.remove();
    body.prepend(tr);
    while (body.rows.length > maxRecent) body.deleteRow(body.rows.length - 1);
  }

  async function reload() {
    try {
      const res = await fetch("/v1/approvals?status=pending", { cache: "no-store" });
      if (!res.ok) throw new Error("HTTP " + res.status);
      const list = (await res.json()).approvals || [];
      const ids = new Set(list.map((a) => a.id));
      for (const [id, c] of cards) if (!c.done && !ids.has(id)) { c.el.remove(); cards.delete(id); }
      list.reverse().forEach(addCard);
      updateCount();
    } catch (e) {
      setConn("down", "cannot list approvals: " + e.message);
    }
  }

  function connect() {
    source = new EventSource("/v1/events");
    source.onopen = () => { setConn("live", "live"); reload(); };
    source.onerror = () => setConn("down", "reconnecting…");
    source.addEventListener("approval_required", (e) => addCard(JSON.parse(e.data)));
    source.addEventListener("approval_resolved", (e) => {
      const a = JSON.parse(e.data);
      const c = cards.get(a.id);
      if (c && !c.done) resolved(a, describe(a));
    });
    source.addEventListener("decision", (e) => {
      const d = JSON.parse(e.data);
      addDecision(d);
      // A person's answer given elsewhere (the CLI, another server) is not
      // streamed; the verdict it settled is, so look again.
      if (d.tier === 3) reload();
    });
  }

  // For tests and the console: the live connection and a manual reload.
  window.toolgate = {
    get events() { return source; },
    disconnect() { if (source) source.close(); setConn("down", "disconnected"); },
    reload: reload,
  };

  setInterval(tick, 1000);
  setInterval(reload, 30000); // and answers no verdict here reported
  updateCount();
  connect();
})();
