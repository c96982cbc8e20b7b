"""Logit parity: `meshrl logprobs` must give the same token ids as the Python tokenizer and the
same log-probs as the plain-PyTorch reference (hf_reference.HFLlama) within 1e-4.

    /usr/bin/python3 tests/oracle/test_logit_parity.py --meshrl build/meshrl
    /usr/bin/python3 tests/oracle/test_logit_parity.py --self-test     # the oracle side only

Cases: llama F32 tied, llama BF16 untied, qwen2 F32 untied (q/k/v bias), qwen2 BF16 tied, llama
F32 in two shards; plus folders meshrl must refuse (pickle-only, corrupt safetensors). Each case
prints one line; the last line is 'N passed, M failed'; the exit status is non-zero on a failure.

The tokenizer.json and its Python encoder come from tokenizer_fixtures.py (gpt2 style for llama,
qwen2 style for qwen2), or from the private _FallbackTokenizer below if that module is missing.
Weights are written by hf_fixtures.make_model_folder (or, if that module is missing, by
hf_reference.write_folder) and read back through hf_reference's own safetensors parser.
The helpers here (Results, run_meshrl, make_case_folder) are reused by test_generate_parity.py.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import hf_reference  # noqa: E402

TOL = 1e-4
TEXTS = [
    "Hello world! The quick brown fox jumps over the lazy dog.",
    "def add(a, b):\n    return a + b  # 12 + 30 = 42",
    # long enough to reach positions where RoPE's low frequencies matter
    " ".join(["Paris, Zurich, Dublin and Toronto train one model together over the internet."] * 6),
    "caf\u00e9 na\u00efve \u2014 \u00fcber 3.14",
]

# ----------------------------------------------------------------------------- results


class Results:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def case(self, name, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1

    def skip(self, name, why):
        print(f"SKIP {name}: {why}", flush=True)
        self.skipped += 1

    def finish(self):
        extra = f", {self.skipped} skipped" if self.skipped else ""
        print(f"{self.passed} passed, {self.failed} failed{extra}", flush=True)
        return 1 if self.failed else 0


def run_meshrl(meshrl, args, timeout=180):
    """-> (exit code, stdout, stderr); the environment keeps meshrl on one quiet thread."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    p = subprocess.run([meshrl] + args, capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def last_json(stdout):
    """The last stdout line that parses as a JSON object (meshrl may log before it)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    raise ValueError(f"no JSON object on stdout: {stdout[-300:]!r}")


# ----------------------------------------------------------------------------- tokenizer


class _FallbackTokenizer:
    """Private stand-in for tokenizer_fixtures: a GPT-2 style byte-level BPE (ByteLevel
    pre-tokenizer with its regex, no prefix space), merges learned from a fixed corpus until the
    vocab holds n_vocab - 1 entries, plus '<|endoftext|>' as the last id."""

    CORPUS = ("the quick brown fox jumps over the lazy dog. hello world! Paris Zurich Dublin "
              "Toronto train the model together over the internet; return a + b = 42.\n" * 3
              + "def add(a, b):\n    return a + b\n" * 2 + "caf\u00e9 na\u00efve \u00fcber 3.14 ")
    PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

    @staticmethod
    def byte_chars():
        """GPT-2's byte -> printable character table: printable Latin-1 bytes stand for
        themselves, the other 68 bytes map to U+0100 onwards in byte order."""
        printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
                     + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
        chars, n = printable[:], 0
        for b in range(256):
            if b not in printable:
                printable.append(b)
                chars.append(256 + n)
                n += 1
        return {b: chr(c) for b, c in zip(printable, chars)}

    def __init__(self, n_vocab):
        import regex
        self.regex = regex.compile(self.PATTERN)
        self.byte_char = self.byte_chars()
        self.vocab = {self.byte_char[b]: b for b in range(256)}
        self.merges = []
        words = [[self.byte_char[b] for b in w.encode()] for w in self.regex.findall(self.CORPUS)]
        while len(self.vocab) < n_vocab - 1:
            counts = {}
            for w in words:
                for pair in zip(w, w[1:]):
                    counts[pair] = counts.get(pair, 0) + 1
            if not counts:
                raise ValueError("fallback tokenizer: corpus too small for the requested vocab")
            best = min(counts, key=lambda p: (-counts[p], p))
            self.merges.append(best)
            self.vocab[best[0] + best[1]] = len(self.vocab)
            words = [self._merge(w, best) for w in words]
        self.eos = "<|endoftext|>"
        self.eos_id = len(self.vocab)
        self.rank = {p: i for i, p in enumerate(self.merges)}
        self.n_vocab = self.eos_id + 1

    @staticmethod
    def _merge(w, pair):
        out, i = [], 0
        while i < len(w):
            if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
                out.append(w[i] + w[i + 1])
                i += 2
            else:
                out.append(w[i])
                i += 1
        return out

    def encode(self, text):
        ids = []
        for piece in self.regex.findall(text):
            w = [self.byte_char[b] for b in piece.encode()]
            while len(w) > 1:
                pairs = [(self.rank.get(p, 1 << 30), p) for p in zip(w, w[1:])]
                r, p = min(pairs)
                if r == 1 << 30:
                    break
                w = self._merge(w, p)
            ids.extend(self.vocab[s] for s in w)
        return ids

    def write(self, folder):
        tok = {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": self.eos_id, "content": self.eos, "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": False, "special": True}],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False,
                      "vocab": self.vocab, "merges": [f"{a} {b}" for a, b in self.merges]},
        }
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False)


class CaseTokenizer:
    """The tokenizer of one test folder: encode (from tokenizer_fixtures.PyBpeTokenizer, or the
    fallback), decode (read straight from tokenizer.json: ids -> byte-level strings -> bytes),
    n_vocab (largest id + 1, what config.json must say) and eos_id ('<|endoftext|>')."""

    def __init__(self, folder, style, n_vocab=300):
        try:
            import tokenizer_fixtures
            path = tokenizer_fixtures.write_tokenizer(folder, style)
            self.encode = tokenizer_fixtures.PyBpeTokenizer.load(path).encode
            self.source = "tokenizer_fixtures"
        except ImportError:
            fb = _FallbackTokenizer(n_vocab)
            fb.write(folder)
            self.encode = fb.encode
            self.source = "fallback"
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            spec = json.load(f)
        self.id_to_str = {i: s for s, i in spec["model"]["vocab"].items()}
        self.special = {t["id"]: t["content"] for t in spec.get("added_tokens") or []}
        self.n_vocab = max(list(self.id_to_str) + list(self.special)) + 1
        self.eos_id = next(i for i, c in self.special.items() if c == "<|endoftext|>")
        self.char_byte = {c: b for b, c in _FallbackTokenizer.byte_chars().items()}

    def decode_bytes(self, ids):
        """ids -> UTF-8 bytes; special tokens as their text."""
        out = bytearray()
        for i in ids:
            if i in self.special:
                out += self.special[i].encode()
            else:
                out += bytes(self.char_byte[c] for c in self.id_to_str[i])
        return bytes(out)


# ----------------------------------------------------------------------------- model folders

DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def case_config(arch, tied, n_vocab, eos_id, rope_theta=None):
    """config.json for the small test models (hidden 64, 2 layers, 4 heads, 2 kv heads, ff 128)."""
    return {
        "architectures": ["Qwen2ForCausalLM" if arch == "qwen2" else "LlamaForCausalLM"],
        "model_type": arch, "vocab_size": n_vocab, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
        "hidden_act": "silu", "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6 if arch == "qwen2" else 1e-5,
        "rope_theta": rope_theta or (1e6 if arch == "qwen2" else 10000.0),
        "tie_word_embeddings": tied, "bos_token_id": eos_id, "eos_token_id": eos_id,
        "torch_dtype": "float32",
    }


def make_case_folder(folder, arch, dtype, tied, seed=0, init_std=0.02, shards=1, n_vocab=300,
                     use_hf_fixtures=True):
    """Model folder (config.json + weights + tokenizer.json) for one case: hidden 64, 2 layers,
    4 heads, 2 kv heads, ff 128, seeded random weights scaled to std init_std, norm gains near 1.
    Weights come from hf_fixtures.make_model_folder (the reference library's file layout) when that
    module exists, else from hf_reference.write_folder. config.json is then set to this test's
    values (tokenizer vocab and eos, rope_theta, rms_norm_eps).
    -> (CaseTokenizer, HFLlama reading the folder back as stored: BF16 weights as rounded)."""
    os.makedirs(folder, exist_ok=True)
    tok = CaseTokenizer(folder, "qwen2" if arch == "qwen2" else "gpt2", n_vocab)
    config = case_config(arch, tied, tok.n_vocab, tok.eos_id)
    config["torch_dtype"] = dtype
    try:
        import hf_fixtures
    except ImportError:
        hf_fixtures = None
    if hf_fixtures is not None and use_hf_fixtures:
        stored = hf_fixtures.make_model_folder(
            folder, arch=arch, dtype=dtype, tied=tied, vocab=tok.n_vocab, hidden=64, layers=2,
            heads=4, kv_heads=2, ff=128, seed=seed, shards=shards)
        if init_std != 0.02:  # hf_fixtures draws std 0.02; rescale all but the norm gains
            if shards != 1:
                raise ValueError("make_case_folder: init_std other than 0.02 needs shards=1")
            k = init_std / 0.02
            hf_fixtures.write_safetensors(os.path.join(folder, "model.safetensors"), {
                n: t if n.endswith("norm.weight") else (t.float() * k).to(t.dtype)
                for n, t in stored.items()})
        with open(os.path.join(folder, "config.json")) as f:
            written = json.load(f)
        written.update({k: config[k] for k in ("vocab_size", "rope_theta", "rms_norm_eps",
                                               "bos_token_id", "eos_token_id", "max_position_embeddings")})
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(written, f, indent=2, sort_keys=True)
    else:
        ref = hf_reference.HFLlama(config, init_std=init_std, seed=seed)
        g = torch.Generator().manual_seed(seed + 1000)
        state = hf_reference.state_dict_hf(ref)
        for name, t in state.items():  # no term of the math may hide behind ones and zeros
            if name.endswith("norm.weight"):
                state[name] = 1.0 + 0.1 * torch.randn(t.shape, generator=g)
            elif name.endswith(".bias"):
                state[name] = init_std * torch.randn(t.shape, generator=g)
        hf_reference.write_folder(folder, config, state, DTYPES[dtype], shards)
    return tok, hf_reference.load_model(folder)


# ----------------------------------------------------------------------------- cases

CASES = [  # name, arch, dtype, tied, shards
    ("llama-f32-tied", "llama", "float32", True, 1),
    ("llama-bf16-untied", "llama", "bfloat16", False, 1),
    ("qwen2-f32-untied-bias", "qwen2", "float32", False, 1),
    ("qwen2-bf16-tied-bias", "qwen2", "bfloat16", True, 1),
    ("llama-f32-tied-2shards", "llama", "float32", True, 2),
]


def check_logprobs(res, meshrl, folder, name, tok, ref):
    for k, text in enumerate(TEXTS):
        label = f"{name} text{k}"
        want_ids = tok.encode(text)
        rc, out, err = run_meshrl(meshrl, ["logprobs", "--model", folder, "--text", text, "--json"])
        if rc != 0:
            res.case(label, False, f"exit {rc}: {err.strip()[-300:]}")
            continue
        try:
            got = last_json(out)
            ids, lps = got["token_ids"], got["logprobs"]
        except (ValueError, KeyError) as e:
            res.case(label, False, f"bad output: {e}")
            continue
        if ids != want_ids:
            first = next((i for i, (a, b) in enumerate(zip(ids, want_ids)) if a != b),
                         min(len(ids), len(want_ids)))
            res.case(label, False, f"token_ids differ at {first}: meshrl {ids[first:first + 5]} "
                                   f"python {want_ids[first:first + 5]} (lengths {len(ids)}/{len(want_ids)})")
            continue
        want = ref.log_probs_of(torch.tensor(ids))
        if len(lps) != len(want):
            res.case(label, False, f"{len(lps)} logprobs for {len(ids)} tokens; expected {len(want)}")
            continue
        diff = (torch.tensor(lps, dtype=torch.float64) - want.double()).abs()
        worst = float(diff.max()) if len(diff) else 0.0
        res.case(label, worst <= TOL, f"{len(ids)} tokens, max |dlogp| {worst:.2e}")


def check_refusals(res, meshrl, tmp):
    # a pickle checkpoint must be refused, not unpickled; rc > 0: an error exit, not a signal
    d = os.path.join(tmp, "pickle-only")
    _, ref = make_case_folder(d, "llama", "float32", True)
    torch.save(hf_reference.state_dict_hf(ref), os.path.join(d, "pytorch_model.bin"))
    os.remove(os.path.join(d, "model.safetensors"))
    rc, out, err = run_meshrl(meshrl, ["logprobs", "--model", d, "--text", "hi", "--json"])
    msg = (out + err).lower()
    res.case("refuse pytorch_model.bin", rc > 0 and ("pickle" in msg or "safetensors" in msg),
             f"exit {rc}: {(out + err).strip()[-200:]}")
    # a corrupt safetensors header must give an error naming the file, not a crash
    d = os.path.join(tmp, "corrupt")
    make_case_folder(d, "llama", "float32", True)
    path = os.path.join(d, "model.safetensors")
    with open(path, "r+b") as f:
        f.write((1 << 40).to_bytes(8, "little"))
    rc, out, err = run_meshrl(meshrl, ["logprobs", "--model", d, "--text", "hi", "--json"])
    res.case("refuse corrupt safetensors header", rc > 0
             and "model.safetensors" in (out + err), f"exit {rc}: {(out + err).strip()[-200:]}")


def self_test():
    """The oracle side alone: fixtures read back the way they were written, and the fallback
    tokenizer is a byte-level BPE that round-trips bytes."""
    res = Results()
    with tempfile.TemporaryDirectory() as tmp:
        for name, arch, dtype, tied, shards in CASES:
            d = os.path.join(tmp, name)
            tok, ref = make_case_folder(d, arch, dtype, tied, shards=shards)
            ids = tok.encode(TEXTS[0])
            lp = ref.log_probs_of(torch.tensor(ids))
            res.case(f"{name} reference runs", bool(torch.isfinite(lp).all()) and len(lp) == len(ids) - 1,
                     f"{tok.source} tokenizer, vocab {tok.n_vocab}, {len(ids)} tokens, "
                     f"mean logp {float(lp.mean()):.3f}")
            ok = all(tok.decode_bytes(tok.encode(t)) == t.encode() for t in TEXTS)
            res.case(f"{name} tokenizer round-trips the texts", ok)
        for name, arch, dtype, tied, shards in CASES[:4]:  # the stand-in writer, if hf_fixtures goes
            d = os.path.join(tmp, "own-" + name)
            tok, ref = make_case_folder(d, arch, dtype, tied, shards=2, use_hf_fixtures=False)
            lp = ref.log_probs_of(torch.tensor(tok.encode(TEXTS[1])))
            res.case(f"{name} via hf_reference.write_folder runs", bool(torch.isfinite(lp).all()))
        try:  # hf_reference's parser against hf_fixtures' writer: same values, every dtype
            import hf_fixtures
            for dt in ("float32", "bfloat16", "float16"):
                d = os.path.join(tmp, "cross-" + dt)
                stored = hf_fixtures.make_model_folder(d, arch="qwen2", dtype=dt, tied=False, shards=2)
                _, st = hf_reference.load_folder(d)
                ok = sorted(st) == sorted(stored) and all(torch.equal(st[n], stored[n].float()) for n in st)
                res.case(f"hf_reference reads hf_fixtures' {dt} shards exactly", ok)
        except ImportError:
            res.skip("hf_reference vs hf_fixtures", "hf_fixtures.py not present")
        tok = _FallbackTokenizer(300)
        inv = {v: k for k, v in tok.vocab.items()}
        char_byte = {c: b for b, c in tok.byte_char.items()}
        ok = all(bytes(char_byte[c] for i in tok.encode(t) for c in inv[i]) == t.encode() for t in TEXTS)
        res.case("fallback tokenizer round-trips bytes", ok and tok.n_vocab == 300)
    return res.finish()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meshrl", help="path to the meshrl binary")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.self_test:
        return self_test()
    if not args.meshrl:
        ap.error("--meshrl PATH is required (or --self-test)")
    res = Results()
    with tempfile.TemporaryDirectory() as tmp:
        for name, arch, dtype, tied, shards in CASES:
            d = os.path.join(tmp, name)
            tok, ref = make_case_folder(d, arch, dtype, tied, seed=len(name), shards=shards)
            check_logprobs(res, args.meshrl, d, name, tok, ref)
        check_refusals(res, args.meshrl, tmp)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
