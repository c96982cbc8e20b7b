#!/usr/bin/env python3
"""Seeing a run: /metrics, the dashboard and `meshrl report` against short real loopback runs
(tiny model, 3 nodes, a few rounds; mesh_harness.py). One case per ctest entry:
    python3 tests/integration/test_web.py --meshrl build-net/meshrl --case metrics
Cases:
  metrics    /metrics parses with prometheus_client's text parser and its counters equal the
             ledger's (ledger.sqlite read with sqlite3 at the same instant); /api/state and
             RUN_DIR/metrics.jsonl hold one point per committed version.
  dashboard  headless Debian chromium (playwright-core from web/node_modules) on the live page:
             reward curve points = committed versions, a panel per node with its name and version,
             a node SIGKILLed during the test shown as dropped within its lease; screenshot saved
             to --artifacts (default: beside the binary, test-artifacts/dashboard.png).
             Then `meshrl report RUN_DIR` on the finished run writes report.html (self-contained);
             chromium opens it from disk with the network cut off and finds every chart drawn.
  node_metrics  one node serves /metrics (`meshrl node --http`): scraped through a 4-round run,
             its counters never run ahead of the ledger and agree with it (bytes uploaded = the
             ledger's bytes for that node, rounds = accepted + rejected = its ledger rows = the
             updates it logged, rollouts = its ledger samples). Then `meshrl report` writes the
             SVG charts: each parses as XML, with one point per committed version (pass@1: one
             per evaluation of `coordinator --eval`), one bar per staleness bucket. About 40 s.
MESHRL_KEEP_TEST_DIRS=1 keeps each case's logs and run directory.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mesh_harness import ROOT, Mesh, free_port  # noqa: E402

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

NAMES = ["paris", "zurich", "dublin"]
BROWSER_DIR = os.path.join(ROOT, "tests", "browser")


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def ledger_counts(m):
    """What /metrics must say, read from the ledger in one go (None while the file is busy)."""
    q = m.query
    rows = q("select state, count(*), coalesce(sum(bytes), 0), coalesce(sum(n_samples), 0) from updates group by state")
    st = q("select count(*), coalesce(sum(applied_version - 1 - base_version), 0) from updates where state = 1")
    per_node = q("select node, state, count(*) from updates group by node, state")
    rounds = q("select closed_by, count(*) from rounds where version > 0 group by closed_by")
    version = q("select max(version) from rounds")
    if not version:
        return None
    by_state = {s: (n, b, k) for s, n, b, k in rows}
    return {
        "version": version[0][0],
        "rounds": dict(rounds),
        "applied": by_state.get(1, (0, 0, 0))[0],
        "pending": by_state.get(0, (0, 0, 0))[0],
        "rejected": by_state.get(2, (0, 0, 0))[0],
        "bytes": sum(b for _, b, _ in by_state.values()),
        "samples_applied": by_state.get(1, (0, 0, 0))[2],
        "staleness": (st[0][0], st[0][1]),
        "per_node": {(n, s): c for n, s, c in per_node},
    }


def stable_scrape(m, base, timeout=60):
    """A /metrics text and the ledger's counts from one instant: the ledger read before and after
    the scrape agree (rounds take seconds; a scrape milliseconds)."""
    end = time.time() + timeout
    while time.time() < end:
        before = ledger_counts(m)
        status, ctype, text = get(base + "/metrics")
        after = ledger_counts(m)
        if before is not None and before == after:
            return status, ctype, text, before
        time.sleep(0.2)
    m.fail("the ledger never held still for a scrape")


def metrics(meshrl):
    m = Mesh(meshrl, "metrics", ["--mesh.rounds=4"])
    port = free_port()
    m.start_coordinator(extra=["--http", str(port)])
    m.wait_for(lambda: f"dashboard http://127.0.0.1:{port}/" in m.read("coordinator"), 10, "the dashboard URL in the log")
    base = f"http://127.0.0.1:{port}"
    for n in NAMES:
        m.start_node(n)
    m.wait_for(lambda: m.version() >= 2, 180, "version 2")
    status, ctype, text, led = stable_scrape(m, base)
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), (status, ctype)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    m.log(f"/metrics: {len(fams)} families at version {led['version']}")

    def value(fam, **labels):
        hits = [s.value for s in fams[fam].samples if all(s.labels.get(k) == v for k, v in labels.items())]
        assert len(hits) == 1, (fam, labels, fams[fam].samples)
        return hits[0]

    def total(fam, suffix="_total", **labels):
        return sum(s.value for s in fams[fam].samples
                   if s.name == fam + suffix and all(s.labels.get(k) == v for k, v in labels.items()))

    assert fams["meshrl_rounds_committed"].type == "counter"
    assert fams["meshrl_update_staleness"].type == "histogram"
    assert fams["meshrl_nodes"].type == "gauge"
    assert value("meshrl_policy_version") == led["version"], (value("meshrl_policy_version"), led)
    for by, n in led["rounds"].items():
        assert value("meshrl_rounds_committed", closed_by=by) == n, (by, n)
    assert total("meshrl_rounds_committed") == led["version"]
    assert total("meshrl_updates", outcome="applied") == led["applied"], (text, led)
    assert total("meshrl_updates", outcome="pending") == led["pending"], (text, led)
    assert total("meshrl_updates", outcome="rejected") == led["rejected"], (text, led)
    assert led["applied"] >= led["version"], led
    assert total("meshrl_ledger_update_bytes") == led["bytes"], (text, led)
    assert total("meshrl_samples_applied") == led["samples_applied"]
    # Every recorded update crossed the wire, so the wire counter is at least the ledger's.
    assert total("meshrl_bytes_received") >= led["bytes"] > 0
    assert total("meshrl_bytes_sent", kind="weights") > 0
    assert value("meshrl_update_staleness", le="+Inf") == led["staleness"][0]
    assert total("meshrl_update_staleness", "_count") == led["staleness"][0]
    assert total("meshrl_update_staleness", "_sum") == led["staleness"][1]
    for n in NAMES:
        state_of = {1: "applied", 0: "pending", 2: "rejected"}
        for s_num, outcome in state_of.items():
            assert value("meshrl_node_updates", node=n, outcome=outcome) == led["per_node"].get((n, s_num), 0), (n, outcome)
    assert value("meshrl_nodes", state="online") + value("meshrl_nodes", state="straggling") == len(NAMES)
    assert value("meshrl_nodes", state="dropped") == 0

    status, ctype, body = get(base + "/api/state")
    state = json.loads(body)
    assert sorted(n["name"] for n in state["nodes"]) == sorted(NAMES), state["nodes"]
    committed = [p["version"] for p in state["versions"] if p["version"] >= 1]
    assert committed == list(range(1, state["version"] + 1)), (committed, state["version"])
    status, ctype, page = get(base + "/")
    assert status == 200 and "text/html" in ctype and "dashboard.js" in page
    assert get(base + "/assets/uPlot.iife.min.js")[0] == 200

    for n in NAMES:
        m.wait_exit(n, 180)
    with open(os.path.join(m.run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    versions = [x["version"] for x in lines if x["kind"] == "version"]
    assert versions == [1, 2, 3, 4], versions
    vs = [x for x in lines if x["kind"] == "version"]
    assert all(0 <= x["reward_mean"] <= 1 and x["entropy_mean"] >= 0 and x["n_updates"] >= 1 for x in vs), vs
    assert any(x["entropy_mean"] > 0 for x in vs), vs  # the nodes' KL/entropy reach the coordinator
    m.log(f"metrics.jsonl: {len(versions)} versions, reward {[round(x['reward_mean'], 3) for x in lines]}")
    m.close()


def browser(script, args, **kw):
    return subprocess.Popen(["node", os.path.join(BROWSER_DIR, script)] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, **kw)


def dashboard(meshrl, artifacts):
    lease = 4
    # More rounds than the checks need, and the test ends the run itself: on a fast machine six
    # rounds closed in 4 s, before the browser had launched, and the kill found a finished run.
    m = Mesh(meshrl, "dashboard", ["--mesh.rounds=400", f"--mesh.lease_s={lease}", "--mesh.heartbeat_s=0.5"])
    port = free_port()
    m.start_coordinator(extra=["--http", str(port)])
    for n in NAMES:
        m.start_node(n)
    m.wait_for(lambda: m.version() >= 1, 180, "version 1")
    shot = os.path.join(artifacts, "dashboard.png")
    b = browser("dashboard.cjs", ["--url", f"http://127.0.0.1:{port}/", "--nodes", ",".join(NAMES), "--kill", "dublin",
                                  "--lease", str(lease), "--screenshot", shot])
    try:
        for line in b.stdout:
            m.log("browser: " + line.rstrip())
            if line.startswith("KILL "):
                m.kill(line.split()[1])
                b.stdin.write("killed\n")
                b.stdin.flush()
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
        rc = b.wait(timeout=120)
    finally:
        if b.poll() is None:
            b.kill()
    assert rc == 0, f"browser checks failed ({rc})"
    committed = m.query("select count(*) from rounds where version > 0")[0][0]
    assert result["reward_points"] <= committed, (result, committed)
    assert os.path.getsize(shot) > 10000, shot
    m.log(f"screenshot {shot}")
    assert m.version() < 400, "the run finished before the browser's checks did; the test saw no live run"
    for n in ["paris", "zurich"]:
        m.kill(n)
    m.kill("coordinator", signal.SIGTERM)
    assert m.procs["coordinator"].returncode == 0, m.read("coordinator")[-1500:]

    # The finished run's report, opened from disk with the network cut off.
    out = subprocess.run([meshrl, "report", m.run_dir], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    report = os.path.join(m.run_dir, "report.html")
    assert os.path.exists(report), out.stdout
    r = subprocess.run(["node", os.path.join(BROWSER_DIR, "report.cjs"), "--report", report,
                        "--screenshot", os.path.join(artifacts, "report.png")], capture_output=True, text=True, timeout=120)
    m.log("report browser: " + r.stdout.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    seen = json.loads(r.stdout.strip().splitlines()[-1][len("RESULT "):])
    assert seen["version"] == m.version() and seen["reward_points"] == m.version(), (seen, m.version())
    assert set(NAMES) <= set(seen["nodes"]), seen
    m.close()


def node_metrics(meshrl):
    rounds = 4
    m = Mesh(meshrl, "node-metrics", [f"--mesh.rounds={rounds}"])
    m.start_coordinator(extra=["--eval"])
    port = free_port()
    m.start_node("paris", extra=["--http", str(port)])
    m.start_node("zurich")
    m.wait_for(lambda: f"metrics http://127.0.0.1:{port}/metrics" in m.read("paris"), 60, "the node's metrics URL in its log")
    base = f"http://127.0.0.1:{port}"
    per_step = 4 * 4  # mesh-tiny.toml: prompts_per_step x group_size completions per inner step

    def scrape():
        """The node's counters, then the ledger's and the node log's view of paris (read after)."""
        try:
            status, ctype, text = get(base + "/metrics", timeout=5)
        except OSError:
            return None  # the node has exited
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), (status, ctype)
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        led = m.query("select count(*), coalesce(sum(bytes), 0), coalesce(sum(n_samples), 0) from updates where node = 'paris'")
        version = m.version()
        log = m.read("paris")
        answered = len(re.findall(r"update paris\.\S+ (?:acknowledged|rejected)", log))
        return fams, (led[0] if led else None), version, answered

    def one(fams, name, **labels):
        hits = [s.value for s in fams[name].samples if all(s.labels.get(k) == v for k, v in labels.items())
                and not s.name.endswith("_created")]
        assert len(hits) == 1, (name, labels, fams[name].samples)
        return hits[0]

    agreed = []
    scrapes = 0
    end = time.time() + 180
    while time.time() < end:
        got = scrape()
        if got is None:
            break
        fams, led, version, answered = got
        if led is None:
            time.sleep(0.2)
            continue
        scrapes += 1
        node = {k: one(fams, "meshrl_node_" + k, node="paris") for k in
                ["rounds", "updates_accepted", "inner_steps", "rollouts", "bytes_uploaded", "policy_version"]}
        rejected = sum(s.value for s in fams["meshrl_node_updates_rejected"].samples if s.name.endswith("_total"))
        steps = one(fams, "meshrl_node_inner_step_seconds", node="paris", le="+Inf")
        assert fams["meshrl_node_rounds"].type == "counter" and fams["meshrl_node_inner_step_seconds"].type == "histogram"
        assert node["rounds"] == node["updates_accepted"] + rejected, node
        assert steps == node["inner_steps"] and node["rollouts"] == per_step * node["inner_steps"], (steps, node)
        # The coordinator records an update before answering, and the node counts it after the answer.
        rows, ledger_bytes, ledger_samples = led
        assert node["bytes_uploaded"] <= ledger_bytes and node["rounds"] <= rows, (node, led)
        assert -1 <= node["policy_version"] <= version, (node, version)
        if (node["rounds"] >= 2 and node["rounds"] == rows == answered and node["bytes_uploaded"] == ledger_bytes
                and node["rollouts"] >= ledger_samples == per_step * rows):
            agreed.append(node)
        if version >= rounds:
            break
        time.sleep(0.25)
    assert agreed, f"the node's /metrics never agreed with the ledger in {scrapes} scrapes"
    m.log(f"node /metrics: {scrapes} scrapes, {len(agreed)} agreeing with the ledger; last {agreed[-1]}")
    for n in ["paris", "zurich"]:
        m.wait_exit(n, 180)
    m.wait_exit("coordinator", 120)
    coord_log = m.read("coordinator")
    # --eval evaluates before and after; each shows its progress (plain lines: the log is a file).
    done = re.findall(r"^eval (\d+)/(\d+) \(100%\)", coord_log, re.M)
    assert len(done) == 2 and all(a == b for a, b in done), f"evaluation progress lines: {done}"

    # The report's SVG charts.
    out = subprocess.run([meshrl, "report", m.run_dir], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    with open(os.path.join(m.run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    evals = sorted({x["version"] for x in lines if x["kind"] == "eval"})
    committed = m.version()
    applied = m.query("select count(*) from updates where state = 1")[0][0]
    assert committed == rounds and evals == [0, rounds], (committed, evals)
    ns = {"svg": "http://www.w3.org/2000/svg"}

    def points(root, name):
        lines_ = [p for p in root.iterfind(".//svg:polyline", ns) if p.get("data-name") == name]
        assert len(lines_) == 1, (name, [p.get("data-name") for p in root.iterfind(".//svg:polyline", ns)])
        return len(lines_[0].get("points").split())

    roots = {}
    for key in ["reward", "pass_at_1", "bytes", "staleness"]:
        path = os.path.join(m.run_dir, f"report-{key}.svg")
        assert f"chart: {path}" in out.stdout, out.stdout
        roots[key] = ET.parse(path).getroot()  # raises on malformed XML
        assert roots[key].tag == "{http://www.w3.org/2000/svg}svg", roots[key].tag
    assert points(roots["reward"], "reward") == committed
    assert points(roots["pass_at_1"], "pass@1 %") == len(evals)
    assert points(roots["bytes"], "mesh (up + down)") == committed
    assert points(roots["bytes"], "data-parallel fp32") == committed
    bars = [r for r in roots["staleness"].iterfind(".//svg:rect", ns) if r.get("class") == "bar"]
    assert len(bars) == 7 and sum(float(b.get("data-value")) for b in bars) == applied, ([b.attrib for b in bars], applied)
    m.log(f"report: 4 SVG charts, {committed} versions, evals at {evals}, {applied} applied updates in the histogram")
    m.close()


CASES = ["metrics", "dashboard", "node_metrics"]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshrl", required=True)
    ap.add_argument("--case", required=True, choices=CASES)
    ap.add_argument("--artifacts", default=None, help="where screenshots go (default BINARY_DIR/test-artifacts)")
    a = ap.parse_args()
    meshrl = os.path.abspath(a.meshrl)
    artifacts = a.artifacts or os.path.join(os.path.dirname(meshrl), "test-artifacts")
    os.makedirs(artifacts, exist_ok=True)
    t = time.time()
    try:
        if a.case == "metrics":
            metrics(meshrl)
        elif a.case == "node_metrics":
            node_metrics(meshrl)
        else:
            dashboard(meshrl, artifacts)
    finally:
        for m in Mesh.instances:
            m.close(keep=True)
    print(f"{a.case}: ok in {time.time() - t:.0f} s")
