// The live dashboard: polls /api/state (see src/web/state_json.cpp) every second and redraws the
// charts (charts.js), one panel per node and the latest ledger events, without reloading.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);

  function age(s) { return s < 0 ? "-" : s < 60 ? s.toFixed(0) + " s ago" : (s / 60).toFixed(1) + " min ago"; }

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }

  function nodePanel(n) {
    const reasons = Object.entries(n.rejected_by_reason).map(([k, v]) => k + " " + v).join(", ");
    return `<div class="node ${esc(n.state)}" data-node="${esc(n.name)}" data-state="${esc(n.state)}" data-version="${n.version_held}">
      <h3><span class="name">${esc(n.name)}</span><span class="state">${esc(n.state)}</span></h3>
      <dl>
        <dt>version held</dt><dd class="version">${n.version_held < 0 ? "-" : n.version_held}</dd>
        <dt>last heartbeat</dt><dd>${age(n.last_seen_age_s)}</dd>
        <dt>last update</dt><dd>${age(n.last_update_age_s)}</dd>
        <dt>rollouts/s</dt><dd>${n.samples_per_s.toFixed(2)}</dd>
        <dt>bytes up</dt><dd>${MeshCharts.mb(n.bytes_up)}</dd>
        <dt>bytes down</dt><dd>${MeshCharts.mb(n.bytes_down)}</dd>
        <dt>updates</dt><dd>${n.updates_applied} applied, ${n.updates_pending} pending, ${n.updates_rejected} rejected</dd>
        ${reasons ? `<dt>rejected</dt><dd>${esc(reasons)}</dd>` : ""}
      </dl></div>`;
  }

  function render(state) {
    $("#run-id").textContent = state.run_id;
    const wire = state.bytes_received + state.bytes_sent_weights + state.bytes_sent_broadcast;
    $("#run-status").textContent =
      `${state.mode} | version ${state.version}/${state.rounds_target} ${state.hash.slice(0, 12)} | ` +
      `wire ${MeshCharts.mb(wire)} vs data-parallel ${MeshCharts.mb(state.bytes_dataparallel)}` +
      (state.finished ? " | finished" : "");
    document.body.dataset.version = String(state.version);
    for (const key of MeshCharts.keys) MeshCharts.draw(key, $("#chart-" + key), state);
    $("#nodes").innerHTML = state.nodes.map(nodePanel).join("");
    $("#events tbody").innerHTML = state.events.slice().reverse().map((e) =>
      `<tr><td>${new Date(e.at * 1000).toLocaleTimeString()}</td><td>${esc(e.node)}</td><td>${esc(e.event)}</td><td>${esc(e.detail)}</td></tr>`).join("");
  }

  async function poll() {
    try {
      const r = await fetch("/api/state", { cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      render(await r.json());
    } catch (e) {
      $("#run-status").textContent = "disconnected (" + e.message + "), retrying";
    }
    setTimeout(poll, 1000);
  }
  poll();
})();
