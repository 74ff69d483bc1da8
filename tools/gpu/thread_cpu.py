#!/usr/bin/env python3
"""CPU use per thread group of running processes, sampled from /proc.

For machines without perf: every INTERVAL seconds, reads utime+stime of each
thread of each PID and prints, per process and thread name (trailing digits
folded, so oasr-grpc-0..5 form one group), how many threads the group has and
how many cores it used over the interval. Stops after COUNT intervals or when
every process has exited.

  tools/gpu/thread_cpu.py --interval 8 --count 6 PID [PID...]
"""
import argparse
import os
import re
import sys
import time


def snapshot(pid):
    """{tid: (group, ticks)} for one process, or None once it has gone."""
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        # Fields after the name start at field 3 (state): utime is 14, stime 15.
        ticks = int(fields[11]) + int(fields[12])
        threads[tid] = (re.sub(r"[-_]?\d+$", "", name) or name, ticks)
    return threads


def process_name(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return str(pid)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=8.0)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("pids", nargs="+", type=int)
    args = parser.parse_args()
    hz = os.sysconf("SC_CLK_TCK")
    names = {pid: process_name(pid) for pid in args.pids}
    previous = {pid: snapshot(pid) for pid in args.pids}
    last = time.monotonic()
    for i in range(args.count):
        time.sleep(args.interval)
        now = time.monotonic()
        elapsed = now - last
        last = now
        alive = False
        print(f"--- interval {i + 1} ({elapsed:.1f} s)")
        for pid in args.pids:
            current = snapshot(pid)
            if current is None or previous[pid] is None:
                continue
            alive = True
            groups = {}
            for tid, (group, ticks) in current.items():
                before = previous[pid].get(tid, (group, 0))[1]
                count, used = groups.get(group, (0, 0))
                groups[group] = (count + 1, used + ticks - before)
            total = sum(used for _, used in groups.values()) / hz / elapsed
            print(f"{names[pid]} ({pid}): {total:.2f} cores, {len(current)} threads")
            for group, (count, used) in sorted(groups.items(), key=lambda g: -g[1][1]):
                cores = used / hz / elapsed
                if cores >= 0.005:
                    print(f"  {group:<24} {count:>4} threads {cores:6.2f} cores")
            previous[pid] = current
        sys.stdout.flush()
        if not alive:
            break


if __name__ == "__main__":
    main()
