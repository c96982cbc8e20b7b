// Drives headless Debian chromium (playwright-core from web/node_modules) against a live meshrl
// dashboard. Run by tests/integration/test_web.py (case dashboard), which owns the mesh:
//   node tests/browser/dashboard.cjs --url http://127.0.0.1:PORT/ --nodes paris,zurich,dublin \
//        --kill dublin --lease 4 --screenshot out.png
// Protocol on stdio: prints "KILL <node>" and waits for a line on stdin once the node is dead;
// ends with "RESULT {json}". Exits non-zero on the first failed check.
const path = require("path");
const { chromium, launchOptions, argOf, waitFor } = require("./browser_common.cjs");

async function main() {
  const url = argOf("--url");
  const nodes = argOf("--nodes").split(",");
  const victim = argOf("--kill");
  const lease = Number(argOf("--lease"));
  const shot = argOf("--screenshot");
  const browser = await chromium.launch(launchOptions());
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  page.on("pageerror", (e) => { console.log("page error: " + e.message); process.exitCode = 3; });
  await page.goto(url);

  // Every node panel up, each showing its name and the version it holds.
  await waitFor(page, (names) => names.every((n) => {
    const el = document.querySelector(`.node[data-node="${n}"]`);
    return el && Number(el.dataset.version) >= 0;
  }), nodes, 60, "a panel with a version for every node");
  // One snapshot of the page: the reward curve has a point per committed version.
  const seen = await page.evaluate((names) => ({
    version: Number(document.body.dataset.version),
    reward_points: Number(document.querySelector("#chart-reward").dataset.points),
    canvases: document.querySelectorAll(".chart canvas").length,
    panels: names.map((n) => {
      const el = document.querySelector(`.node[data-node="${n}"]`);
      return { name: el.querySelector(".name").textContent, version: el.querySelector(".version").textContent,
               data_version: el.dataset.version, state: el.dataset.state };
    }),
  }), nodes);
  console.log("seen " + JSON.stringify(seen));
  if (seen.reward_points !== seen.version) throw new Error(`reward curve has ${seen.reward_points} points, version is ${seen.version}`);
  if (seen.canvases < 6) throw new Error(`expected 6 charts, found ${seen.canvases}`);
  for (let i = 0; i < nodes.length; i++) {
    const p = seen.panels[i];
    if (p.name !== nodes[i] || p.version !== p.data_version || Number(p.version) > seen.version)
      throw new Error("bad panel " + JSON.stringify(p));
  }

  // Kill a node; its panel must say dropped once its lease has run out (plus one poll of the page).
  console.log("KILL " + victim);
  await new Promise((resolve) => process.stdin.once("data", resolve));
  const t0 = Date.now();
  await waitFor(page, (n) => document.querySelector(`.node[data-node="${n}"]`)?.dataset.state === "dropped", victim,
                lease + 10, victim + " shown as dropped");
  const dropped_after_s = (Date.now() - t0) / 1000;
  if (dropped_after_s > lease + 2.5) throw new Error(`${victim} shown as dropped after ${dropped_after_s} s, lease ${lease} s`);
  // Let a round close without it, so the screenshot shows curves and a dropped node.
  await waitFor(page, (v) => Number(document.body.dataset.version) > v, seen.version, 60, "a version after the kill");
  await page.waitForTimeout(1200);
  await page.screenshot({ path: shot, fullPage: true });
  const end = await page.evaluate(() => ({
    version: Number(document.body.dataset.version),
    reward_points: Number(document.querySelector("#chart-reward").dataset.points),
  }));
  if (end.reward_points !== end.version) throw new Error(`after the kill: ${end.reward_points} reward points at version ${end.version}`);
  console.log("RESULT " + JSON.stringify({ ...end, dropped_after_s, screenshot: path.resolve(shot) }));
  await browser.close();
}

// Exit explicitly: an open stdin would keep node running after the checks.
main().then(() => process.exit(process.exitCode || 0), (e) => { console.log("FAILED: " + (e.stack || e)); process.exit(1); });
