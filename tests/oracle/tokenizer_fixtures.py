"""Byte-level BPE in plain Python: the oracle for meshrl's C++ tokenizer (src/tokenizer/).

Regenerate the committed fixtures (tests/data/tokenizer/<style>/{tokenizer.json,cases.json}):
    /usr/bin/python3 tests/oracle/tokenizer_fixtures.py --write tests/data/tokenizer

Importable by other tests:
    from tokenizer_fixtures import write_tokenizer, PyBpeTokenizer
    path = write_tokenizer(folder, "qwen2")          # a realistic tokenizer.json (~300 merges)
    ids = PyBpeTokenizer.load(path).encode("hello")

Written from the GPT-2 / Hugging Face descriptions of byte-level BPE, independently of the C++ code:
a small trainer (most frequent pair, ties broken by the pair's text), the byte <-> unicode table, the
pre-tokenizer regexes run with the `regex` module, and the classic GPT-2 merge loop.
"""
import argparse
import json
import os
import random
import unicodedata
from collections import Counter

import regex

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
STYLES = ("gpt2", "qwen2", "llama3")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

TRAINING_TEXT = """
The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran into the forest.
We train a small model with reinforcement learning on a mesh of machines in Paris, Zurich, Dublin and
Toronto. Each node generates rollouts, scores them and trains locally; only compressed updates travel.
It's the tokenizer's job to turn text into tokens; they're merged by rank, and we'll check that it's right.
I'm sure you've seen this before: the the the and and of of to to in in is is that that for for.
def encode(self, text):
    ids = []
    for word in self.pre_tokenize(text):
        ids.extend(self.bpe(word))
    return ids

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) printf("%s\\n", argv[i]);
  return 0;
}
if (x == 1 && y != 2) { return x + y * 3; } else { return -1; }
Le café était très bon, mais la crème brûlée était meilleure. Où est la bibliothèque ? À bientôt !
Der Bär läuft über die Straße und frühstückt Müsli. Ça va très bien, merci. El niño comió piña.
São Paulo, Kraków, Zürich, Genève, Besançon, Málaga, Ålesund, Øresund, Łódź.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 1000 2024 3.14159 2.71828 1e-5 0x1F.
The coordinator merges the updates, applies the outer step and broadcasts the new version to every node.
A node that drops out of the round is not waited for; its late update is weighted by its staleness.
    while left < right:
        middle = (left + right) // 2
        if values[middle] < target:
            left = middle + 1
        else:
            right = middle
"""


def bytes_to_unicode():
    """The GPT-2 byte-level alphabet: printable Latin-1 bytes map to themselves, the other 68 bytes
    to U+0100 onwards, in byte order."""
    printable = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def to_byte_level(s: str) -> str:
    return "".join(BYTE_TO_CHAR[b] for b in s.encode("utf-8"))


def train_merges(text: str, n_merges: int):
    """Plain BPE training: repeatedly merge the most frequent adjacent pair (ties: smallest pair text)."""
    words = Counter(tuple(to_byte_level(w)) for w in regex.findall(GPT2_PATTERN, text))
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


def make_tokenizer_json(style: str, n_merges: int = 300) -> dict:
    """A tokenizer.json as Hugging Face writes it: ids 0..255 are the bytes (id = byte value), then
    one id per merge, then the added tokens."""
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    merges = train_merges(TRAINING_TEXT, n_merges)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
             "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if style == "gpt2":
        model["merges"] = [f"{a} {b}" for a, b in merges]
        pre, normalizer = byte_level, None
        post = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    else:
        model["merges"] = [[a, b] for a, b in merges]
        pattern = QWEN2_PATTERN if style == "qwen2" else LLAMA3_PATTERN
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            dict(byte_level, use_regex=False)]}
        normalizer = {"type": "NFC"} if style == "qwen2" else None
        post = {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [], "special_tokens": {}}
        if style == "llama3":
            model["ignore_merges"] = True
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": model}


def write_tokenizer(folder: str, style: str) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(make_tokenizer_json(style), f, ensure_ascii=False, indent=1)
    return path


