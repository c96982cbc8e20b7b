"""BENCH.md `train` workload in plain PyTorch eager, the way a user would write a GRPO step on a
Hugging Face Llama: full forward, log-softmax, clipped surrogate, backward, torch.optim.AdamW.

    OMP_NUM_THREADS=1 /usr/bin/python3 bench/peer/train_peer.py --model tiny --threads 1

64 sequences x 128 tokens; the loss covers the last 96 positions (the completion): ratio =
exp(logp_new - logp_old) with logp_old = detached logp_new + small fixed noise, clipped to
0.8..1.28, one advantage per sequence, mean over all completion tokens.
Prints one JSON line; tokens_per_s = 64 * 128 / median seconds of one whole step.
"""

import torch

import peer_common

B, T, N_COMPLETION = 64, 128, 96
CLIP_LO, CLIP_HI = 0.8, 1.28


def grpo_loss(logp_new, logp_old, advantages):
    """logp_* [B, N] float32, advantages [B] -> scalar: token-mean clipped surrogate (negated)."""
    ratio = torch.exp(logp_new - logp_old)  # [B, N]
    adv = advantages[:, None]  # [B, 1]
    surrogate = torch.minimum(ratio * adv, ratio.clamp(CLIP_LO, CLIP_HI) * adv)
    return -surrogate.mean()


def main():
    args = peer_common.parser(__doc__.splitlines()[0]).parse_args()
    model, label = peer_common.build_model(args)
    model.train()
    g = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(0, model.n_vocab, (B, T), generator=g)  # [B, T]
    advantages = torch.randn(B, generator=g)  # [B]
    noise = 0.01 * torch.randn(B, N_COMPLETION, generator=g)  # [B, N]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)
    prompt_len = T - N_COMPLETION

    def step():
        logits = model(ids)  # [B, T, V]
        # position t predicts token t+1, so the completion tokens prompt_len..T-1 are scored by
        # logits at prompt_len-1..T-2
        logp = torch.log_softmax(logits[:, prompt_len - 1:T - 1].float(), dim=-1)  # [B, N, V]
        logp_new = logp.gather(2, ids[:, prompt_len:, None])[..., 0]  # [B, N]
        loss = grpo_loss(logp_new, logp_new.detach() + noise, advantages)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        assert bool(torch.isfinite(loss))

    seconds = peer_common.time_median(step, args.reps)
    peer_common.report("train", label, args.threads, B * T, seconds, args.reps)


if __name__ == "__main__":
    main()
