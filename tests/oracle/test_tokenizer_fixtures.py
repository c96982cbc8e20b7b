"""Checks that the committed tokenizer fixtures (tests/data/tokenizer/<style>/) are exactly what the
plain-Python oracle in tokenizer_fixtures.py produces today, so the C++ test that reads them
(tests/unit/tokenizer/test_oracle_fixtures.cpp) compares against the oracle and not a stale copy.
    /usr/bin/python3 tests/oracle/test_tokenizer_fixtures.py [--meshrl PATH]   (PATH unused here)
On failure, remake them: /usr/bin/python3 tests/oracle/tokenizer_fixtures.py --write tests/data/tokenizer
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tokenizer_fixtures as tf  # noqa: E402

DATA = os.path.join(HERE, "..", "data", "tokenizer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshrl", help="the meshrl binary (not needed: it has no tokenizer subcommand yet)")
    ap.parse_args()
    failures = 0
    for i, style in enumerate(tf.STYLES):
        with open(os.path.join(DATA, style, "tokenizer.json"), encoding="utf-8") as f:
            committed_tok = json.load(f)
        with open(os.path.join(DATA, style, "cases.json"), encoding="utf-8") as f:
            committed_cases = json.load(f)
        with tempfile.TemporaryDirectory() as tmp:
            path = tf.write_tokenizer(tmp, style)
            with open(path, encoding="utf-8") as f:
                fresh_tok = json.load(f)
        if fresh_tok != committed_tok:
            print(f"FAIL {style}: tokenizer.json differs from what tokenizer_fixtures.py writes")
            failures += 1
            continue
        tok = tf.PyBpeTokenizer(committed_tok)
        bad = [c["text"] for c in committed_cases["cases"] if tok.encode(c["text"]) != c["ids"]]
        n = len(committed_cases["cases"])
        if bad or n < 250:
            print(f"FAIL {style}: {len(bad)} of {n} cases disagree with the Python oracle, e.g. {bad[:3]!r}")
            failures += 1
        else:
            # Byte-level round trip of the oracle itself: ids -> vocab strings -> bytes -> text.
            inv = {v: k for k, v in committed_tok["model"]["vocab"].items()}
            inv.update({t["id"]: t["content"] for t in committed_tok["added_tokens"]})
            specials = {t["id"] for t in committed_tok["added_tokens"]}
            for c in committed_cases["cases"]:
                out = b"".join(inv[i].encode() if i in specials else bytes(tf.CHAR_TO_BYTE[ch] for ch in inv[i])
                               for i in c["ids"])
                if out.decode("utf-8") != c["text"]:
                    print(f"FAIL {style}: oracle ids do not decode back to {c['text']!r}")
                    failures += 1
                    break
            print(f"ok   {style}: {n} cases, {len(tok.ranks)} merges")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
