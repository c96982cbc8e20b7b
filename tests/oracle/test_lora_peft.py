"""LoRA adapters against plain PyTorch: an adapter folder written here in PEFT's layout (names
base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight, adapter_config.json keys r,
lora_alpha, target_modules) must give `meshrl logprobs --adapter` the log-probs of the reference
model with merged weights W + (lora_alpha / r) B A; `meshrl merge` must write that merged model;
adapters that do not fit are refused; `meshrl plan --json` counts the folder's parameters.

    /usr/bin/python3 tests/oracle/test_lora_peft.py --meshrl build/meshrl

Prints one line per case and 'N passed, M failed'; exit status non-zero on a failure.
"""

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import hf_reference  # noqa: E402
from test_logit_parity import TEXTS, TOL, Results, last_json, make_case_folder, run_meshrl  # noqa: E402

RANK, ALPHA = 4, 8.0
TARGETS = ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]


def module_of(target):
    return "self_attn" if target in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"


def write_adapter(folder, config, state, seed, extra_config=None):
    """A PEFT-layout adapter with random A and B -> the merged state dict (the reference)."""
    os.makedirs(folder, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    tensors, merged = {}, dict(state)
    for layer in range(config["num_hidden_layers"]):
        for t in TARGETS:
            w_name = f"model.layers.{layer}.{module_of(t)}.{t}.weight"
            out_f, in_f = state[w_name].shape
            a = 0.2 * torch.randn(RANK, in_f, generator=g)
            b = 0.2 * torch.randn(out_f, RANK, generator=g)
            prefix = f"base_model.model.model.layers.{layer}.{module_of(t)}.{t}"
            tensors[prefix + ".lora_A.weight"] = a
            tensors[prefix + ".lora_B.weight"] = b
            merged[w_name] = state[w_name].double() + ALPHA / RANK * (b.double() @ a.double())
    hf_reference.write_safetensors(os.path.join(folder, "adapter_model.safetensors"), tensors)
    cfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": ALPHA, "lora_dropout": 0.0,
           "target_modules": TARGETS, "bias": "none", "fan_in_fan_out": False, "base_model_name_or_path": "case"}
    cfg.update(extra_config or {})
    with open(os.path.join(folder, "adapter_config.json"), "w") as f:
        json.dump(cfg, f)
    return {n: t.float() for n, t in merged.items()}


def check_logprobs(res, meshrl, label, args, tok, ref):
    worst = 0.0
    for text in TEXTS[:2]:
        rc, out, err = run_meshrl(meshrl, ["logprobs"] + args + ["--text", text, "--json"])
        if rc != 0:
            res.case(label, False, f"exit {rc}: {err.strip()[-300:]}")
            return
        got = last_json(out)
        want = ref.log_probs_of(torch.tensor(got["token_ids"]))
        if got["token_ids"] != tok.encode(text) or len(got["logprobs"]) != len(want):
            res.case(label, False, "token ids or log-prob count differ")
            return
        worst = max(worst, float((torch.tensor(got["logprobs"], dtype=torch.float64) - want.double()).abs().max()))
    res.case(label, worst <= TOL, f"max |dlogp| {worst:.2e}")


def check_refused(res, meshrl, label, args, needle):
    rc, out, err = run_meshrl(meshrl, args)
    res.case(label, rc > 0 and needle in err, f"exit {rc}: {err.strip()[-200:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshrl", required=True)
    a = ap.parse_args()
    res = Results()
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        tok, _ = make_case_folder(base, "qwen2", "float32", tied=False, seed=4, init_std=0.2)
        config, state = hf_reference.load_folder(base)
        adapter = os.path.join(tmp, "adapter")
        merged_state = write_adapter(adapter, config, state, seed=7)
        ref = hf_reference.HFLlama(config, merged_state)

        check_logprobs(res, a.meshrl, "logprobs --adapter (PEFT layout) == merged reference",
                       ["--model", base, "--adapter", adapter], tok, ref)
        out = os.path.join(tmp, "merged")
        rc, _, err = run_meshrl(a.meshrl, ["merge", "--model", base, "--adapter", adapter, "--out", out])
        res.case("merge exits 0", rc == 0, err.strip()[-200:])
        if rc == 0:
            check_logprobs(res, a.meshrl, "merged folder == merged reference", ["--model", out], tok, ref)

        bad = os.path.join(tmp, "bad_target")
        write_adapter(bad, config, state, seed=7, extra_config={"target_modules": TARGETS + ["c_attn"]})
        check_refused(res, a.meshrl, "unknown target module refused",
                      ["logprobs", "--model", base, "--adapter", bad, "--text", "x"], "c_attn")
        wrong = os.path.join(tmp, "wrong_base")
        write_adapter(wrong, config, state, seed=7, extra_config={"meshrl_base_hash": "0" * 32})
        check_refused(res, a.meshrl, "merge onto another base refused",
                      ["merge", "--model", base, "--adapter", wrong, "--out", os.path.join(tmp, "x")], "hash")
        rank = os.path.join(tmp, "rank")
        write_adapter(rank, config, state, seed=7, extra_config={"r": RANK * 2})
        check_refused(res, a.meshrl, "rank mismatch refused",
                      ["logprobs", "--model", base, "--adapter", rank, "--text", "x"], "shape of")

        rc, out_txt, err = run_meshrl(a.meshrl, ["plan", "--model", base, "--lora-rank", str(RANK), "--json",
                                                 "--topology", os.path.join(HERE, "..", "..", "configs", "four-cities.toml")])
        if rc != 0:
            res.case("plan --json", False, err.strip()[-200:])
        else:
            j = last_json(out_txt)
            n = sum(t.numel() for t in state.values())
            res.case("plan counts the folder's parameters", j["full_params"] == n, f"{j['full_params']} vs {n}")
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
