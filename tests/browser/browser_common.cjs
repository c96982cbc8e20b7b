// Shared by the browser tests: playwright-core from web/node_modules (pinned by
// web/package-lock.json, installed by scripts/install-deps) driving Debian's chromium.
const path = require("path");
const { chromium } = require(path.join(__dirname, "..", "..", "web", "node_modules", "playwright-core"));

function launchOptions() {
  const exe = process.env.MESHRL_CHROMIUM || "/usr/bin/chromium";
  // --no-sandbox: the tests run as root in containers, where chromium's sandbox cannot start.
  return { executablePath: exe, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] };
}

function argOf(name) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) throw new Error("missing " + name);
  return process.argv[i + 1];
}

// Polls fn(arg) in the page until it is truthy; fails with `what` after timeout_s.
async function waitFor(page, fn, arg, timeout_s, what) {
  try {
    await page.waitForFunction(fn, arg, { timeout: timeout_s * 1000, polling: 200 });
  } catch (e) {
    throw new Error(`timed out after ${timeout_s} s waiting for ${what}`);
  }
}

module.exports = { chromium, launchOptions, argOf, waitFor };
