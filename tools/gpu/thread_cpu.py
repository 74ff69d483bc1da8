#!/usr/bin/env python3
"""CPU use per thread group of running processes, sampled from /proc.

For machines without perf: every INTERVAL seconds, reads utime+stime of each
thread of each PID and prints, per process and thread name (trailing digits
folded, so oasr-grpc-0..5 form one group), how many cores the group used over
the interval, each process's resident memory, and the machine's busy share of
every core. Stops after COUNT intervals or when every process has exited.

  tools/gpu/thread_cpu.py --interval 8 --count 6 PID [PID...]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from load_runs import core_times, thread_cpu  # noqa: E402  (/proc readers shared with load_runs)


def process_name(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return str(pid)


def resident_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=8.0)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("pids", nargs="+", type=int)
    args = parser.parse_args()
    names = {pid: process_name(pid) for pid in args.pids}
    previous = {pid: thread_cpu(pid) for pid in args.pids}
    previous_cores = core_times()
    last = time.monotonic()
    for i in range(args.count):
        time.sleep(args.interval)
        now = time.monotonic()
        elapsed = now - last
        last = now
        alive = False
        print(f"--- interval {i + 1} ({elapsed:.1f} s)")
        cores = core_times()
        busy = [(b1 - b0) / max(t1 - t0, 1) for (b0, t0), (b1, t1) in zip(previous_cores, cores)]
        previous_cores = cores
        print("cores busy %: " + " ".join(f"{100 * b:.0f}" for b in busy))
        for pid in args.pids:
            current = thread_cpu(pid)
            if not current:
                continue  # gone (or not started yet)
            alive = True
            used = {group: (seconds - previous[pid].get(group, 0.0)) / elapsed for group, seconds in current.items()}
            print(f"{names[pid]} ({pid}): {sum(used.values()):.2f} cores, {resident_mib(pid):.0f} MiB resident")
            for group, cores in sorted(used.items(), key=lambda g: -g[1]):
                if cores >= 0.005:
                    print(f"  {group:<24} {cores:6.2f} cores")
            previous[pid] = current
        sys.stdout.flush()
        if not alive:
            break


if __name__ == "__main__":
    main()
