"""Sums an `ncu --csv --metrics gpu__time_duration.sum` log by kernel family:
one line per kernel name (shortened), its launches, total microseconds and
share of the whole. usage: ncu_summary.py LOG.csv"""

import csv
import re
import sys
from collections import defaultdict


def family(name):
    name = re.sub(r"^void ", "", name)
    for anon in ("<unnamed>::", "(anonymous namespace)::"):
        name = name.replace(anon, "")
    name = re.sub(r"\(.*", "", name)                 # argument lists
    name = name.replace("oasr::kernels::", "").replace("cutlass::", "")
    return name[:60]


def main(path):
    totals, counts = defaultdict(float), defaultdict(int)
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        us = value / 1000.0 if unit.startswith("n") else (value if unit.startswith("u") else value * 1000.0)
        key = family(row["Kernel Name"])
        totals[key] += us
        counts[key] += 1
    whole = sum(totals.values())
    print(f"{'kernel':60s} {'launches':>8s} {'us':>10s} {'share':>7s}")
    for key, us in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{key:60s} {counts[key]:8d} {us:10.1f} {100 * us / whole:6.1f}%")
    print(f"{'total':60s} {sum(counts.values()):8d} {whole:10.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
