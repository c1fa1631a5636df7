// sparecap console: local times, deadline countdowns, the create and scale
// pages' capacity and price hints, the live event timeline and the usage
// chart. Everything it shows comes from the page or from the /v1 API with
// the session cookie; it never builds HTML from data (textContent only).
"use strict";

// The server's clock, which runs `speed` times faster than real time in
// demos: every countdown and age is measured against it, not the browser's.
const loadedAt = Date.now();
const serverAtLoad = Date.parse(document.body ? document.body.dataset.serverNow : "") || loadedAt;
const speed = parseFloat(document.body ? document.body.dataset.speed : "1") || 1;
function serverNow() { return serverAtLoad + (Date.now() - loadedAt) * speed; }

function localTime(el) {
  const d = new Date(el.getAttribute("datetime"));
  if (isNaN(d)) return;
  el.title = d.toISOString();
  el.textContent = d.toLocaleString();
}

function countdown(el) {
  const d = new Date(el.getAttribute("datetime"));
  if (isNaN(d)) return;
  const left = Math.max(0, Math.round((d - serverNow()) / 1000));
  const m = Math.floor(left / 60), s = left % 60;
  el.title = d.toLocaleString();
  el.textContent = left === 0 ? "now" : "in " + m + ":" + String(s).padStart(2, "0");
}

function age(el) {
  const d = new Date(el.getAttribute("datetime"));
  if (isNaN(d)) return;
  const s = Math.max(0, Math.round((serverNow() - d) / 1000));
  el.title = d.toLocaleString();
  el.textContent = s < 60 ? s + "s" : s < 3600 ? Math.floor(s / 60) + "m" : Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
}

function refreshTimes(root) {
  root.querySelectorAll("time:not([data-countdown]):not([data-age])").forEach(localTime);
  root.querySelectorAll("time[data-countdown]").forEach(countdown);
  root.querySelectorAll("time[data-age]").forEach(age);
  root.querySelectorAll("[data-w]").forEach((el) => { el.style.width = el.dataset.w + "%"; });
}

function csrf() {
  const el = document.querySelector('input[name="csrf"]');
  return el ? el.value : "";
}

function money(n) { return "$" + n.toFixed(2); }

// Create page: capacity and hourly price of the choice.
function createPage() {
  const form = document.getElementById("create-form");
  if (!form) return;
  const sel = document.getElementById("region_gpu");
  const std = document.getElementById("num_gpus");
  const pre = document.getElementById("num_preemptible_gpus");
  const sw = document.getElementById("preemptible");
  const cap = document.getElementById("capacity-now");
  const price = document.getElementById("price-now");
  function update() {
    const o = sel.options[sel.selectedIndex];
    if (!o) return;
    pre.disabled = !sw.checked;
    cap.textContent = "Available now: " + o.dataset.od + " GPUs on demand, " + o.dataset.pre + " GPUs preemptible.";
    const odp = parseFloat(o.dataset.odprice), prp = parseFloat(o.dataset.preprice);
    const s = parseInt(std.value || "0", 10), p = sw.checked ? parseInt(pre.value || "0", 10) : 0;
    if (isNaN(odp)) { price.textContent = "No price is set for this GPU type."; return; }
    price.textContent = "Standard " + s + " × $" + o.dataset.odprice + " = " + money(s * odp) + "/h" +
      (sw.checked ? " · preemptible up to " + p + " × $" + o.dataset.preprice + " = " + money(p * prp) + "/h (half price)" : "");
  }
  [sel, std, pre, sw].forEach((el) => el.addEventListener("input", update));
  update();
}

