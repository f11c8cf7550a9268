#!/usr/bin/env python3
"""Transcribe the seed's TurboQuant tables into C++ and print their checksums.

Reads mlx-bun's turboquant-tables.ts as it appears in the seed diff (the first ~240 lines of
mlx-bun-0.0.9-to-0.0.11.diff.txt), checks that every number is exact in float32, and prints
  - the kSigns<d> and kSeedCentroids/Boundaries<bits> arrays of src/kvlm/quant/turboquant_tables.cpp,
  - the FNV-1a checksums that tests/quant/turboquant_test.cpp compares the compiled tables with.
The gaussian arrays of the same file come from lloyd_max_gaussian (the test
LloydMax.GaussianTablesMatchGenerator prints them when they disagree). Plain Python 3, no packages.

usage: tools/turboquant_tables.py <seed diff> [--checksums]
"""
import re
import struct
import sys

HEAD_DIMS = (64, 128, 256, 512)
VALUE_BITS = (2, 3, 4, 5, 8)


def seed_text(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.endswith("src/mlx/turboquant-tables.ts"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("package/"))
    # Diff lines start with '+'; drop it.
    return "\n".join(l[1:] if l.startswith("+") else l for l in lines[start:end])


def exact_f32(v):
    f = struct.unpack("<f", struct.pack("<f", v))[0]
    if f != v:
        sys.exit(f"{v!r} is not a float32 value")
    return f


def parse(text):
    signs, tables = {}, {}
    for d in HEAD_DIMS:
        body = re.search(r"\n  %d: \[(.*?)\]" % d, text, re.S).group(1)
        signs[d] = [int(v) for v in re.findall(r"-?\d+", body)]
        assert len(signs[d]) == d and all(v in (1, -1) for v in signs[d])
    for b in VALUE_BITS:
        m = re.search(r"\n  %d: \{\s*centroids: \[(.*?)\],\s*boundaries: \[(.*?)\]" % b, text, re.S)
        c = [exact_f32(float(v)) for v in re.findall(r"-?[\d.e+-]+", m.group(1))]
        bd = [exact_f32(float(v)) for v in re.findall(r"-?[\d.e+-]+", m.group(2))]
        assert len(c) == 2**b and len(bd) == 2**b - 1
        tables[b] = (c, bd)
    return signs, tables


def fnv1a(data, h=0xCBF29CE484222325):
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def f32_bytes(values):
    return struct.pack("<%df" % len(values), *values)


def cpp_floats(name, values):
    # repr of an exact float32 value parses back to it as a float literal.
    rows = [" ".join(repr(v) + "f," for v in values[i:i + 4]) for i in range(0, len(values), 4)]
    return "constexpr float %s[%d] = {\n%s\n};" % (name, len(values), "\n".join("    " + r for r in rows))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    signs, tables = parse(seed_text(sys.argv[1]))
    if "--checksums" in sys.argv:
        for d in HEAD_DIMS:
            neg = sum(v < 0 for v in signs[d])
            print("signs %d: fnv1a 0x%016x, %d negative" % (d, fnv1a(bytes(v & 0xFF for v in signs[d])), neg))
        for b in VALUE_BITS:
            c, bd = tables[b]
            print("table %d: fnv1a 0x%016x" % (b, fnv1a(f32_bytes(c) + f32_bytes(bd))))
        return
    for d in HEAD_DIMS:
        rows = [" ".join("%d," % v for v in signs[d][i:i + 16]) for i in range(0, d, 16)]
        print("constexpr int8_t kSigns%d[%d] = {\n%s\n};" % (d, d, "\n".join("    " + r for r in rows)))
    for b in VALUE_BITS:
        print(cpp_floats("kSeedCentroids%d" % b, tables[b][0]))
        print(cpp_floats("kSeedBoundaries%d" % b, tables[b][1]))


if __name__ == "__main__":
    main()
