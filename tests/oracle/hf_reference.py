"""Plain-PyTorch reference of the Hugging Face Llama / Qwen2 forward pass: the oracle meshrl's C++
model is checked against, and the eager peer the benchmarks compare with.

    /usr/bin/python3 tests/oracle/hf_reference.py --self-test     # checks the oracle itself

What it owns: reading an HF model folder (config.json + model.safetensors or an index with shards;
safetensors parsed by hand, F32/F16/BF16 upcast to float32) and the math of transformers'
modeling_llama / modeling_qwen2 in its eager attention path, written out step by step:
  embedding -> L x [RMSNorm -> q/k/v (Qwen2: with bias) -> RoPE (rotate_half convention)
  -> repeat_kv (GQA) -> causal softmax(q k^T / sqrt(D)) in float32 -> o_proj -> residual
  -> RMSNorm -> down(silu(gate(x)) * up(x)) -> residual] -> final RMSNorm -> lm_head
with lm_head tied to the embedding when tie_word_embeddings is true. The KV cache mirrors HF's
DynamicCache: per layer, keys/values after RoPE and before repeat_kv, grown by torch.cat each step.
It knows nothing about tokenizers or meshrl; it needs only torch (1.13 is enough) and numpy.

Shapes: B sequences, T tokens, V vocab, L layers, H heads, K kv heads, D head dim, E hidden size.
"""

import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

# ----------------------------------------------------------------------------- safetensors

_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2)}
_MAX_HEADER = 100 * 1024 * 1024  # a larger header is a corrupt file, not a model