// Scale page: what the change costs per hour.
function scalePage() {
  const box = document.getElementById("scale-capacity");
  const out = document.getElementById("scale-cost");
  if (!box || !out) return;
  const std = document.getElementById("num_gpus"), pre = document.getElementById("num_preemptible_gpus");
  function update() {
    const odp = parseFloat(box.dataset.odprice), prp = parseFloat(box.dataset.preprice);
    if (isNaN(odp)) { out.textContent = ""; return; }
    const ds = parseInt(std.value || "0", 10) - parseInt(box.dataset.std, 10);
    const dp = parseInt(pre.value || "0", 10) - parseInt(box.dataset.desired, 10);
    const delta = ds * odp + dp * prp;
    out.textContent = "This change: " + (delta >= 0 ? "+" : "−") + money(Math.abs(delta)) + " per hour" +
      (dp > 0 ? " (preemptible at most, once the target is filled)" : "");
  }
  [std, pre].forEach((el) => el.addEventListener("input", update));
  update();
}

// Cluster page: the live timeline (Server-Sent Events from the API) and
// the node table, refreshed from the API on every event.
function clusterPage() {
  const tl = document.getElementById("timeline");
  if (!tl) return;
  const id = tl.dataset.cluster;
  const live = document.getElementById("live");
  let cursor = tl.dataset.cursor || "0";
  let es;
  function connect() {
    es = new EventSource("/v1/clusters/" + encodeURIComponent(id) + "/events?watch=true&cursor=" + encodeURIComponent(cursor));
    es.addEventListener("open", () => { live.textContent = "live"; live.classList.remove("off"); });
    es.addEventListener("error", () => { live.textContent = "reconnecting…"; live.classList.add("off"); });
    es.addEventListener("node_lifecycle_event", (msg) => {
      const e = JSON.parse(msg.data);
      cursor = e.cursor;
      addEvent(e);
      refreshCluster();
    });
  }
  function addEvent(e) {
    const li = document.createElement("li");
    li.className = "ev ev-" + e.reason + " new";
    const t = document.createElement("time");
    t.setAttribute("datetime", e.timestamp);
    li.append(t, " ");
    const r = document.createElement("strong");
    r.textContent = e.reason;
    li.append(r, " ");
    if (e.node_name) {
      const c = document.createElement("code");
      c.textContent = e.node_name;
      li.append(c, " ");
    }
    li.append(e.message);
    if (e.deadline && (e.reason === "PreemptionNotified" || e.reason === "ScaledDown")) {
      const span = document.createElement("span");
      span.className = "deadline";
      const d = document.createElement("time");
      d.setAttribute("datetime", e.deadline);
      d.dataset.countdown = "";
      span.append(" deadline ", d);
      li.append(" ", span);
    }
    tl.prepend(li);
    refreshTimes(li);
  }
  const timeEl = (t) => {
    const el = document.createElement("time");
    el.setAttribute("datetime", t);
    el.textContent = t;
    return el;
  };
  // The form the page renders for a ready node: convert it in place.
  const csrfToken = document.getElementById("nodes").dataset.csrf;
  const convertForm = (n) => {
    const to = n.compute_class === "standard" ? "preemptible" : "standard";
    const f = document.createElement("form");
    f.method = "post";
    f.action = "/console/clusters/" + encodeURIComponent(id) + "/nodes/" + encodeURIComponent(n.node_id) + "/convert";
    f.className = "inline convert";
    f.dataset.confirm = "Convert " + n.node_name + " to " + to + " in place? Its work keeps running; it is billed as " + to + " from now.";
    const hidden = (name, value) => { const i = document.createElement("input"); i.type = "hidden"; i.name = name; i.value = value; f.append(i); };
    hidden("csrf", csrfToken);
    hidden("to", to);
    const b = document.createElement("button");
    b.type = "submit";
    b.className = "small";
    b.textContent = "Make " + to;
    f.append(b);
    return f;
  };
  async function refreshCluster() {
    const resp = await fetch("/v1/clusters/" + encodeURIComponent(id), { credentials: "same-origin" });
    if (!resp.ok) return;
    const c = await resp.json();
    document.getElementById("cluster-status").textContent = c.status;
    document.getElementById("cluster-status").className = "status status-" + c.status;
    document.getElementById("allocated").textContent = c.allocated_preemptible_gpus;
    document.getElementById("target").textContent = c.target_preemptible_gpus;
    document.getElementById("desired").textContent = c.desired_preemptible_gpus;
    document.getElementById("requested").textContent = c.requested_preemptible_gpus;
    document.getElementById("max").textContent = c.max_preemptible_gpus;
    document.getElementById("queue").hidden = !(c.max_preemptible_gpus > 0);
    const bar = document.getElementById("alloc-bar");
    bar.dataset.w = c.target_preemptible_gpus > 0 ? Math.min(100, Math.floor(c.allocated_preemptible_gpus * 100 / c.target_preemptible_gpus)) : 0;
    document.getElementById("unfulfilled").textContent = c.target_unfulfilled ? c.target_unfulfilled.reason + ": " + c.target_unfulfilled.message : "";
    const body = document.querySelector("#nodes tbody");
    body.replaceChildren(...c.gpu_worker_nodes.map((n) => {
      const tr = document.createElement("tr");
      tr.dataset.node = n.node_id;
      const cell = (v) => { const td = document.createElement("td"); if (v instanceof Node) td.append(v); else td.textContent = v; tr.append(td); };
      cell(n.node_name);
      const cls = document.createElement("span");
      cls.className = "class class-" + n.compute_class;
      cls.textContent = n.compute_class;
      if (n.class_since) {
        const since = document.createElement("small");
        since.className = "since";
        since.append("since ", timeEl(n.class_since));
        cls.append(document.createElement("br"), since);
      }
      cell(cls);
      const st = document.createElement("span");
      st.textContent = n.status;
      if (n.last_error) {
        const err = document.createElement("small");
        err.className = "reason";
        err.textContent = n.last_error;
        st.append(document.createElement("br"), err);
      }
      cell(st);
      cell(String(n.num_gpus));
      cell(n.gpu_type || "–");
      const age = document.createElement("span");
      const a = timeEl(n.created_at);
      a.dataset.age = "";
      age.append(a);
      if (n.lease_end) {
        const l = document.createElement("small");
        l.className = "lease";
        l.append("lease ends ", timeEl(n.lease_end));
        age.append(document.createElement("br"), l);
      }
      cell(age);
      if (n.deadline) {
        const d = timeEl(n.deadline);
        d.dataset.countdown = "";
        cell(d);
      } else if (n.preempt_at) {
        // Its machine is booked: its notice comes then.
        const s = document.createElement("span");
        s.className = "preempt-at";
        const d = timeEl(n.preempt_at);
        d.dataset.countdown = "";
        s.append("notice at ", d);
        cell(s);
      } else cell("–");
      cell(n.status === "ready" ? convertForm(n) : "");
      return tr;
    }));
    refreshTimes(document);
  }
  connect();
  // Some changes come without an event (a machine finishing its wipe
  // takes the removed node off the list): refresh every few seconds too.
  setInterval(refreshCluster, 3000);
  window.addEventListener("beforeunload", () => es && es.close());
}

