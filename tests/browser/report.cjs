// Opens a `meshrl report` file in headless Debian chromium with the network cut off and checks
// that every chart is drawn from the inlined data. Run by tests/integration/test_web.py:
//   node tests/browser/report.cjs --report RUN_DIR/report.html --screenshot out.png
// Prints "RESULT {json}"; exits non-zero on the first failed check.
const path = require("path");
const { chromium, launchOptions, argOf, waitFor } = require("./browser_common.cjs");

async function main() {
  const file = path.resolve(argOf("--report"));
  const browser = await chromium.launch(launchOptions());
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  let fetched = 0;  // self-contained: nothing may be loaded from anywhere but the file itself
  await page.route("**/*", (route) => {
    if (route.request().url() === "file://" + file) return route.continue();
    fetched++;
    return route.abort();
  });
  await page.goto("file://" + file);
  await waitFor(page, () => document.querySelectorAll(".chart canvas").length >= 6, null, 30, "six charts");
  const seen = await page.evaluate(() => ({
    version: REPORT.state.version,
    reward_points: Number(document.querySelector("#chart-reward").dataset.points),
    pass_points: Number(document.querySelector("#chart-pass_at_1").dataset.points),
    charts: Array.from(document.querySelectorAll(".chart")).map((c) => c.querySelector(".u-title")?.textContent || ""),
    nodes: Array.from(document.querySelectorAll(".node")).map((n) => n.dataset.node),
  }));
  if (errors.length) throw new Error("page errors: " + errors.join("; "));
  if (fetched) throw new Error(`the report tried to load ${fetched} resource(s) besides itself`);
  if (seen.reward_points !== seen.version) throw new Error(`reward curve has ${seen.reward_points} points for ${seen.version} versions`);
  if (seen.charts.some((t) => !t)) throw new Error("a chart without a title: " + JSON.stringify(seen.charts));
  const shot = argOf("--screenshot");
  await page.screenshot({ path: shot, fullPage: true });
  console.log("RESULT " + JSON.stringify(seen));
  await browser.close();
}

// Exit explicitly: an open stdin would keep node running after the checks.
main().then(() => process.exit(process.exitCode || 0), (e) => { console.log("FAILED: " + (e.stack || e)); process.exit(1); });