def read_safetensors(path):
    """Reads one .safetensors file -> {name: float32 tensor}. Raises ValueError naming the file
    and the field on anything malformed (short file, bad JSON, unknown dtype, bad offsets)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"[safetensors] {path}: file shorter than its 8-byte header length")
    (n_header,) = struct.unpack("<Q", blob[:8])
    if n_header > _MAX_HEADER or 8 + n_header > len(blob):
        raise ValueError(f"[safetensors] {path}: header length {n_header} exceeds the file "
                         f"({len(blob)} bytes)")
    try:
        header = json.loads(blob[8:8 + n_header].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"[safetensors] {path}: header is not JSON: {e}")
    if not isinstance(header, dict):
        raise ValueError(f"[safetensors] {path}: header is not a JSON object")
    data = memoryview(blob)[8 + n_header:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        where = f"[safetensors] {path}: tensor '{name}'"
        if not isinstance(info, dict):
            raise ValueError(f"{where}: entry is not an object")
        dtype = info.get("dtype")
        if dtype not in _DTYPES:
            raise ValueError(f"{where}: field 'dtype' is {dtype!r}; expected F32, F16 or BF16")
        shape = info.get("shape")
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise ValueError(f"{where}: field 'shape' is {shape!r}; expected a list of sizes")
        offs = info.get("data_offsets")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, int) for o in offs)
                or not 0 <= offs[0] <= offs[1] <= len(data)):
            raise ValueError(f"{where}: field 'data_offsets' is {offs!r}; data section holds "
                             f"{len(data)} bytes")
        np_type, size = _DTYPES[dtype]
        n = math.prod(shape)
        if offs[1] - offs[0] != n * size:
            raise ValueError(f"{where}: data_offsets span {offs[1] - offs[0]} bytes, shape "
                             f"{shape} x {dtype} needs {n * size}")
        raw = np.frombuffer(data[offs[0]:offs[1]], dtype=np_type).copy()
        if dtype == "BF16":  # bfloat16 is the top half of a float32
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(raw.astype(np.float32)).reshape(shape)
    return out


def load_folder(folder):
    """Reads an HF model folder -> (config dict, {name: float32 tensor}). Accepts
    model.safetensors or model.safetensors.index.json + shards; refuses pickle checkpoints."""
    cfg_path = os.path.join(folder, "config.json")
    with open(cfg_path) as f:
        config = json.load(f)
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(single):
        return config, read_safetensors(single)
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ValueError(f"[safetensors] {index}: field 'weight_map' missing or not an object")
        state = {}
        for shard in sorted(set(weight_map.values())):
            state.update(read_safetensors(os.path.join(folder, shard)))
        missing = [k for k in weight_map if k not in state]
        if missing:
            raise ValueError(f"[safetensors] {index}: tensors named in weight_map but absent "
                             f"from the shards: {missing[:3]}")
        return config, state
    raise ValueError(f"[checkpoint] {folder}: no model.safetensors or index (pickle checkpoints "
                     "such as pytorch_model.bin are not read)")


# ----------------------------------------------------------------------------- the model

def rms_norm(x, weight, eps):
    """HF LlamaRMSNorm: normalise in float32, cast back, then scale."""
    dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(dtype)


def rotate_half(x):
    """[..., D] -> [..., D]: (x1, x2) -> (-x2, x1), halves not interleaved pairs (HF convention)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_cos_sin(positions, head_dim, theta):
    """positions [T] int -> cos, sin [T, D] float32, as HF's LlamaRotaryEmbedding (default type)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]  # [T, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [T, D]
    return emb.cos(), emb.sin()


def repeat_kv(x, n_rep):
    """[B, K, T, D] -> [B, K*n_rep, T, D]; each kv head serves n_rep consecutive query heads."""
    if n_rep == 1:
        return x
    b, k, t, d = x.shape
    return x[:, :, None, :, :].expand(b, k, n_rep, t, d).reshape(b, k * n_rep, t, d)


class HFLlama(torch.nn.Module):
    """Llama / Qwen2 decoder in float32 with HF parameter names (state_dict keys match the
    checkpoint, minus lm_head when tied). Build from load_folder's output or from a config with
    seeded random weights (init_std) for the benchmarks."""

    def __init__(self, config, state=None, init_std=0.02, seed=0):
        super().__init__()
        c = config
        self.arch = c.get("model_type", "llama")
        if self.arch not in ("llama", "qwen2"):
            raise ValueError(f"[config] model_type {self.arch!r}: expected 'llama' or 'qwen2'")
        rs = c.get("rope_scaling")
        if rs not in (None, {}) and rs.get("rope_type", rs.get("type")) != "default":
            raise ValueError(f"[config] rope_scaling {rs!r} is not implemented by the reference")
        self.n_vocab = c["vocab_size"]
        self.n_embd = c["hidden_size"]
        self.n_layers = c["num_hidden_layers"]
        self.n_heads = c["num_attention_heads"]
        self.n_kv_heads = c.get("num_key_value_heads") or self.n_heads
        self.head_dim = c.get("head_dim") or self.n_embd // self.n_heads
        self.n_ff = c["intermediate_size"]
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        self.theta = float(c.get("rope_theta", 10000.0))
        # LlamaConfig and Qwen2Config both default to untied embeddings.
        self.tied = bool(c.get("tie_word_embeddings", False))
        qkv_bias = self.arch == "qwen2" or bool(c.get("attention_bias", False))
        o_bias = self.arch == "llama" and bool(c.get("attention_bias", False))
        mlp_bias = self.arch == "llama" and bool(c.get("mlp_bias", False))
        act = c.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"[config] hidden_act {act!r}: the reference implements only 'silu'")

        E, H, K, D, FF = self.n_embd, self.n_heads, self.n_kv_heads, self.head_dim, self.n_ff
        shapes = {"model.embed_tokens.weight": [self.n_vocab, E], "model.norm.weight": [E]}
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            shapes[p + "input_layernorm.weight"] = [E]
            shapes[p + "post_attention_layernorm.weight"] = [E]
            shapes[p + "self_attn.q_proj.weight"] = [H * D, E]
            shapes[p + "self_attn.k_proj.weight"] = [K * D, E]
            shapes[p + "self_attn.v_proj.weight"] = [K * D, E]
            shapes[p + "self_attn.o_proj.weight"] = [E, H * D]
            if qkv_bias:
                shapes[p + "self_attn.q_proj.bias"] = [H * D]
                shapes[p + "self_attn.k_proj.bias"] = [K * D]
                shapes[p + "self_attn.v_proj.bias"] = [K * D]
            if o_bias:
                shapes[p + "self_attn.o_proj.bias"] = [E]
            shapes[p + "mlp.gate_proj.weight"] = [FF, E]
            shapes[p + "mlp.up_proj.weight"] = [FF, E]
            shapes[p + "mlp.down_proj.weight"] = [E, FF]
            if mlp_bias:
                shapes[p + "mlp.gate_proj.bias"] = [FF]
                shapes[p + "mlp.up_proj.bias"] = [FF]
                shapes[p + "mlp.down_proj.bias"] = [E]
        if not self.tied:
            shapes["lm_head.weight"] = [self.n_vocab, E]

        if state is None:
            g = torch.Generator().manual_seed(seed)
            state = {}
            for name, shape in shapes.items():
                if name.endswith("norm.weight"):
                    state[name] = torch.ones(shape)
                elif name.endswith(".bias"):
                    state[name] = torch.zeros(shape)
                else:
                    state[name] = torch.randn(shape, generator=g) * init_std
        else:
            for name, shape in shapes.items():
                if name not in state:
                    raise ValueError(f"[checkpoint] tensor '{name}' missing (config says "
                                     f"{self.arch}, {self.n_layers} layers, tied={self.tied})")
                if list(state[name].shape) != shape:
                    raise ValueError(f"[checkpoint] tensor '{name}' has shape "
                                     f"{list(state[name].shape)}, config implies {shape}")
        # nn.ParameterDict keys may not contain '.', so parameters live under escaped names.
        self.params = torch.nn.ParameterDict(
            {n.replace(".", "__"): torch.nn.Parameter(state[n].to(torch.float32).clone())
             for n in shapes})

    def w(self, name):
        return self.params[name.replace(".", "__")]

    def _has(self, name):
        return name.replace(".", "__") in self.params

    def _linear(self, x, name):
        bias = self.w(name + ".bias") if self._has(name + ".bias") else None
        return F.linear(x, self.w(name + ".weight"), bias)

    def _attention(self, i, x, cos, sin, past):
        """x [B, T, E]; cos/sin [T, D]; past None or (k [B, K, P, D], v [B, K, P, D]).
        Returns out [B, T, E] and the new (k, v) [B, K, P+T, D] (after RoPE, before repeat_kv)."""
        p = f"model.layers.{i}.self_attn."
        B, T, _ = x.shape
        H, K, D = self.n_heads, self.n_kv_heads, self.head_dim
        q = self._linear(x, p + "q_proj").view(B, T, H, D).transpose(1, 2)  # [B, H, T, D]
        k = self._linear(x, p + "k_proj").view(B, T, K, D).transpose(1, 2)  # [B, K, T, D]
        v = self._linear(x, p + "v_proj").view(B, T, K, D).transpose(1, 2)  # [B, K, T, D]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past is not None:  # DynamicCache.update: concatenate along the token axis
            k = torch.cat([past[0], k], dim=-2)
            v = torch.cat([past[1], v], dim=-2)
        n_past = k.shape[-2] - T
        kr = repeat_kv(k, H // K)  # [B, H, P+T, D]
        vr = repeat_kv(v, H // K)
        scores = torch.matmul(q, kr.transpose(2, 3)) / math.sqrt(D)  # [B, H, T, P+T]
        if T > 1:  # query t (absolute n_past + t) may see keys 0 .. n_past + t
            q_pos = torch.arange(T)[:, None] + n_past
            k_pos = torch.arange(n_past + T)[None, :]
            mask = torch.zeros(T, n_past + T)
            mask.masked_fill_(k_pos > q_pos, torch.finfo(torch.float32).min)
            scores = scores + mask
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, vr).transpose(1, 2).reshape(B, T, H * D)  # [B, T, H*D]
        return self._linear(out, p + "o_proj"), (k, v)

    def _mlp(self, i, x):
        p = f"model.layers.{i}.mlp."
        return self._linear(F.silu(self._linear(x, p + "gate_proj")) * self._linear(x, p + "up_proj"),
                            p + "down_proj")

    def forward(self, ids, cache=None):
        """ids [B, T] int64 -> logits [B, T, V] float32. With cache (a list, [] to start) the
        tokens continue the cached ones and the cache is extended in place (HF DynamicCache)."""
        if ids.dim() == 1:
            ids = ids[None, :]
        B, T = ids.shape
        n_past = cache[0][0].shape[-2] if cache else 0
        cos, sin = rope_cos_sin(torch.arange(n_past, n_past + T), self.head_dim, self.theta)
        h = F.embedding(ids, self.w("model.embed_tokens.weight"))  # [B, T, E]
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            past = cache[i] if n_past else None
            a, kv = self._attention(i, rms_norm(h, self.w(p + "input_layernorm.weight"), self.eps),
                                    cos, sin, past)
            if cache is not None:
                if n_past:
                    cache[i] = kv
                else:
                    cache.append(kv)
            h = h + a
            h = h + self._mlp(i, rms_norm(h, self.w(p + "post_attention_layernorm.weight"), self.eps))
        h = rms_norm(h, self.w("model.norm.weight"), self.eps)
        head = self.w("model.embed_tokens.weight") if self.tied else self.w("lm_head.weight")
        return F.linear(h, head)  # [B, T, V]

    @torch.no_grad()
    def log_probs_of(self, ids):
        """ids [T] -> [T-1] float32: log p(ids[i+1] | ids[0..i])."""
        ids = torch.as_tensor(ids, dtype=torch.int64).reshape(-1)
        logp = torch.log_softmax(self.forward(ids[None, :])[0].float(), dim=-1)  # [T, V]
        return logp[:-1].gather(1, ids[1:, None])[:, 0]

    @torch.no_grad()
    def greedy(self, ids, n_new, eos_ids=(), return_margins=False):
        """Greedy decoding without a cache: each step recomputes the whole sequence, slow but
        obviously right. ids [T] -> new ids (list, ending with an eos id if one was chosen).
        With return_margins also the gap between the top two logits at each step."""
        seq = [int(t) for t in torch.as_tensor(ids).reshape(-1)]
        new, margins = [], []
        for _ in range(n_new):
            last = self.forward(torch.tensor(seq)[None, :])[0, -1]  # [V]
            top = torch.topk(last, 2)
            tok = int(top.indices[0])
            margins.append(float(top.values[0] - top.values[1]))
            new.append(tok)
            seq.append(tok)
            if tok in eos_ids:
                break
        return (new, margins) if return_margins else new

    @torch.no_grad()
    def generate_cached(self, ids, n_new, temperature=1.0, generator=None):
        """ids [B, T] prompts of equal length -> (new [B, n_new] int64, logprobs [B, n_new]).
        One prefill, then one token per step through the KV cache; temperature 0 is argmax,
        otherwise multinomial on softmax(logits / temperature). logprobs are of the chosen token
        under log_softmax(logits / temperature) (temperature 0: under the plain logits)."""
        cache = []
        logits = self.forward(ids, cache)[:, -1]  # [B, V]
        toks, lps = [], []
        for step in range(n_new):
            if temperature == 0:
                logp = torch.log_softmax(logits, dim=-1)
                tok = logits.argmax(dim=-1, keepdim=True)  # [B, 1]
            else:
                logp = torch.log_softmax(logits / temperature, dim=-1)  # [B, V]
                tok = torch.multinomial(logp.exp(), 1, generator=generator)  # [B, 1]
            toks.append(tok)
            lps.append(logp.gather(1, tok))
            if step + 1 < n_new:
                logits = self.forward(tok, cache)[:, -1]
        return torch.cat(toks, dim=1), torch.cat(lps, dim=1)


def load_model(folder):
    config, state = load_folder(folder)
    return HFLlama(config, state)


# ----------------------------------------------------------------------------- self-test

def _naive_logprobs(model, ids):
    """A second, deliberately different implementation in float64 numpy with explicit loops over
    positions and heads and RoPE applied pair by pair (i, i + D/2), for checking the vectorised
    forward. ids list[T] -> [T-1] float64."""
    W = {n.replace("__", "."): p.detach().double().numpy() for n, p in model.params.items()}
    T, D, H, K = len(ids), model.head_dim, model.n_heads, model.n_kv_heads

    def norm(x, w):
        return w * x / np.sqrt((x * x).mean() + model.eps)

    def lin(x, name):
        y = W[name + ".weight"] @ x
        return y + W[name + ".bias"] if name + ".bias" in W else y

    def rope(vec, pos):
        out = vec.copy()
        for j in range(D // 2):
            ang = pos / model.theta ** (2 * j / D)
            a, b = vec[j], vec[j + D // 2]
            out[j] = a * math.cos(ang) - b * math.sin(ang)
            out[j + D // 2] = b * math.cos(ang) + a * math.sin(ang)
        return out

    hs = [W["model.embed_tokens.weight"][t].copy() for t in ids]
    for i in range(model.n_layers):
        p = f"model.layers.{i}."
        xs = [norm(h, W[p + "input_layernorm.weight"]) for h in hs]
        qs = [lin(x, p + "self_attn.q_proj").reshape(H, D) for x in xs]
        ks = [lin(x, p + "self_attn.k_proj").reshape(K, D) for x in xs]
        vs = [lin(x, p + "self_attn.v_proj").reshape(K, D) for x in xs]
        qs = [np.stack([rope(q[h], t) for h in range(H)]) for t, q in enumerate(qs)]
        ks = [np.stack([rope(k[h], t) for h in range(K)]) for t, k in enumerate(ks)]
        new = []
        for t in range(T):
            heads = []
            for h in range(H):
                kv = h // (H // K)
                s = np.array([qs[t][h] @ ks[u][kv] for u in range(t + 1)]) / math.sqrt(D)
                s = np.exp(s - s.max())
                s /= s.sum()
                heads.append(sum(s[u] * vs[u][kv] for u in range(t + 1)))
            x = hs[t] + lin(np.concatenate(heads), p + "self_attn.o_proj")
            y = norm(x, W[p + "post_attention_layernorm.weight"])
            g = lin(y, p + "mlp.gate_proj")
            x = x + lin(g / (1 + np.exp(-g)) * lin(y, p + "mlp.up_proj"), p + "mlp.down_proj")
            new.append(x)
        hs = new
    head = W["model.embed_tokens.weight"] if model.tied else W["lm_head.weight"]
    out = []
    for t in range(T - 1):
        z = head @ norm(hs[t], W["model.norm.weight"])
        z = z - z.max()
        out.append(z[ids[t + 1]] - math.log(np.exp(z).sum()))
    return np.array(out)


def write_safetensors(path, tensors, dtype="F32"):
    """{name: tensor} -> one .safetensors file with every tensor stored as dtype (F32, F16 or
    BF16; BF16 rounds to nearest even). The mirror of read_safetensors, for building fixtures."""
    header, chunks, off = {}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().float().numpy())
        if dtype == "F32":
            raw = a.astype("<f4").tobytes()
        elif dtype == "F16":
            raw = a.astype("<f2").tobytes()
        elif dtype == "BF16":
            bits = a.view(np.uint32).astype(np.uint64)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round half to even
            raw = bits.astype("<u2").tobytes()
        else:
            raise ValueError(f"write_safetensors: dtype {dtype!r}; expected F32, F16 or BF16")
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)  # keep the data section 8-byte aligned, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


def write_folder(folder, config, state, dtype="F32", shards=1):
    """Writes config.json and the weights (model.safetensors, or an index + `shards` files named
    as HF names them) into folder. state {name: tensor}; returns folder."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    names = sorted(state)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), state, dtype)
        return folder
    weight_map = {}
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = names[s::shards]
        write_safetensors(os.path.join(folder, fn), {n: state[n] for n in part}, dtype)
        weight_map.update({n: fn for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    return folder


def state_dict_hf(model):
    """HFLlama -> {HF tensor name: float32 tensor} (lm_head absent when tied)."""
    return {n.replace("__", "."): p.detach().clone() for n, p in model.params.items()}


def self_test():
    import tempfile
    failures = []

    def check(name, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")
        if not ok:
            failures.append(name)

    torch.manual_seed(0)
    base = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=48, rms_norm_eps=1e-5, max_position_embeddings=64)
    cases = [("llama tied", dict(base, model_type="llama", rope_theta=10000.0, tie_word_embeddings=True)),
             ("qwen2 untied", dict(base, model_type="qwen2", rope_theta=1e6, tie_word_embeddings=False))]
    for name, cfg in cases:
        m = HFLlama(cfg, init_std=0.3, seed=1)
        if m.arch == "qwen2":  # random biases so a missing bias add would show
            with torch.no_grad():
                for n, prm in m.params.items():
                    if n.endswith("bias"):
                        prm.normal_(0, 0.3)
        ids = torch.randint(0, cfg["vocab_size"], (12,), generator=torch.Generator().manual_seed(2))
        lp = m.log_probs_of(ids)
        ref = _naive_logprobs(m, ids.tolist())
        err = float((lp.double() - torch.from_numpy(ref)).abs().max())
        check(f"{name}: log_probs_of vs naive float64 loops", err < 1e-4, f"max err {err:.2e}")
        # causality: position i's log-prob must not change when later tokens are dropped
        pref = torch.stack([m.log_probs_of(ids[:i + 2])[-1] for i in range(len(ids) - 1)])
        err = float((pref - lp).abs().max())
        check(f"{name}: log_probs_of vs prefix-by-prefix", err < 1e-5, f"max err {err:.2e}")
        # cached greedy == uncached greedy, batch of 3 prompts
        prompts = torch.randint(0, cfg["vocab_size"], (3, 5), generator=torch.Generator().manual_seed(3))
        new, _ = m.generate_cached(prompts, 10, temperature=0)
        ok = all(new[b].tolist() == m.greedy(prompts[b], 10) for b in range(3))
        check(f"{name}: cached greedy == uncached greedy", ok)
        # cached sampled logprobs == full-forward logprobs of the sampled sequence
        g = torch.Generator().manual_seed(4)
        new, lps = m.generate_cached(prompts, 8, temperature=1.0, generator=g)
        full = torch.cat([prompts, new], dim=1)
        ref = torch.stack([m.log_probs_of(full[b])[-8:] for b in range(3)])
        err = float((ref - lps).abs().max())
        check(f"{name}: cached sample logprobs vs full forward", err < 1e-5, f"max err {err:.2e}")
        # folder round trip through safetensors: F32 single file, BF16 and F16 in two shards
        state = state_dict_hf(m)
        with tempfile.TemporaryDirectory() as d:
            m2 = load_model(write_folder(d, cfg, state))
            err = float((m2.log_probs_of(ids) - lp).abs().max())
            check(f"{name}: F32 folder round trip", err == 0.0, f"max err {err:.2e}")
        for dt, tdt in (("BF16", torch.bfloat16), ("F16", torch.float16)):
            with tempfile.TemporaryDirectory() as d:
                _, st = load_folder(write_folder(d, cfg, state, dtype=dt, shards=2))
                ok = sorted(st) == sorted(state) and all(
                    torch.equal(st[n], state[n].to(tdt).float()) for n in state)
                check(f"{name}: {dt} sharded folder round trip (same values as torch's cast)", ok)
    # malformed input is refused with a message naming the file
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "bad.safetensors")
        with open(bad, "wb") as f:
            f.write(struct.pack("<Q", 1 << 40) + b"{}")
        try:
            read_safetensors(bad)
            check("huge header length refused", False)
        except ValueError as e:
            check("huge header length refused", "bad.safetensors" in str(e), str(e))
    print(f"self-test: {'all passed' if not failures else str(len(failures)) + ' failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    if "--self-test" in sys.argv:
        sys.exit(self_test())
    print(__doc__)
