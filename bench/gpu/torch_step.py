"""PyTorch rows for oasr-bench-step: the project's reference Conformer
(tools/reference/model.py) run as a PyTorch user would serve it, one batched
chunk step for B streams with dense caches (`--history` frames of attention
history plus one chunk), at one offset; eager under bfloat16 autocast and
torch.compile(mode="reduce-overhead"). Prints the same columns as
oasr-bench-step, so both rows come from one device call.

usage (repository root, a machine with a GPU and torch):
  python3 bench/gpu/torch_step.py --model-dir DIR [--batches 64,512] [--modes eager,compile]
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tools.reference import model_dir  # noqa: E402
from tools.reference.model import position_table  # noqa: E402


class ChunkStep(torch.nn.Module):
    """One chunk for B streams: subsampling, every layer over its dense cache,
    the CTC head. The caches are inputs; the step returns the new ones."""

    def __init__(self, model, history):
        super().__init__()
        self.model = model
        self.history = history

    def forward(self, feats, att_caches, cnn_caches, pos):
        enc = self.model.encoder
        x = enc._embed(feats)
        new_att, new_cnn = [], []
        for layer, att, cnn in zip(enc.encoders, att_caches, cnn_caches):
            x, a, k = layer(x, pos, None, att, cnn)
            new_att.append(a[:, :, -self.history:, :])
            new_cnn.append(k)
        return self.model.ctc(enc.after_norm(x)), new_att, new_cnn


def median_ms(fn, reps, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--batches", default="1,64,512,2048,8192")
    ap.add_argument("--history", type=int, default=64)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device("cuda")
    model = model_dir.load_model_dir(args.model_dir).to(dev).eval()
    cfg = model.cfg
    d, heads, chunk = cfg.output_size, cfg.attention_heads, 16
    dk = d // heads
    rate = model.encoder.rate
    window = (chunk - 1) * rate + model.encoder.right_context + 1
    chunk_s = chunk * rate * 0.01
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}: {cfg.num_blocks} x {d}, "
          f"FFN {cfg.linear_units}, V {cfg.output_dim}; chunk {chunk}, history {args.history}", flush=True)
    for mode in args.modes.split(","):
        step = ChunkStep(model, args.history)
        if mode == "compile":
            step = torch.compile(step, mode="reduce-overhead", dynamic=False)
        pos = position_table(1000 - args.history, args.history + chunk, d).to(dev)
        for b in [int(x) for x in args.batches.split(",")]:
            try:
                feats = torch.randn(b, window, cfg.input_dim, device=dev)
                att = [torch.randn(b, heads, args.history, 2 * dk, device=dev) for _ in range(cfg.num_blocks)]
                cnn = [torch.randn(b, d, cfg.cnn_module_kernel - 1, device=dev) for _ in range(cfg.num_blocks)]
                with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
                    started = time.time()
                    ms = median_ms(lambda: step(feats, att, cnn, pos), args.reps)
                streams = b * chunk_s / (ms / 1000)
                print(f"torch {mode:7s} bf16 B={b:6d} step {ms:10.3f} ms  real-time streams {streams:10.0f}  "
                      f"frames/s {b * chunk / (ms / 1000):12.0f}  ({time.time() - started:.0f} s)", flush=True)
                del feats, att, cnn
                torch.cuda.empty_cache()
            except torch.cuda.OutOfMemoryError:
                print(f"torch {mode} B={b}: out of memory", flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
