#!/usr/bin/env python3
"""Runs meshrl and its PyTorch-eager peer back to back and prints ratios measured in the same run.

    /usr/bin/python3 bench/compare.py --meshrl build/meshrl --workloads rollout,train --models tiny --rounds 3

Each round runs `meshrl bench W` then the peer, alternating so that machine noise hits both alike;
the figure per program is the median over rounds of its own medians. Also runs `meshrl bench gemm`
first so each figure can be quoted as a share of the machine's sgemm rate (FLOP per token from
BENCH.md: rollout 2 x params, train 6 x params). Prints one JSON line per comparison and a
Markdown table for BENCHMARKS.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PARAMS = {"tiny": 3.3e6, "small": 29e6}  # BENCH.md presets, rounded as BENCH.md rounds them
FLOP_PER_TOKEN = {"rollout": 2, "train": 6}


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshrl", default="build/meshrl")
    ap.add_argument("--workloads", default="rollout,train")
    ap.add_argument("--models", default="tiny")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OMP_WAIT_POLICY="PASSIVE")
    gemm = run_json([a.meshrl, "bench", "gemm", "--threads", str(a.threads)], env)
    gemm_rate = max(g["gflops"] for g in gemm)  # best shape: the machine's matrix-product rate
    print(json.dumps({"bench": "gemm", "threads": a.threads, "gflops_best": gemm_rate, "shapes": gemm}))
    rows = []
    for model in a.models.split(","):
        for w in a.workloads.split(","):
            ours, peer = [], []
            for _ in range(a.rounds):
                ours += [r["tokens_per_s"] for r in run_json(
                    [a.meshrl, "bench", w, "--model", model, "--threads", str(a.threads), "--reps", str(a.reps)], env)]
                peer += [r["tokens_per_s"] for r in run_json(
                    [sys.executable, os.path.join(HERE, "peer", f"{w}_peer.py"), "--model", model,
                     "--threads", str(a.threads), "--reps", str(a.reps)], env)]
            m_ours, m_peer = statistics.median(ours), statistics.median(peer)
            share = m_ours * FLOP_PER_TOKEN[w] * PARAMS[model] / (gemm_rate * 1e9)
            row = {"bench": w, "model": model, "threads": a.threads, "meshrl_tokens_per_s": round(m_ours, 1),
                   "peer_tokens_per_s": round(m_peer, 1), "ratio": round(m_ours / m_peer, 2),
                   "share_of_sgemm": round(share, 3), "rounds": a.rounds, "all_meshrl": ours, "all_peer": peer}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(f"\n| workload | model | threads | meshrl tok/s | peer tok/s | ratio | share of sgemm ({gemm_rate:.0f} GFLOP/s) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['bench']} | {r['model']} | {r['threads']} | {r['meshrl_tokens_per_s']} | {r['peer_tokens_per_s']} "
              f"| {r['ratio']}x | {100 * r['share_of_sgemm']:.0f}% |")


if __name__ == "__main__":
    main()
