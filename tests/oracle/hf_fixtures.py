"""Hugging Face model folders written by hand, for tests that need files made outside meshrl.

Import it from another test:
    sys.path.insert(0, os.path.dirname(__file__)); import hf_fixtures
Regenerate the committed fixtures in tests/data/hf/ (run from the repository root):
    /usr/bin/python3 tests/oracle/hf_fixtures.py --out tests/data/hf

No safetensors or transformers library here (Debian ships neither): the file layout follows the
reference writer by hand (8-byte little-endian header length, compact JSON header with
"__metadata__" first and tensors sorted by dtype width then name, padded with spaces to a multiple
of 8, then the raw little-endian bytes packed without gaps), and config.json carries the keys
transformers writes for LlamaForCausalLM / Qwen2ForCausalLM (sorted, indented by 2).
"""

import argparse
import json
import os
import struct

import torch

# dtype -> (safetensors name, position in the reference library's dtype enum: its sort key)
_DTYPES = {
    torch.float64: ("F64", 12), torch.float32: ("F32", 11), torch.bfloat16: ("BF16", 8),
    torch.float16: ("F16", 7), torch.int64: ("I64", 13), torch.int32: ("I32", 9),
    torch.int16: ("I16", 5), torch.int8: ("I8", 2), torch.uint8: ("U8", 1), torch.bool: ("BOOL", 0),
}
_FROM_NAME = {name: dt for dt, (name, _) in _DTYPES.items()}
_SAME_WIDTH_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64, 1: torch.uint8}


