#!/usr/bin/env python3
"""CPU samples of a gperftools profile by the library they fell in.

A profile taken on the GPU machine names that machine's system libraries
(its glibc, its driver), whose symbols google-pprof cannot read here, so
their frames come out under wrong names. The mapped object of each sample's
innermost frame does not depend on symbols: this prints the samples per
library, the part of a profile that stays exact across machines.

    tools/gpu/profile_by_library.py server.prof [--top N]
"""
import argparse
import collections
import struct


def read_profile(path):
    """Returns ([(count, pcs)], [(start, end, object name)]) of a CPU profile."""
    data = open(path, "rb").read()
    word = 8
    # Header: 0, header words (3), version, sampling period, padding.
    header_words = struct.unpack_from("<2Q", data, 0)[1]
    offset = (2 + header_words) * word
    records = []
    while True:
        count, depth = struct.unpack_from("<2Q", data, offset)
        offset += 2 * word
        pcs = struct.unpack_from("<%dQ" % depth, data, offset)
        offset += depth * word
        if count == 0 and depth == 1 and pcs[0] == 0:  # The trailer.
            break
        records.append((count, pcs))
    maps = []
    for line in data[offset:].decode("latin-1").splitlines():
        fields = line.split()
        if len(fields) >= 6 and "x" in fields[1]:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            maps.append((start, end, fields[5].rsplit("/", 1)[-1]))
    return records, maps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=14)
    args = parser.parse_args()
    records, maps = read_profile(args.profile)

    def library(pc):
        for start, end, name in maps:
            if start <= pc < end:
                return name
        return "?"

    samples = collections.Counter()
    for count, pcs in records:
        samples[library(pcs[0])] += count
    total = sum(samples.values())
    print("total samples", total)
    for name, count in samples.most_common(args.top):
        print("%7d %5.1f%% %s" % (count, 100.0 * count / total, name))


if __name__ == "__main__":
    main()
