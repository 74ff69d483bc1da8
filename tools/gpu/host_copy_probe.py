#!/usr/bin/env python3
"""Host copy costs on the GPU box: the engine's staging pattern (44 KB rows from
tens of thousands of scattered per-stream buffers into one page-locked staging
buffer), with 4 KB pages and with transparent huge pages. Needs numpy and torch.

  python3 tools/gpu/host_copy_probe.py
"""
import mmap
import time

import numpy as np
import torch

def thp():
    try:
        return open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
    except OSError as e:
        return str(e)
print("THP:", thp())

def huge_array(nbytes):
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE)
    a = np.frombuffer(m, dtype=np.uint8)
    a[:] = 1
    return m, a

def pinned_huge(nbytes):
    m, a = huge_array(nbytes)
    ptr = a.ctypes.data
    err = torch.cuda.cudart().cudaHostRegister(ptr, nbytes, 0) if torch.cuda.is_available() else -1
    return m, a, int(err)

streams, row = 60000, 10960
per = 25000 * 4  # 100 KB per stream buffer
rng = np.random.default_rng(1)
idx = rng.permutation(streams)[:6000]

def stage(srcs, dst, label):
    d = dst[:6000 * row * 4].view(np.float32).reshape(6000, row)
    t = time.perf_counter()
    for r, i in enumerate(idx):
        d[r] = srcs[i][:row]
    dt = time.perf_counter() - t
    print(f"{label}: {dt / 6000 * 1e6:.1f} us a row")

small = [np.ones(per // 4, np.float32) for _ in range(streams)]  # malloc'd, 4 KB pages
pin = torch.empty(6000 * row * 4, dtype=torch.uint8, pin_memory=torch.cuda.is_available()).numpy()
pin[:] = 0
stage(small, pin, "malloc'd sources -> cudaHostAlloc staging")
m_src, big = huge_array(streams * per)
huge_srcs = [big[i * per:(i + 1) * per].view(np.float32) for i in range(streams)]
stage(huge_srcs, pin, "huge-page sources -> cudaHostAlloc staging")
m_dst, pin_h, err = pinned_huge(6000 * row * 4 + (2 << 20))
print("cudaHostRegister of a huge-page buffer:", err)
stage(small, pin_h, "malloc'd sources -> huge-page registered staging")
stage(huge_srcs, pin_h, "huge-page sources -> huge-page registered staging")
page = np.empty(6000 * row * 4, np.uint8); page[:] = 0
stage(small, page, "malloc'd sources -> malloc'd destination")