def tensor_bytes(t):
    """Raw little-endian bytes of a tensor (bf16/f16 through an integer view: numpy lacks bf16)."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    elif t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def fnv1a64(data):
    """FNV-1a 64-bit of raw bytes: the checksum the C++ fixture test recomputes."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def safetensors_bytes(tensors, metadata=None):
    """The whole file for dict name -> tensor, in the reference layout."""
    order = sorted(tensors, key=lambda n: (-_DTYPES[tensors[n].dtype][1], n))
    header = {}
    if metadata:
        header["__metadata__"] = dict(sorted(metadata.items()))
    blobs, offset = [], 0
    for name in order:
        t = tensors[name]
        raw = tensor_bytes(t)
        header[name] = {"dtype": _DTYPES[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_safetensors(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors, {"format": "pt"} if metadata is None else metadata))


def read_safetensors(path):
    """dict name -> tensor (CPU, stored dtype) and the metadata dict."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, e in header.items():
        dt = _FROM_NAME[e["dtype"]]
        b, end = e["data_offsets"]
        raw = bytearray(data[base + b:base + end])
        if dt in (torch.bfloat16, torch.float16):
            t = torch.frombuffer(raw, dtype=torch.int16).view(dt) if raw else torch.empty(0, dtype=dt)
        elif raw:
            t = torch.frombuffer(raw, dtype=dt)
        else:
            t = torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"]).clone()
    return out, metadata


def hf_config(arch, dtype, tied, vocab, hidden, layers, heads, kv_heads, ff):
    """config.json contents as transformers 4.46 writes them for a fresh config."""
    common = {
        "attention_dropout": 0.0,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": ff,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "tie_word_embeddings": tied,
        "torch_dtype": dtype,
        "transformers_version": "4.46.0",
        "use_cache": True,
        "vocab_size": vocab,
    }
    if arch == "llama":
        common.update({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
            "bos_token_id": 1, "eos_token_id": [2, 3], "head_dim": hidden // heads, "mlp_bias": False,
            "max_position_embeddings": 2048, "pretraining_tp": 1, "rope_theta": 10000.0,
        })
    elif arch == "qwen2":
        common.update({
            "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "bos_token_id": 1,
            "eos_token_id": 2, "max_position_embeddings": 32768, "max_window_layers": layers,
            "rope_theta": 1000000.0, "sliding_window": None, "use_sliding_window": False,
        })
    else:
        raise ValueError("arch must be llama or qwen2, got %r" % arch)
    return common


def hf_tensors(arch, tied, vocab, hidden, layers, heads, kv_heads, ff, seed):
    """Random float32 weights with HF names in model order: matrices N(0, 0.02), norms near 1."""
    g = torch.Generator().manual_seed(seed)
    d = hidden // heads
    bias = arch == "qwen2"

    def mat(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    def norm(n):
        return 1.0 + torch.randn(n, generator=g) * 0.1

    out = {"model.embed_tokens.weight": mat(vocab, hidden)}
    for i in range(layers):
        p = "model.layers.%d." % i
        out[p + "input_layernorm.weight"] = norm(hidden)
        out[p + "self_attn.q_proj.weight"] = mat(heads * d, hidden)
        out[p + "self_attn.k_proj.weight"] = mat(kv_heads * d, hidden)
        out[p + "self_attn.v_proj.weight"] = mat(kv_heads * d, hidden)
        if bias:
            out[p + "self_attn.q_proj.bias"] = mat(heads * d)
            out[p + "self_attn.k_proj.bias"] = mat(kv_heads * d)
            out[p + "self_attn.v_proj.bias"] = mat(kv_heads * d)
        out[p + "self_attn.o_proj.weight"] = mat(hidden, heads * d)
        out[p + "post_attention_layernorm.weight"] = norm(hidden)
        out[p + "mlp.gate_proj.weight"] = mat(ff, hidden)
        out[p + "mlp.up_proj.weight"] = mat(ff, hidden)
        out[p + "mlp.down_proj.weight"] = mat(hidden, ff)
    out["model.norm.weight"] = norm(hidden)
    if not tied:
        out["lm_head.weight"] = mat(vocab, hidden)
    return out


def make_model_folder(dir, arch="llama", dtype="float32", tied=True, vocab=64, hidden=32, layers=2,
                      heads=4, kv_heads=2, ff=64, seed=0, shards=1):
    """Writes config.json and model.safetensors (or `shards` files + index) into dir.

    Returns dict name -> tensor, exactly as stored (already cast to `dtype`).
    """
    os.makedirs(dir, exist_ok=True)
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    tensors = {n: t.to(torch_dtype)
               for n, t in hf_tensors(arch, tied, vocab, hidden, layers, heads, kv_heads, ff, seed).items()}
    config = hf_config(arch, dtype, tied, vocab, hidden, layers, heads, kv_heads, ff)
    with open(os.path.join(dir, "config.json"), "w") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if shards <= 1:
        write_safetensors(os.path.join(dir, "model.safetensors"), tensors)
        return tensors
    # Split by cumulative bytes into `shards` contiguous groups in model order (transformers packs
    # greedily against a byte budget; what matters here is a multi-file folder with an index).
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    groups, seen = [[] for _ in range(shards)], 0
    for name, t in tensors.items():
        groups[min(shards - 1, seen * shards // total)].append(name)
        seen += t.numel() * t.element_size()
    groups = [g for g in groups if g]
    weight_map = {}
    for i, names in enumerate(groups):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, len(groups))
        write_safetensors(os.path.join(dir, fname), {n: tensors[n] for n in names})
        for n in names:
            weight_map[n] = fname
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(dir, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return tensors


def describe(tensors):
    """What the C++ fixture test checks: dtype, shape, FNV-1a of the bytes, float64 sum."""
    return {name: {"dtype": _DTYPES[t.dtype][0], "shape": list(t.shape),
                   "fnv1a64": "%016x" % fnv1a64(tensor_bytes(t)),
                   "sum": float(t.double().sum())}
            for name, t in sorted(tensors.items())}


# The committed fixtures (tests/data/hf/): name -> make_model_folder arguments.
FIXTURES = {
    "llama_f32_tied": dict(arch="llama", dtype="float32", tied=True, seed=1),
    "qwen2_bf16_untied": dict(arch="qwen2", dtype="bfloat16", tied=False, seed=2),
    "llama_f16_sharded": dict(arch="llama", dtype="float16", tied=False, seed=3, shards=2),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder to write the fixture folders into")
    args = ap.parse_args()
    for name, kwargs in FIXTURES.items():
        d = os.path.join(args.out, name)
        tensors = make_model_folder(d, **kwargs)
        # Round trip through our own reader: the writer and reader here must agree.
        if kwargs.get("shards", 1) == 1:
            back, meta = read_safetensors(os.path.join(d, "model.safetensors"))
            assert meta == {"format": "pt"}, meta
            assert set(back) == set(tensors)
            for n, t in tensors.items():
                assert back[n].dtype == t.dtype and torch.equal(back[n], t), n
        with open(os.path.join(d, "expected.json"), "w") as f:
            f.write(json.dumps(describe(tensors), indent=1, sort_keys=True) + "\n")
        print("wrote", d)


if __name__ == "__main__":
    main()
