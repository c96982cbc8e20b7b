"""sgemm rate of torch.mm (float32) at the BENCH.md shapes, to cross-check `meshrl bench gemm`
and to quote the peers' figures as a share of the machine's matrix-product rate.

    OMP_NUM_THREADS=1 /usr/bin/python3 bench/peer/gemm_peer.py --threads 1

Shapes are M x K x N: [M, K] @ [K, N]. 8192x256x768 is the tiny train step's MLP (64 x 128
tokens, hidden 256 -> ff 768), 64x256x768 the same for one decode step of batch 64.
Prints one JSON line per shape: GFLOP/s = 2*M*K*N / median seconds of one product.
"""

import argparse
import json
import statistics
import time

import torch

SHAPES = [(8192, 256, 768), (64, 256, 768), (2048, 2048, 2048)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=0.2,
                   help="each repetition loops the product for at least this long")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    for m, k, n in SHAPES:
        a = torch.randn(m, k, generator=g)
        b = torch.randn(k, n, generator=g)
        out = torch.empty(m, n)
        torch.mm(a, b, out=out)  # warm-up
        t0 = time.perf_counter()  # size the loop so one repetition lasts min_seconds
        torch.mm(a, b, out=out)
        iters = max(1, int(args.min_seconds / max(time.perf_counter() - t0, 1e-6)))
        per_product = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                torch.mm(a, b, out=out)
            per_product.append((time.perf_counter() - t0) / iters)
        s = statistics.median(per_product)
        print(json.dumps(dict(bench="gemm", impl="pytorch-eager", shape=f"{m}x{k}x{n}",
                              threads=args.threads, gflops=round(2 * m * k * n / s / 1e9, 2),
                              seconds=s, reps=args.reps), separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