// Usage page: cost per day by compute class and the on-demand equivalent.
function usagePage() {
  const data = document.getElementById("usage-data");
  const canvas = document.getElementById("usage-chart");
  if (!data || !canvas || !window.Chart) return;
  const lines = JSON.parse(data.textContent) || [];
  const days = [...new Set(lines.map((l) => l.start.slice(0, 10)))].sort();
  const series = (cls, field) => days.map((d) => lines.filter((l) => l.start.startsWith(d) && l.compute_class === cls)
    .reduce((s, l) => s + parseFloat(l[field]), 0));
  const od = days.map((d, i) => series("standard", "on_demand_amount")[i] + series("preemptible", "on_demand_amount")[i]);
  window.Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  new window.Chart(canvas, {
    type: "bar",
    data: {
      labels: days,
      datasets: [
        { label: "standard", data: series("standard", "amount"), backgroundColor: "#1f6feb", stack: "cost" },
        { label: "preemptible", data: series("preemptible", "amount"), backgroundColor: "#c2410c", stack: "cost" },
        { label: "on-demand equivalent", data: od, type: "line", borderColor: "#5d6d7e", backgroundColor: "#5d6d7e", borderDash: [6, 4] },
      ],
    },
    options: { animation: false, responsive: true, scales: { y: { stacked: true, title: { display: true, text: "USD" } }, x: { stacked: true } } },
  });
}

