#!/usr/bin/env python3
"""Self time per op group of one train step, from a Chrome trace that `meshrl bench train` writes
with MESHRL_TRAIN_TRACE=FILE (libtorch's legacy profiler: nested "X" events per thread).

    MESHRL_TRAIN_TRACE=/tmp/t.json build/meshrl bench train --model tiny --threads 1
    /usr/bin/python3 bench/trace_groups.py /tmp/t.json

Self time = an event's duration minus that of the events nested directly inside it on the same
thread; groups are the ones BENCHMARKS.md "train" quotes. Prints a Markdown table.
"""
import json
import sys
from collections import defaultdict

GROUPS = [  # first match wins: (group, op names or a prefix ending in *)
    ("weight products (mm, addmm)", {"aten::mm", "aten::addmm", "aten::addmm_"}),
    ("attention products (bmm, baddbmm)", {"aten::bmm", "aten::baddbmm", "aten::baddbmm_"}),
    ("softmax / log-softmax (fwd + bwd)", {"aten::_softmax", "aten::_softmax_backward_data", "aten::_log_softmax",
                                          "aten::_log_softmax_backward_data", "aten::logsumexp"}),
    ("copies (copy_, cat, fill_, clone)", {"aten::copy_", "aten::cat", "aten::fill_", "aten::zero_", "aten::clone"}),
    ("SiLU (fwd + bwd)", {"aten::silu", "aten::silu_backward"}),
    ("AdamW", {"aten::_foreach_*", "aten::addcdiv_", "aten::addcmul_", "aten::lerp_", "aten::sqrt"}),
    ("elementwise (mul, add, sub, div, rsqrt, pow, sum, mean, ...)",
     {"aten::mul", "aten::mul_", "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::div", "aten::div_",
      "aten::rsqrt", "aten::rsqrt_", "aten::pow", "aten::sum", "aten::mean", "aten::neg", "aten::exp", "aten::where",
      "aten::masked_fill", "aten::masked_fill_", "aten::clamp", "aten::minimum", "aten::maximum", "aten::gather"}),
]


def group_of(name):
    for g, names in GROUPS:
        for n in names:
            if name == n or (n.endswith("*") and name.startswith(n[:-1])):
                return g
    return None


def main():
    events = [e for e in json.load(open(sys.argv[1])) if e.get("ph") == "X"]
    by_thread = defaultdict(list)
    for e in events:
        by_thread[e.get("tid")].append(e)
    self_us = defaultdict(float)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # open events: [end, name, child time]
        for e in evs:
            end = e["ts"] + e["dur"]
            while stack and stack[-1][0] <= e["ts"]:
                done = stack.pop()
                self_us[done[1]] += done[3] - done[2]
            if stack:
                stack[-1][2] += e["dur"]
            stack.append([end, e["name"], 0.0, e["dur"]])
        while stack:
            done = stack.pop()
            self_us[done[1]] += done[3] - done[2]
    total = sum(self_us.values())
    groups, other = defaultdict(float), defaultdict(float)
    for name, t in self_us.items():
        g = group_of(name)
        if g:
            groups[g] += t
        else:
            other[name] += t
    print("| op group | ms | share |")
    print("|---|---|---|")
    for g, _ in GROUPS:
        print(f"| {g} | {groups[g] / 1e3:.0f} | {100 * groups[g] / total:.1f}% |")
    rest = sum(other.values())
    top = ", ".join(f"{n.replace('aten::', '')} {100 * t / total:.1f}%" for n, t in sorted(other.items(), key=lambda x: -x[1])[:6])
    print(f"| everything else ({top}) | {rest / 1e3:.0f} | {100 * rest / total:.1f}% |")
    print(f"| total | {total / 1e3:.0f} | |")


if __name__ == "__main__":
    main()
