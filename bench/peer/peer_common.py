"""Shared pieces of the PyTorch-eager benchmark peers: the BENCH.md model presets, the common
command-line flags, and the warm-up + median-of-reps timer. Knows nothing about the workloads.

The peers import the reference model from tests/oracle/hf_reference.py, so the peer computes
exactly what the logit-parity oracle checks meshrl against.
"""

import argparse
import json
import os
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "..", "tests", "oracle"))

import torch  # noqa: E402

import hf_reference  # noqa: E402

# BENCH.md presets: Llama, tied embeddings, rope_theta 10000, rms_norm_eps 1e-5.
PRESETS = {
    "tiny": dict(vocab_size=512, hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                 num_key_value_heads=4, intermediate_size=768),
    "small": dict(vocab_size=8192, hidden_size=512, num_hidden_layers=8, num_attention_heads=8,
                  num_key_value_heads=4, intermediate_size=1536),
}


def preset_config(name):
    return dict(PRESETS[name], model_type="llama", tie_word_embeddings=True, rope_theta=10000.0,
                rms_norm_eps=1e-5, hidden_act="silu", max_position_embeddings=2048)


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", default="tiny",
                   help="preset name (tiny, small) or an HF model folder (config.json + safetensors)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (intra-op)")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions after one warm-up")
    p.add_argument("--seed", type=int, default=0)
    return p


def build_model(args):
    """-> (HFLlama, model label). Presets get normal(0, 0.02) weights seeded by --seed."""
    if args.reps < 1 or args.threads < 1:
        sys.exit("--reps and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    if args.model in PRESETS:
        return hf_reference.HFLlama(preset_config(args.model), init_std=0.02, seed=args.seed), args.model
    if os.path.isdir(args.model):
        return hf_reference.load_model(args.model), os.path.basename(os.path.normpath(args.model))
    sys.exit(f"--model {args.model!r}: not a preset ({', '.join(PRESETS)}) nor a folder")


def time_median(fn, reps):
    """Runs fn once to warm up, then reps times; returns the median wall seconds."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def report(bench, model, threads, n_tokens, seconds, reps, **extra):
    print(json.dumps(dict(bench=bench, impl="pytorch-eager", model=model, threads=threads,
                          tokens_per_s=round(n_tokens / seconds, 1), seconds=round(seconds, 4),
                          reps=reps, **extra), separators=(",", ":")), flush=True)
