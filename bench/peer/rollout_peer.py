"""BENCH.md `rollout` workload in plain PyTorch eager, computed the way Hugging Face transformers
runs Llama generation (eager attention, DynamicCache grown by torch.cat every step).

    OMP_NUM_THREADS=1 /usr/bin/python3 bench/peer/rollout_peer.py --model tiny --threads 1

Batch 64 = 8 prompts x a group of 8, prompts of 32 random tokens, 96 new tokens each, multinomial
sampling at temperature 1.0, the log-prob of every sampled token kept, no early stop.
Prints one JSON line; tokens_per_s = 64 * 96 / median seconds (prefill included).
"""

import torch

import peer_common

N_PROMPTS, GROUP, PROMPT_LEN, N_NEW = 8, 8, 32, 96


def main():
    args = peer_common.parser(__doc__.splitlines()[0]).parse_args()
    model, label = peer_common.build_model(args)
    model.eval()
    g = torch.Generator().manual_seed(args.seed + 1)
    prompts = torch.randint(0, model.n_vocab, (N_PROMPTS, PROMPT_LEN), generator=g)
    batch = prompts.repeat_interleave(GROUP, dim=0)  # [B=64, 32]: each prompt 8 times in a row

    def rollout():
        new, logprobs = model.generate_cached(batch, N_NEW, temperature=1.0, generator=g)
        assert new.shape == (N_PROMPTS * GROUP, N_NEW) and bool(torch.isfinite(logprobs).all())

    seconds = peer_common.time_median(rollout, args.reps)
    peer_common.report("rollout", label, args.threads, N_PROMPTS * GROUP * N_NEW, seconds, args.reps)


if __name__ == "__main__":
    main()
