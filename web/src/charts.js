// The run's charts, drawn with uPlot (web/node_modules/uplot, embedded in the meshrl binary).
// Shared by the live dashboard (dashboard.js) and `meshrl report` (report.html): both hand it the
// JSON of /api/state. Plain script, no modules, so the report can inline it.
(function () {
  "use strict";

  const palette = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2"];

  function mb(v) { return v == null ? "" : (v / 1e6).toFixed(2) + " MB"; }

  // The per-version series, each [xs, ys] with only the versions that have the value.
  function series(state) {
    const committed = state.versions.filter((p) => p.version >= 1);
    const evals = state.versions.filter((p) => p.pass_at_1 !== null && p.pass_at_1 !== undefined);
    const pick = (rows, f) => [rows.map((p) => p.version), rows.map(f)];
    return {
      reward: pick(committed, (p) => p.reward_mean),
      pass_at_1: pick(evals, (p) => 100 * p.pass_at_1),
      kl: pick(committed, (p) => p.kl_mean),
      entropy: pick(committed, (p) => p.entropy_mean),
      bytes: [committed.map((p) => p.version), committed.map((p) => p.bytes_up + p.bytes_down),
              committed.map((p) => p.bytes_dataparallel)],
      staleness: [state.staleness.map((_, i) => i), state.staleness.map((b) => b.count)],
    };
  }

  const specs = {
    reward: { title: "Reward (mean of the round's updates)", labels: ["reward"] },
    pass_at_1: { title: "Held-out pass@1 (%)", labels: ["pass@1 %"], range: [0, 100] },
    kl: { title: "KL to the reference", labels: ["KL"] },
    entropy: { title: "Policy entropy (nats/token)", labels: ["entropy"] },
    bytes: { title: "Bytes on the wire vs fp32 data-parallel (cumulative)", labels: ["mesh (up + down)", "data-parallel"],
             value: mb, log: true },
    staleness: { title: "Staleness of applied updates (versions)", labels: ["updates"], bars: true },
  };

  function options(key, el, state) {
    const spec = specs[key];
    const width = Math.max(280, el.clientWidth || 420);
    const s = [{ label: key === "staleness" ? "staleness" : "version" }];
    spec.labels.forEach((label, i) => {
      const o = { label, stroke: palette[i], width: 2, points: { show: true, size: 5 } };
      if (spec.value) o.value = (u, v) => spec.value(v);
      if (spec.bars) Object.assign(o, { fill: palette[i] + "88", paths: uPlot.paths.bars({ size: [0.6, 60] }), points: { show: false } });
      s.push(o);
    });
    // Versions are whole numbers: no ticks at 1.5.
    const axes = [{ label: s[0].label, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, { size: spec.value ? 95 : 70 }];
    if (spec.value) axes[1].values = (u, vals) => vals.map((v) => mb(v));
    if (key === "staleness") {
      const names = state.staleness.map((b, i) => (b.le === "+Inf" ? ">" + state.staleness[i - 1].le : "<=" + b.le));
      axes[0].values = (u, vals) => vals.map((v) => (Number.isInteger(v) && names[v] !== undefined ? names[v] : ""));
      axes[0].splits = () => names.map((_, i) => i);
    }
    return {
      title: spec.title, width, height: 200, series: s, axes,
      scales: { x: { time: false, range: key === "staleness" ? [-0.5, state.staleness.length - 0.5] : undefined },
                y: spec.log ? { distr: 3 } : spec.range ? { range: spec.range } : {} },
      legend: { show: true },
    };
  }

  // Creates or updates the chart of `key` inside el; keeps the uPlot instance on the element.
  // el.dataset.points says how many x values the chart holds (the browser tests read it).
  function draw(key, el, state) {
    const data = series(state)[key];
    if (specs[key].log) for (let i = 1; i < data.length; i++) data[i] = data[i].map((v) => (v > 0 ? v : null));
    el.dataset.points = String(data[0].length);
    if (!el._chart || el._chart._n !== data.length || key === "staleness") {
      if (el._chart) el._chart.destroy();
      el._chart = new uPlot(options(key, el, state), data, el);
      el._chart._n = data.length;
    } else {
      el._chart.setData(data);
    }
  }

  window.MeshCharts = { keys: Object.keys(specs), draw, series, mb };
})();
