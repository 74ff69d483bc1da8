"""GPU parity of the CUDA encoder (issue: CUDA float32 within 1e-4 of the
CPU engine; bfloat16 at most twice the error of the PyTorch reference run in
bfloat16 on the same GPU, both against float64).

  parity.py prepare MODEL_DIR OUT [--wav FILE] [--seconds S] [--left N]
      writes OUT/feats.npy (raw fbank), OUT/ref64.npy (the reference in
      float64), OUT/torch_bf16.npy (bfloat16 autocast on the GPU) and
      OUT/torch_f32.npy (float32 on the GPU): the streaming forward chunk by
      chunk (chunk 16, N left chunks).
  parity.py compare OUT
      reads those and OUT/oasr_<device>_<dtype>.npy (oasr-encode's outputs)
      and prints each one's max |delta log-prob| against float64; exits 1
      when a rule fails.
"""

import argparse
import glob
import os
import sys
import wave

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tools.reference import frontend, model_dir  # noqa: E402


def prepare(args):
    os.makedirs(args.out, exist_ok=True)
    model = model_dir.load_model_dir(args.model_dir).eval()
    if args.wav:
        with wave.open(args.wav, "rb") as w:
            rate = w.getframerate()
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        feats = frontend.fbank(torch.from_numpy(pcm.astype(np.float32) / 32768.0), rate)
    else:
        feats = frontend.fbank(frontend.synthetic_speech(args.seconds, seed=3))
    np.save(os.path.join(args.out, "feats.npy"), feats.numpy().astype(np.float32))
    x = feats.unsqueeze(0)
    with torch.inference_mode():
        ref = model.double().log_probs_streaming(x.double(), 16, args.left)[0]
        np.save(os.path.join(args.out, "ref64.npy"), ref.numpy())
        gpu = model.float().cuda()
        f32 = gpu.log_probs_streaming(x.cuda(), 16, args.left)[0].float().cpu()
        np.save(os.path.join(args.out, "torch_f32.npy"), f32.numpy())
        with torch.autocast("cuda", dtype=torch.bfloat16):
            bf16 = gpu.log_probs_streaming(x.cuda(), 16, args.left)[0].float().cpu()
        np.save(os.path.join(args.out, "torch_bf16.npy"), bf16.numpy())
    print(f"prepared {feats.shape[0]} frames -> {ref.shape[0]} CTC frames in {args.out}")


def compare(args):
    ref = np.load(os.path.join(args.out, "ref64.npy"))
    errs = {}
    for path in sorted(glob.glob(os.path.join(args.out, "*.npy"))):
        name = os.path.basename(path)[:-4]
        if name in ("feats", "ref64"):
            continue
        got = np.load(path).astype(np.float64)
        if got.shape != ref.shape:
            print(f"{name}: shape {got.shape}, reference {ref.shape}")
            errs[name] = float("inf")
            continue
        errs[name] = float(np.max(np.abs(got - ref)))
        print(f"{name:24s} max |delta log-prob| vs float64: {errs[name]:.3e}")
    ok = True
    if "oasr_cuda_float32" in errs and "oasr_cpu_float32" in errs:
        cpu = np.load(os.path.join(args.out, "oasr_cpu_float32.npy"))
        cuda = np.load(os.path.join(args.out, "oasr_cuda_float32.npy"))
        delta = float(np.max(np.abs(cpu.astype(np.float64) - cuda)))
        rule = delta <= 1e-4
        ok &= rule
        print(f"CUDA float32 vs CPU engine: {delta:.3e} (rule <= 1e-4: {'pass' if rule else 'FAIL'})")
    for ours in ("oasr_cuda_bfloat16", "oasr_cuda_float16"):
        if ours in errs and "torch_bf16" in errs:
            rule = errs[ours] <= 2 * errs["torch_bf16"]
            if ours.endswith("bfloat16"):
                ok &= rule
            print(f"{ours} {errs[ours]:.3e} vs 2 x torch bf16 {2 * errs['torch_bf16']:.3e}: "
                  f"{'pass' if rule else 'FAIL'}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("model_dir")
    p.add_argument("out")
    p.add_argument("--wav")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--left", type=int, default=4)
    c = sub.add_parser("compare")
    c.add_argument("out")
    args = ap.parse_args()
    if args.cmd == "prepare":
        prepare(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
