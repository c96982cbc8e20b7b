#!/usr/bin/env python3
"""A toy of the mesh's two-way error feedback: N nodes quantise their updates (with their own
residuals), and a coordinator quantises the mean (with its own residual). Its parts follow
src/mesh/quantize.cpp: blockwise absmax int8, absmax ternary, and ternary with least-squares
scales. The updates are Gaussian and share part of their direction. For each pair of up and down
codes it prints three things: how far the applied weights drift from the exact mean of the updates
(relative), the median cosine between successive broadcasts, and the broadcast's share of non-zero
codes (its bytes, roughly).

    /usr/bin/python3 bench/two_way_ef_toy.py

Why it exists: it reproduces, in seconds and without a model, the ping-pong that
bench/broadcast_trace.py found in the demo's absmax ternary broadcast. Measured there: cosine
-0.30 here against -0.32 on the demo. It isolates the cause: the down code re-quantising a mean of
ternary codes (BENCHMARKS.md, "demo", session 13). It says nothing about learning; the demo runs
decide that.
"""
import numpy as np

P, BLOCK, NODES, ROUNDS = 2048 * 64, 2048, 4, 32


def quantise(x, code):
    xb = x.reshape(-1, BLOCK)
    a = np.abs(xb).max(1, keepdims=True)
    a[a == 0] = 1e-30
    if code == "int8":
        s = a / 127
        c = np.round(xb / s)
    else:
        c = np.clip(np.round(xb / a), -1, 1)  # absmax ternary's codes
        if code == "ternary":
            s = a
        else:  # "ternary-mean": the least-squares scale for those codes
            k = np.maximum((c != 0).sum(1, keepdims=True), 1)
            s = (np.abs(xb) * (c != 0)).sum(1, keepdims=True) / k
    return (c * s).reshape(-1), float(np.mean(c != 0))


def run(up, down, seed=0, shared=0.5):
    rng = np.random.default_rng(seed)
    node_residual = np.zeros((NODES, P))
    coord_residual = np.zeros(P)
    applied, exact = np.zeros(P), np.zeros(P)
    # A persistent direction with log-normal per-coordinate scales, as pseudo-gradients have.
    base = rng.standard_normal(P) * np.exp(rng.standard_normal(P) * 0.5)
    prev, cosines, density = None, [], []
    for _ in range(ROUNDS):
        common = base * 0.5 + rng.standard_normal(P)
        sent = []
        for i in range(NODES):
            delta = shared * common + (1 - shared) * 2 * rng.standard_normal(P)
            q, _ = quantise(delta + node_residual[i], up)
            node_residual[i] += delta - q
            sent.append(q)
            exact += delta / NODES
        mean = np.mean(sent, 0)
        b, d = quantise(mean + coord_residual, down)
        coord_residual += mean - b
        applied += b
        density.append(d)
        if prev is not None:
            cosines.append(float(np.dot(b, prev) / np.linalg.norm(b) / np.linalg.norm(prev)))
        prev = b
    drift = np.linalg.norm(applied - exact) / np.linalg.norm(exact)
    return drift, float(np.median(cosines[4:])), float(np.mean(density[5:]))


def main():
    print("up            down          drift  cos(prev)  down non-zero")
    for up, down in [("int8", "int8"), ("ternary", "int8"), ("int8", "ternary"), ("ternary", "ternary"),
                     ("ternary", "ternary-mean"), ("ternary-mean", "ternary-mean")]:
        drift, cos, dens = run(up, down)
        print(f"{up:13s} {down:13s} {drift:5.3f}  {cos:9.3f}  {dens:13.3f}")


if __name__ == "__main__":
    main()
