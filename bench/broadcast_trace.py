#!/usr/bin/env python3
"""What each broadcast of a mesh run carried: bits per value, share of non-zero codes, norm, and
the cosine with the previous broadcast. The last column shows error feedback ping-ponging. When the
down quantiser overshoots, the coordinator's residual flips sign and the next broadcast sends it
back, so successive broadcasts point against each other (cosine well below 0). Those bytes move
the weights and then move them back.

    /usr/bin/python3 bench/broadcast_trace.py RUN_DIR [--every 4]

RUN_DIR is a coordinator's run directory or a demo's (its coordinator/ is used). This reads the
stored broadcasts (versions/v-*/broadcast.bin, update_format.h) with its own small parser.
Decompression uses libzstd through ctypes; the library is already installed with libzstd-dev, so no
Python package is needed. Findings: BENCHMARKS.md, "demo", session 13.
"""
import argparse
import ctypes
import ctypes.util
import math
import os
import struct
import sys

import numpy as np

CODECS = {1: "fp32", 2: "int8", 3: "int4", 4: "int2"}


def _zstd():
    name = ctypes.util.find_library("zstd") or "libzstd.so.1"
    lib = ctypes.CDLL(name)
    lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    lib.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    return lib


ZSTD = _zstd()


def unzstd(frame):
    n = ZSTD.ZSTD_getFrameContentSize(frame, len(frame))
    if n >= 2**63:  # ZSTD_CONTENTSIZE_UNKNOWN / _ERROR: the writer always declares it
        raise ValueError("zstd frame without a content size")
    out = ctypes.create_string_buffer(n)
    got = ZSTD.ZSTD_decompress(out, n, frame, len(frame))
    if ZSTD.ZSTD_isError(got) or got != n:
        raise ValueError("zstd frame does not decompress")
    return out.raw


def decode_tensors(path):
    """(codec name, stored bytes, [(name, block_size, scales or None, float64 values)] in record order)."""
    b = open(path, "rb").read()
    if b[:4] != b"MRLU":
        raise ValueError(f"{path}: not an update (magic {b[:4]!r})")
    _, codec, comp, n = struct.unpack_from("<HBBI", b, 4)
    o, recs = 12, []
    for _ in range(n):
        (nl,) = struct.unpack_from("<H", b, o)
        name = b[o + 2:o + 2 + nl].decode()
        o += 2 + nl
        (rank,) = struct.unpack_from("<B", b, o)
        o += 1 + 8 * rank
        numel, bs, stored = struct.unpack_from("<QIQ", b, o)
        o += 20
        recs.append((name, numel, bs, stored))
    tensors = []
    for name, numel, bs, stored in recs:
        raw = b[o:o + stored]
        o += stored
        if comp == 1:
            raw = unzstd(raw)
        if codec == 1:
            tensors.append((name, 0, None, np.frombuffer(raw, dtype="<f4").astype(np.float64)))
            continue
        nb = (numel + bs - 1) // bs
        scales = np.frombuffer(raw[:4 * nb], dtype="<f4").astype(np.float64)
        body = np.frombuffer(raw[4 * nb:], dtype=np.uint8)
        if codec == 2:
            codes = body.view(np.int8).astype(np.float64)
        else:
            bits, per = (4, 2) if codec == 3 else (2, 4)
            mask, sign = (1 << bits) - 1, 1 << (bits - 1)
            u = np.stack([(body >> (bits * j)) & mask for j in range(per)], 1).reshape(-1)[:numel].astype(np.int16)
            codes = np.where(u >= sign, u - (1 << bits), u).astype(np.float64)
        tensors.append((name, bs, scales, np.repeat(scales, bs)[:numel] * codes))
    return CODECS.get(codec, "?"), len(b), tensors


def decode(path):
    """(codec name, stored bytes, float64 vector of every tensor's values in record order)."""
    codec, size, tensors = decode_tensors(path)
    return codec, size, np.concatenate([t[3] for t in tensors])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--every", type=int, default=1, help="print every k-th version (the summary covers all)")
    a = ap.parse_args()
    root = a.run_dir
    if os.path.isdir(os.path.join(root, "coordinator", "versions")):
        root = os.path.join(root, "coordinator")
    vdir = os.path.join(root, "versions")
    versions = sorted(int(d[2:]) for d in os.listdir(vdir) if d.startswith("v-") and
                      os.path.exists(os.path.join(vdir, d, "broadcast.bin")))
    if not versions:
        sys.exit(f"{vdir}: no stored broadcasts")
    prev, total, cosines, sq = None, None, [], 0.0
    print("version codec bits/value nonzero norm cos(previous)")
    for v in versions:
        codec, size, x = decode(os.path.join(vdir, f"v-{v:06d}", "broadcast.bin"))
        cos = float("nan")
        if prev is not None and np.linalg.norm(x) > 0 and np.linalg.norm(prev) > 0:
            cos = float(np.dot(x, prev) / np.linalg.norm(x) / np.linalg.norm(prev))
            cosines.append(cos)
        total = x.copy() if total is None else total + x
        sq += float(np.dot(x, x))
        if (v - versions[0]) % a.every == 0 or v == versions[-1]:
            print(f"{v:7d} {codec:5s} {size * 8 / x.size:10.3f} {np.mean(x != 0):7.3f} {np.linalg.norm(x):6.3f} {cos:13.3f}")
        prev = x
    med = float(np.median(cosines)) if cosines else math.nan
    # |sum of broadcasts| against sqrt(sum of |broadcast|^2): above 1 the steps add up, below 1
    # they cancel each other.
    print(f"median cos(previous) {med:.3f}; net move |sum| {np.linalg.norm(total):.3f} against "
          f"sqrt(sum |b|^2) {math.sqrt(sq):.3f} (ratio {np.linalg.norm(total) / math.sqrt(sq):.2f})")


if __name__ == "__main__":
    main()
