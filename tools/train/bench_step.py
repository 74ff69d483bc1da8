"""What one training step of tools/train/train.py costs, and where the time
goes: the bundled geometry (12 x 256, 258 units) on synthetic batches shaped
like the training data (utterances of ~3.2 s, 120,000 padded frames a
batch, dynamic chunks), on one device.

    python3 -m tools.train.bench_step [--device cuda] [--steps 60] \\
        [--variants baseline,device_rng,device_rng_compile]

Variants (each a fresh model; the first --warmup steps are not timed):
  baseline            train.py's step as it is: SpecAugment and frequency
                      warp draw on a CPU generator and copy each draw to
                      the device, the targets are built on the host, the
                      loss is read and the gradient norm checked every step.
                      Each of those waits for the GPU, so the host cannot
                      queue the next kernels while the GPU works.
  device_rng          the same maths with the draws on a device generator,
                      the targets copied from pinned memory without waiting,
                      the CTC lengths given from the host, the loss summed
                      on the device (read once at the end) and a non-finite
                      gradient zeroed instead of skipped: no wait inside a
                      step.
  device_rng_compile  device_rng with every encoder layer torch.compile'd
                      (dynamic shapes); compile time is in the warm-up.
Prints, per variant, the median and mean step time, the audio trained per
second, and the GPU's busy share of the timed steps (kernel time over wall
time, from torch.profiler, --profile-steps steps).
"""

import argparse
import math
import random
import statistics
import sys
import time

import torch

from tools.train.train import build_model, make_batches
from tools.train.train_forward import (PositionCache, add_dropout_hooks, dynamic_chunk, encode,
                                       output_lengths)

VOCAB = 258
FRAMES_PER_UNIT = 13  # the corpus: ~24 units per 3.2 s sentence


def synthetic_lengths(n: int, rng: random.Random):
    """Frame counts (10 ms) with the training set's spread: log-normal around
    3.2 s, within 0.6-15 s."""
    return [int(min(1500, max(60, rng.lognormvariate(math.log(290), 0.5)))) for _ in range(n)]


class Args:
    """train.py's defaults that build_model and the step read."""
    output_size, heads, linear_units, num_blocks, kernel = 256, 4, 1024, 12, 15


def run(variant: str, device: torch.device, steps: int, warmup: int, batch_frames: int,
        profile_steps: int, seed: int):
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = build_model(Args, VOCAB).to(device)
    add_dropout_hooks(model, 0.1)
    if variant.endswith("compile"):
        for i, layer in enumerate(model.encoder.encoders):
            model.encoder.encoders[i] = torch.compile(layer, dynamic=True)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9,
                            weight_decay=1e-3)
    ctc = torch.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    positions = PositionCache(Args.output_size)
    on_device = variant != "baseline"
    gen = (torch.Generator(device=device) if on_device else torch.Generator()).manual_seed(seed)
    amp = device.type == "cuda"
    lengths = synthetic_lengths(40000, rng)
    batches = make_batches(lengths, batch_frames, rng)
    total = warmup + steps
    batches = (batches * (total // len(batches) + 1))[:total]
    # Features live on the device, as train.py's FeatureStore keeps them
    # (float16; a batch is a slice made float32).
    feats = torch.randn(max(len(b) for b in batches), max(lengths), 80, device=device,
                        dtype=torch.float16)
    loss_sum = torch.zeros((), device=device)
    times, audio = [], 0.0

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def step(idx):
        nonlocal loss_sum
        lens = [lengths[i] for i in idx]
        t = max(lens)
        x = feats[:len(idx), :t].float()
        xl = torch.tensor(lens)
        tl = [max(1, n // FRAMES_PER_UNIT) for n in lens]
        targets = torch.randint(1, VOCAB - 1, (sum(tl),))
        tlens = torch.tensor(tl)
        if on_device and device.type == "cuda":
            xl, targets, tlens = (v.pin_memory() for v in (xl, targets, tlens))
        xl, targets, tlens = (v.to(device, non_blocking=on_device) for v in (xl, targets, tlens))
        chunk, left = dynamic_chunk(int(output_lengths(torch.tensor(t))), rng)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
            logp, out_len = encode(model, x, xl, chunk, left, positions, gen, 0.1)
        if on_device:
            # Lengths on the host: CTCLoss copies device lengths to the host,
            # which waits for the forward pass.
            out_len = output_lengths(torch.tensor(lens)).clamp(min=1, max=logp.size(1))
            tlens = torch.tensor(tl)
        loss = ctc(logp.transpose(0, 1), targets, out_len, tlens) / len(idx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        if on_device:
            finite = torch.isfinite(norm).to(torch.float32)
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.mul_(finite)
            opt.step()
            loss_sum += loss.detach()
        else:
            if torch.isfinite(norm):
                opt.step()
            float(loss.detach())
        return sum(lens)

    for idx in batches[:warmup]:
        step(idx)
    sync()
    start = time.time()
    for idx in batches[warmup:]:
        t0 = time.time()
        audio += step(idx) / 100.0
        if not on_device:
            times.append(time.time() - t0)
    sync()
    wall = time.time() - start
    if on_device:
        times = [wall / steps] * steps  # no per-step boundary without a wait
    busy = None
    if device.type == "cuda" and profile_steps > 0:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            p0 = time.time()
            for idx in batches[warmup:warmup + profile_steps]:
                step(idx)
            sync()
            pwall = time.time() - p0
        kernel_us = sum(e.self_device_time_total for e in prof.key_averages())
        busy = kernel_us / 1e6 / pwall
    float(loss_sum)
    return {"variant": variant, "median_ms": 1000 * statistics.median(times),
            "mean_ms": 1000 * wall / steps, "audio_s_per_s": audio / wall, "gpu_busy": busy}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--batch-frames", type=int, default=120000)
    p.add_argument("--profile-steps", type=int, default=10)
    p.add_argument("--variants", default="baseline,device_rng,device_rng_compile")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    device = torch.device(a.device)
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    print(f"bench_step: torch {torch.__version__}, {name}, batch frames {a.batch_frames}, "
          f"{a.steps} timed steps after {a.warmup}", flush=True)
    print(f"{'variant':<20} {'median ms':>10} {'mean ms':>10} {'audio s/s':>10} {'GPU busy':>9}")
    for v in a.variants.split(","):
        if v not in ("baseline", "device_rng", "device_rng_compile"):
            sys.exit(f"bench_step: unknown variant {v}")
        t0 = time.time()
        r = run(v, device, a.steps, a.warmup, a.batch_frames, a.profile_steps, a.seed)
        busy = f"{100 * r['gpu_busy']:.0f} %" if r["gpu_busy"] is not None else "-"
        print(f"{v:<20} {r['median_ms']:>10.1f} {r['mean_ms']:>10.1f} "
              f"{r['audio_s_per_s']:>10.0f} {busy:>9}   ({time.time() - t0:.0f} s in all)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
