#!/usr/bin/env python3
"""Misbehaving nodes: real processes on loopback, tiny model, 1-digit addition
(mesh-tiny.toml), seeded. A node lies through the hidden `meshrl node --test-misbehave` switch.
    python3 tests/integration/test_honesty.py --meshrl build-honest/meshrl --case liar_excluded
Cases:
  liar_excluded  3 nodes, reward audits on every update ([mesh] audit_rate = 1); dublin claims
                 verifier reward + 1 for every rollout. Its first failed audit flags it (ledger
                 event audit_failed, its update rejected with code audit_failed), the second
                 excludes it (event excluded; later updates rejected with code excluded), while
                 paris and zurich pass every audit and the run reaches its last version with all
                 three on the final hash. About 40 s.
  byzantine      8 nodes, one (node7) sends -10 x its real pseudo-gradient every round, properly
                 signed. Three runs of 6 rounds x 2 inner steps from the same warm start: clean
                 (mean), attacked with a robust aggregator (trimmed_mean), attacked with the plain
                 mean. The nodes' training reward of versions 2-6: robust within TRAIN_BAND of
                 clean, plain mean at least MEAN_TRAIN_DROP below; the final greedy held-out
                 pass@1 (coordinator --eval) of the robust run no more than one problem below
                 clean (1-digit addition holds out only 10 problems: 10-point steps). A fourth run: trimmed_mean against an attacker that
                 also inflates its samples and repeats itself (its copies refused: claim,
                 one_vote). About 3 min on two loaded cores (4 runs of 35-50 s).
  byzantine_full the same with every robust aggregator (trimmed_mean, median, centered_clip) and
                 more rounds; prints the table for BENCHMARKS.md. Not in ctest (several minutes):
    python3 tests/integration/test_honesty.py --meshrl build-honest/meshrl --case byzantine_full
                 At another scale (by hand): MESHRL_TEST_CONFIG (a run file, mesh_harness.py),
                 MESHRL_TEST_ROUNDS, MESHRL_TEST_INNER_STEPS, MESHRL_TEST_PROMPTS_PER_NODE
                 (defaults 10, 2, 2), MESHRL_TEST_RULES (comma-separated robust rules) and
                 MESHRL_TEST_ATTACK (sign_flip_x10, or sign_flip_x10_repeat: the attacker also
                 claims 10^9 x its samples and repeats each update four times).
MESHRL_KEEP_TEST_DIRS=1 keeps each case's logs and run directory.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mesh_harness import RESOLVES_3_POINTS, Mesh, run_cases  # noqa: E402


def events(m, node, event):
    return m.query(f"select id, detail from node_events where node = '{node}' and event = '{event}' order by id")


def liar_excluded(meshrl):
    names = ["paris", "zurich", "dublin"]
    rounds = 5
    # quorum 2 of 3: the honest pair closes rounds without waiting for the liar's rejected update.
    m = Mesh(meshrl, "liar", [f"--mesh.rounds={rounds}", "--mesh.quorum=0.66", "--mesh.round_deadline_s=20",
                              "--mesh.audit_rate=1", "--mesh.audit_samples=4", "--mesh.audit_exclude_after=2"])
    m.start_coordinator()
    for i, n in enumerate(names):
        m.start_node(n, shard=f"{i}/3", extra=["--test-misbehave=inflate_rewards"] if n == "dublin" else [])
    for n in names:
        m.wait_exit(n, 240)
    assert m.version() == rounds, m.version()

    # The liar: flagged by its first failed audit, excluded by its second, never applied.
    failed = events(m, "dublin", "audit_failed")
    excluded = events(m, "dublin", "excluded")
    assert len(failed) >= 2, f"dublin failed {len(failed)} audit(s): {failed}"
    assert len(excluded) == 1, excluded
    assert failed[0][0] < failed[1][0] < excluded[0][0], (failed, excluded)
    assert "the verifier gives" in failed[0][1] or "reward_mean" in failed[0][1], failed[0][1]
    rows = m.query("select state, reason from updates where node = 'dublin' order by received_at")
    assert all(st == 2 for st, _ in rows), f"an update of dublin was applied or left pending: {rows}"
    codes = [reason.split(":")[0] for _, reason in rows]
    assert codes[:2] == ["audit_failed", "audit_failed"], codes
    assert "excluded" in codes[2:], f"no update of dublin refused as excluded after its exclusion: {codes}"
    assert "audit of" in m.read("dublin") and "rejected: excluded" in m.read("dublin")

    # The honest nodes pass every audit and every update of theirs counts.
    for n in ["paris", "zurich"]:
        assert not events(m, n, "audit_failed"), events(m, n, "audit_failed")
        assert len(events(m, n, "audit_passed")) >= rounds - 1, events(m, n, "audit_passed")
        bad = m.query(f"select reason from updates where node = '{n}' and state = 2")
        assert all(not r.startswith(("audit_failed", "excluded")) for (r,) in bad), bad
    m.check_hashes(names)
    m.check_exactly_once(names)
    m.log(f"dublin: {len(failed)} failed audits, excluded after the 2nd; {codes.count('excluded')} later update(s) refused")
    m.close()


# One byzantine run: 8 nodes on shards of the task, node7 optionally attacking.
def byzantine_run(meshrl, label, aggregator, attack, rounds, inner_steps, ledger_check=None):
    names = [f"node{i}" for i in range(8)]
    m = Mesh(meshrl, f"byz-{label}", [f"--mesh.rounds={rounds}", f"--mesh.inner_steps={inner_steps}", f"--mesh.aggregator={aggregator}",
                                      "--mesh.lease_s=60", "--mesh.heartbeat_s=2", "--mesh.round_deadline_s=120",
                                      f"--grpo.prompts_per_step={os.environ.get('MESHRL_TEST_PROMPTS_PER_NODE', '2')}"])
    m.start_coordinator(extra=["--eval"])
    for i, n in enumerate(names):
        m.start_node(n, shard=f"{i}/8", extra=[f"--test-misbehave={attack}"] if attack and n == "node7" else [])
    for n in names:
        m.wait_exit(n, float(os.environ.get("MESHRL_TEST_NODE_WAIT_S", "400")))
    m.wait_exit("coordinator", 120)
    if ledger_check:
        ledger_check(m)
    with open(os.path.join(m.run_dir, "summary.json")) as f:
        s = json.load(f)
    assert s["rounds"] == rounds, s
    m.check_hashes(names)
    s["seconds"] = time.time() - m.t0
    # The nodes' training reward of versions 2.. (8 nodes x their completions a version): what the
    # attack does to learning, resolved far finer than 10 held-out problems.
    with open(os.path.join(m.run_dir, "metrics.jsonl")) as f:
        rewards = [r["reward_mean"] for r in map(json.loads, f) if r.get("kind") == "version" and r["version"] >= 2]
    s["train_reward"] = sum(rewards) / len(rewards)
    m.log(f"{label}: aggregator {aggregator}, attack {attack}: pass@1 {s['pass_at_1_before']:.3f} -> {s['pass_at_1_after']:.3f}, "
          f"training reward of versions 2-{rounds} {s['train_reward']:.3f}, in {s['seconds']:.0f} s")
    m.close()
    return s


# Measured (2 loaded cores): clean 0.70 -> 0.60; under attack trimmed_mean 0.60 (6 and 10 rounds),
# median and centered_clip 0.70 (10 rounds), the plain mean 0.40 (6 and 10 rounds): 20 points
# below clean. The margin asserted is half that: one problem of the 10 held out.
MEAN_DROP = 0.10
# Training reward (versions 2-6): the robust rule within TRAIN_BAND of clean, the attacked mean at
# least MEAN_TRAIN_DROP below it (measured 2026-12-02: 0.95 / 0.93 / 0.69).
TRAIN_BAND = 0.06
MEAN_TRAIN_DROP = 0.12


def byzantine_compare(meshrl, robust_rules, rounds, inner_steps, attack="sign_flip_x10"):
    clean = byzantine_run(meshrl, "clean", "mean", None, rounds, inner_steps)
    results = {"clean": clean}
    for rule in robust_rules:
        results[rule] = byzantine_run(meshrl, rule, rule, attack, rounds, inner_steps)
    results["mean_attacked"] = byzantine_run(meshrl, "mean", "mean", attack, rounds, inner_steps)
    print("run            pass@1 before  after   train reward  seconds")
    for k, s in results.items():
        print(f"{k:14s} {s['pass_at_1_before']:.3f}          {s['pass_at_1_after']:.3f}   {s['train_reward']:.3f}         {s['seconds']:.0f}")
    c = clean["pass_at_1_after"]
    return c, results


def byzantine(meshrl):
    c, r = byzantine_compare(meshrl, ["trimmed_mean"], rounds=6, inner_steps=2)
    robust, mean = r["trimmed_mean"], r["mean_attacked"]
    # Held-out pass@1 over 10 problems moves in 10-point steps and barely at 6 rounds (2026-12-02:
    # clean 0.70, trimmed_mean 0.60, attacked mean 0.60), so the attack's effect is asserted on
    # the training reward of versions 2-6 (measured: clean 0.95, trimmed_mean 0.93, mean 0.69),
    # and the held-out figure only as a floor for the robust rule.
    ct = r["clean"]["train_reward"]
    assert robust["train_reward"] >= ct - TRAIN_BAND, f"trimmed_mean under attack: training reward {robust['train_reward']:.3f}, clean {ct:.3f}"
    assert mean["train_reward"] <= ct - MEAN_TRAIN_DROP, f"the plain mean under attack did not degrade: {mean['train_reward']:.3f} vs clean {ct:.3f}"
    assert robust["pass_at_1_after"] >= c - MEAN_DROP - 0.03, f"trimmed_mean under attack: pass@1 {robust['pass_at_1_after']:.3f}, clean {c:.3f}"
    # The same attacker also claims 10^9 times its samples and repeats each update four times:
    # the claim is refused, one copy a round counts, and trimmed_mean still holds.
    rep = byzantine_run(meshrl, "trimmed_mean_repeat", "trimmed_mean", "sign_flip_x10_repeat", 6, 2, ledger_check=attacker_refused)
    assert rep["train_reward"] >= ct - TRAIN_BAND, f"trimmed_mean under a repeating attacker: training reward {rep['train_reward']:.3f}, clean {ct:.3f}"
    assert rep["pass_at_1_after"] >= c - MEAN_DROP - 0.03, f"trimmed_mean under a repeating attacker: {rep['pass_at_1_after']:.3f}, clean {c:.3f}"


# The repeating attacker's extra copies are refused with their codes; at most one update of node7
# per version is applied.
def attacker_refused(m):
    codes = [r[0].split(":")[0] for r in m.query("select reason from updates where node = 'node7' and state = 2")]
    assert codes.count("claim") >= 1, codes
    assert codes.count("one_vote") >= 4, codes
    per_version = m.query("select applied_version, count(*) from updates where node = 'node7' and state = 1 group by applied_version")
    assert per_version and all(n == 1 for _, n in per_version), per_version


def byzantine_full(meshrl):
    rules = os.environ.get("MESHRL_TEST_RULES", "trimmed_mean,median,centered_clip").split(",")
    c, r = byzantine_compare(meshrl, rules, rounds=int(os.environ.get("MESHRL_TEST_ROUNDS", "10")),
                             inner_steps=int(os.environ.get("MESHRL_TEST_INNER_STEPS", "2")),
                             attack=os.environ.get("MESHRL_TEST_ATTACK", "sign_flip_x10"))
    for rule in rules:
        print(f"{rule}: {100 * (r[rule]['pass_at_1_after'] - c):+.1f} points vs clean")
    print(f"mean (attacked): {100 * (r['mean_attacked']['pass_at_1_after'] - c):+.1f} points vs clean")
    if RESOLVES_3_POINTS:
        for rule in rules:
            assert abs(r[rule]["pass_at_1_after"] - c) <= 0.03, f"{rule} under attack: {r[rule]['pass_at_1_after']:.3f}, clean {c:.3f}"
        assert r["mean_attacked"]["pass_at_1_after"] <= c - MEAN_DROP, "the plain mean under attack did not degrade"


if __name__ == "__main__":
    run_cases([liar_excluded, byzantine, byzantine_full])