class PyBpeTokenizer:
    """Encodes like a Hugging Face byte-level BPE tokenizer.json of the three styles above."""

    def __init__(self, spec: dict):
        self.vocab = spec["model"]["vocab"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["model"]["merges"]]
        self.ranks = {m: i for i, m in reversed(list(enumerate(merges)))}
        self.ignore_merges = spec["model"].get("ignore_merges", False)
        self.added = sorted(((t["content"], t["id"]) for t in spec.get("added_tokens") or []),
                            key=lambda t: -len(t[0]))
        self.nfc = (spec.get("normalizer") or {}).get("type") == "NFC"
        pre = spec["pre_tokenizer"]
        steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
        self.steps = []
        for s in steps:
            if s["type"] == "Split":
                assert s["behavior"] == "Isolated" and not s["invert"]
                self.steps.append(("split", regex.compile(s["pattern"]["Regex"]), False))
            else:
                pat = regex.compile(GPT2_PATTERN) if s.get("use_regex", True) else None
                self.steps.append(("byte_level", pat, s.get("add_prefix_space", True)))
        self.cache = {}

    @staticmethod
    def load(path: str) -> "PyBpeTokenizer":
        with open(path, encoding="utf-8") as f:
            return PyBpeTokenizer(json.load(f))

    def bpe(self, word: str):
        """Classic GPT-2 loop: merge every occurrence of the lowest-ranked pair, repeat."""
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), float("inf")), a, b) for a, b in zip(parts, parts[1:])]
            rank, a, b = min(pairs)
            if rank == float("inf"):
                break
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        ids = [self.vocab[p] for p in parts]
        self.cache[word] = ids
        return ids

    def pre_tokenize(self, text: str):
        pieces = [text]
        for kind, pat, prefix in self.steps:
            if kind == "byte_level" and prefix:
                pieces = [p if p.startswith(" ") else " " + p for p in pieces]
            if pat is not None:
                out = []
                for p in pieces:
                    last = 0
                    for m in pat.finditer(p):
                        if m.start() > last:
                            out.append(p[last:m.start()])
                        if m.end() > m.start():
                            out.append(m.group())
                        last = max(last, m.end())
                    if last < len(p):
                        out.append(p[last:])
                pieces = out
        return [p for p in pieces if p]

    def encode(self, text: str):
        ids, pos, start = [], 0, 0
        def plain(s):
            if self.nfc:
                s = unicodedata.normalize("NFC", s)
            for piece in self.pre_tokenize(s):
                ids.extend(self.bpe(to_byte_level(piece)))
        while pos < len(text):
            hit = next(((c, i) for c, i in self.added if text.startswith(c, pos)), None)
            if hit is None:
                pos += 1
                continue
            if pos > start:
                plain(text[start:pos])
            ids.append(hit[1])
            pos = start = pos + len(hit[0])
        if start < len(text):
            plain(text[start:])
        return ids


PALETTE_WORDS = ["the", " the", "The", " fox", " dog", "def", " return", " ids", "int", " main", "café",
                 " très", " über", "Zürich", " naïve", "São", "Łódź", "hello", " world", "it's", " they're",
                 " we'll", "I'M", " YOU'VE", "don't", "12345", " 2024", "3.14", "0x1F", "->", "==", "!=",
                 "&&", "{", "}", "();", "\n", "\n\n", "  ", "    ", "\t", " \n ", "\r\n", "   x", "中文",
                 "字符", "日本語", "😀", "👍🏽", "🇫🇷", "Ελληνικά", "русский", "العربية", "٣٤", "²", "½",
                 "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "...", "—", "«", "»", "'", "''", "'s"]


def random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 24)):
        r = rng.random()
        if r < 0.05:
            parts.append(rng.choice(SPECIALS))
        elif r < 0.75:
            parts.append(rng.choice(PALETTE_WORDS))
        else:
            parts.append(chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x17F),
                                         rng.randint(0x4E00, 0x4E80), rng.randint(0x1F600, 0x1F64F)])))
    return "".join(parts)


def make_cases(style: str, tok: PyBpeTokenizer, n: int, seed: int):
    rng = random.Random(seed)
    fixed = ["", "hello world", "The quick brown fox jumps over the lazy dog.", "  leading and trailing  ",
             "line one\nline two\n\n\tindented", "Le café était très bon", "中文字符 and emoji 😀👍🏽",
             "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", "it's they're WE'LL",
             "x" * 300, " " * 50 + "y", "1234567890", "<|endoftext|><|endoftext|>", "<|im_end"]
    texts = fixed + [random_text(rng) for _ in range(n - len(fixed))]
    cases = []
    for t in texts:
        if unicodedata.normalize("NFC", t) != t:
            continue  # the C++ side takes NFC as the identity; keep the cases NFC already
        cases.append({"text": t, "ids": tok.encode(t)})
    return {"style": style, "tokenizer": "tokenizer.json", "seed": seed, "cases": cases}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", required=True, help="folder that receives <style>/tokenizer.json and cases.json")
    ap.add_argument("--n", type=int, default=300, help="cases per style")
    args = ap.parse_args()
    for i, style in enumerate(STYLES):
        folder = os.path.join(args.write, style)
        path = write_tokenizer(folder, style)
        tok = PyBpeTokenizer.load(path)
        cases = make_cases(style, tok, args.n, seed=1234 + i)
        with open(os.path.join(folder, "cases.json"), "w", encoding="utf-8") as f:
            rows = [json.dumps(c, ensure_ascii=False) for c in cases.pop("cases")]
            head = json.dumps(cases, ensure_ascii=False)[:-1]
            f.write(head + ', "cases": [\n' + ",\n".join(rows) + "\n]}\n")
        print(f"{folder}: {len(tok.ranks)} merges, {len(rows)} cases")


if __name__ == "__main__":
    main()
