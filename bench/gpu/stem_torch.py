"""cuDNN's row for oasr-bench-stem: the same conv2d subsampling stem (two
3 x 3 stride-2 convolutions with bias and ReLU, 1 -> C -> C channels over a
[67 x 80] chunk window) for B images through torch.nn.functional.conv2d in
bfloat16, channels-last, with cudnn.benchmark on so that cuDNN times its
algorithms (implicit GEMM among them) and keeps the fastest for each shape;
also under torch.compile. Prints the same columns as oasr-bench-stem.

usage (a machine with a GPU and torch):
  python3 bench/gpu/stem_torch.py [--batches 64,512,2048,8192] [--channels 256]
"""

import argparse

import torch
import torch.nn.functional as F

from torch_step import median_ms  # noqa: E402  (bench/gpu, the script's folder)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="64,512,2048,8192")
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--modes", default="cudnn,compile")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    dev, dt, c = "cuda", torch.bfloat16, args.channels
    h, w = 67, 80
    h1, w1 = (h - 3) // 2 + 1, (w - 3) // 2 + 1
    h2, w2 = (h1 - 3) // 2 + 1, (w1 - 3) // 2 + 1
    flops = 2.0 * h1 * w1 * c * 9 + 2.0 * h2 * w2 * c * 9 * c
    print(f"stem_torch: [{h} x {w}] -> [{h1} x {w1} x {c}] -> [{h2} x {w2} x {c}]; "
          f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}; {flops / 1e6:.1f} MFLOP per image")
    print(f"{'B':>8} {'stem':>8} {'ms':>12} {'TFLOP/s':>10}")
    g = torch.Generator(device=dev).manual_seed(3)
    w1t = (torch.randn(c, 1, 3, 3, device=dev, generator=g) * 0.3).to(dt)
    b1 = (torch.randn(c, device=dev, generator=g) * 0.1).to(dt)
    w2t = (torch.randn(c, c, 3, 3, device=dev, generator=g) * 0.02).to(dt)
    w2t = w2t.contiguous(memory_format=torch.channels_last)
    b2 = (torch.randn(c, device=dev, generator=g) * 0.1).to(dt)

    def stem(x):
        y = F.relu(F.conv2d(x, w1t, b1, stride=2))
        return F.relu(F.conv2d(y, w2t, b2, stride=2))

    compiled = torch.compile(stem)
    for part in args.batches.split(","):
        b = int(part)
        x = torch.randn(b, 1, h, w, device=dev, generator=g).to(dt)
        x = x.contiguous(memory_format=torch.channels_last)
        for mode in args.modes.split(","):
            fn = stem if mode == "cudnn" else compiled
            with torch.no_grad():
                ms = median_ms(lambda: fn(x), args.reps)
            print(f"{b:>8} {mode:>8} {ms:>12.3f} {b * flops / (ms * 1e9):>10.1f}", flush=True)


if __name__ == "__main__":
    main()