// planPage draws the expected cost of each way to run the planned job.
function planPage() {
  const data = document.getElementById("plan-data");
  const canvas = document.getElementById("plan-chart");
  if (!data || !canvas || !window.Chart) return;
  const p = JSON.parse(data.textContent);
  const labels = ["standard only", "preemptible only"];
  const costs = [p.standard_cost, p.preemptible.expected_cost];
  if (p.deadline) {
    labels.push("plan (move when the slack runs out)", "greedy (preemptible until too late)");
    costs.push(p.deadline.plan.expected_cost, p.deadline.greedy.expected_cost);
  }
  window.Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  new window.Chart(canvas, {
    type: "bar",
    data: { labels, datasets: [{ label: "expected cost", data: costs, backgroundColor: ["#1f6feb", "#c2410c", "#15803d", "#a16207"] }] },
    options: { animation: false, responsive: true, indexAxis: "y", plugins: { legend: { display: false } } },
  });
}

// simulationPage draws each policy's capacity over time, stacked by use,
// and reloads the page while the simulation runs.
function simulationPage() {
  const status = document.querySelector("[data-refresh]");
  if (status) setTimeout(() => window.location.reload(), 1000 * parseFloat(status.dataset.refresh));
  if (!window.Chart) return;
  document.querySelectorAll("canvas.sim-chart").forEach((canvas) => {
    const data = document.getElementById(canvas.id.replace("sim-chart", "sim-data"));
    if (!data) return;
    const series = JSON.parse(data.textContent) || [];
    const set = (label, key, color) => ({ label, data: series.map((x) => x[key]), backgroundColor: color, borderColor: color, fill: true, pointRadius: 0 });
    window.Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
    new window.Chart(canvas, {
      type: "line",
      data: {
        labels: series.map((x) => x.at),
        datasets: [set("standard", "standard", "#1f6feb"), set("preemptible", "preemptible", "#c2410c"),
          set("in transit", "transit", "#a16207"), set("idle", "idle", "#d0d7de")],
      },
      options: { animation: false, responsive: true, scales: { y: { stacked: true, title: { display: true, text: "GPUs" } } } },
    });
  });
  const runs = document.getElementById("sim-reclaims-data");
  const canvas = document.getElementById("sim-reclaims");
  if (!runs || !canvas) return;
  const all = JSON.parse(runs.textContent) || [];
  const colors = ["#c2410c", "#1f6feb", "#15803d", "#a16207"];
  new window.Chart(canvas, {
    type: "bar",
    data: {
      labels: (all[0]?.series || []).map((x) => x.at),
      datasets: all.map((r, i) => ({ label: r.policy.name, data: r.series.map((x) => x.reclaims), backgroundColor: colors[i % colors.length] })),
    },
    options: { animation: false, responsive: true, scales: { y: { title: { display: true, text: "reclaims" } } } },
  });
}

function confirmForms() {
  // Delegated: the nodes table's forms are rebuilt by its refresh.
  document.addEventListener("submit", (ev) => {
    const f = ev.target.closest("form[data-confirm]");
    if (f && !window.confirm(f.dataset.confirm)) ev.preventDefault();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  refreshTimes(document);
  setInterval(() => refreshTimes(document), 1000);
  createPage();
  scalePage();
  clusterPage();
  usagePage();
  planPage();
  simulationPage();
  confirmForms();
  void csrf;
});
