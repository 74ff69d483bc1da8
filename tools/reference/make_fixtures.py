"""Writes golden fixtures for the C++ tests.

  /usr/bin/python3 -m tools.reference.make_fixtures --out DIR [--only NAMES]

For every encoder case: DIR/<case>/model (a model directory of a randomly
initialised model), feats.npy (raw fbank, float32 [T, 80]) and one
log-prob file per (chunk size, left chunks) run, listed in DIR/manifest.json.
Also DIR/fbank: speech (espeak-ng when installed, else a synthetic signal),
its 16 kHz float samples and torchaudio's Kaldi fbank of them.
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import torch
import torchaudio

from . import frontend, model_dir
from .model import ConformerCtcModel, ModelConfig, randomize_

RUNS = [(4, -1), (8, -1), (16, -1), (4, 2), (8, 2), (16, 2)]

# name: (config, on-disk dtype, seconds of audio, runs, start offset)
CASES = {
    "small_ln": (ModelConfig(output_dim=53, output_size=96, attention_heads=4, linear_units=192,
                             num_blocks=3, cnn_module_kernel=15), "float32", 6.0, RUNS, 0),
    "small_bn": (ModelConfig(output_dim=37, output_size=64, attention_heads=2, linear_units=160,
                             num_blocks=2, cnn_module_kernel=8, cnn_module_norm="batch_norm"),
                 "float16", 6.0, RUNS, 0),
    "conformer_12x256": (ModelConfig(output_dim=300, output_size=256, attention_heads=4,
                                     linear_units=2048, num_blocks=12, cnn_module_kernel=15),
                         "bfloat16", 5.0, RUNS, 0),
    "conformer_12x256_bn": (ModelConfig(output_dim=211, output_size=256, attention_heads=4,
                                        linear_units=1024, num_blocks=12, cnn_module_kernel=15,
                                        cnn_module_norm="batch_norm"),
                            "float32", 3.0, [(8, -1), (16, 2)], 0),
    "sub6": (ModelConfig(output_dim=29, output_size=64, attention_heads=4, linear_units=128,
                         num_blocks=2, cnn_module_kernel=8, input_layer="conv2d6",
                         cnn_module_norm="batch_norm"), "float32", 4.0, [(8, -1), (4, 2)], 0),
    "sub8": (ModelConfig(output_dim=29, output_size=64, attention_heads=2, linear_units=128,
                         num_blocks=2, cnn_module_kernel=15, input_layer="conv2d8"),
             "float32", 4.0, [(8, -1), (4, 2)], 0),
    # A stream that crosses WeNet's 5000-row position table.
    "late_offset": (ModelConfig(output_dim=31, output_size=64, attention_heads=4,
                                linear_units=128, num_blocks=2, cnn_module_kernel=15),
                    "float32", 4.0, [(16, -1), (8, 2)], 5070),
}


def speech(seconds: float, seed: int):
    """(16 kHz float samples, source description)."""
    if shutil.which("espeak-ng"):
        text = ("the quick brown fox jumps over the lazy dog while seven streams "
                "of speech arrive at the server one chunk at a time")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.wav")
            subprocess.run(["espeak-ng", "-s", "150", "-w", path, text], check=True)
            wav, rate = torchaudio.load(path)
        wav = torchaudio.functional.resample(wav[0], rate, frontend.SAMPLE_RATE)
        n = int(seconds * frontend.SAMPLE_RATE)
        if wav.numel() < n:
            wav = torch.cat([wav, frontend.synthetic_speech(seconds, seed)[: n - wav.numel()]])
        return wav[:n].contiguous(), "espeak-ng"
    return frontend.synthetic_speech(seconds, seed), "synthetic"


def write_case(out: str, name: str, seed: int) -> dict:
    cfg, dtype, seconds, runs, start_offset = CASES[name]
    case_dir = os.path.join(out, name)
    os.makedirs(case_dir, exist_ok=True)
    wav, _ = speech(seconds, seed)
    feats = frontend.fbank(wav)
    torch.manual_seed(seed)
    model = randomize_(ConformerCtcModel(cfg), seed)
    mean, istd = frontend.cmvn_from_stats(frontend.cmvn_stats(feats))
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    mdir = os.path.join(case_dir, "model")
    model_dir.write_model_dir(model, mdir, dtype=dtype, chunk_size=runs[0][0],
                              num_left_chunks=runs[0][1], cmvn_as_json=(name == "small_bn"))
    model = model_dir.load_model_dir(mdir)
    np.save(os.path.join(case_dir, "feats.npy"), feats.numpy().astype(np.float32))
    entry = {"name": name, "model_dir": mdir, "feats": os.path.join(case_dir, "feats.npy"),
             "runs": []}
    with torch.no_grad():
        for chunk, left in runs:
            if start_offset == 0:
                lp = model.log_probs_full(feats.unsqueeze(0), chunk, left)[0]
            else:
                lp = model.log_probs_streaming(feats.unsqueeze(0), chunk, left, start_offset)[0]
            path = os.path.join(case_dir, f"log_probs_c{chunk}_l{left}.npy")
            np.save(path, lp.numpy().astype(np.float32))
            entry["runs"].append({"chunk_size": chunk, "num_left_chunks": left,
                                  "start_offset": start_offset, "log_probs": path})
    return entry


def write_converted_case(out: str, seed: int) -> dict:
    """A model written as a WeNet experiment (final.pt with a "module."
    prefix, train.yaml, global_cmvn, units.txt) and converted by
    tools/convert_wenet.py; log-probs come from the original model."""
    from tools import convert_wenet

    cfg = ModelConfig(output_dim=41, output_size=64, attention_heads=4, linear_units=128,
                      num_blocks=2, cnn_module_kernel=15, cnn_module_norm="batch_norm")
    case_dir = os.path.join(out, "wenet_converted")
    src = os.path.join(case_dir, "wenet")
    wav, _ = speech(3.0, seed)
    feats = frontend.fbank(wav)
    model = randomize_(ConformerCtcModel(cfg), seed)
    stats = frontend.cmvn_stats(feats)
    mean, istd = frontend.cmvn_from_stats(stats)
    model.encoder.global_cmvn.mean.copy_(mean)
    model.encoder.global_cmvn.istd.copy_(istd)
    model_dir.write_wenet_checkpoint(model, src, stats, module_prefix=True)
    mdir = os.path.join(case_dir, "model")
    convert_wenet.convert(os.path.join(src, "final.pt"), os.path.join(src, "train.yaml"),
                          os.path.join(src, "global_cmvn"), os.path.join(src, "units.txt"),
                          mdir, chunk_size=8, num_left_chunks=-1)
    np.save(os.path.join(case_dir, "feats.npy"), feats.numpy().astype(np.float32))
    entry = {"name": "wenet_converted", "model_dir": mdir,
             "feats": os.path.join(case_dir, "feats.npy"), "runs": []}
    with torch.no_grad():
        for chunk, left in ((8, -1), (4, 2)):
            lp = model.log_probs_full(feats.unsqueeze(0), chunk, left)[0]
            path = os.path.join(case_dir, f"log_probs_c{chunk}_l{left}.npy")
            np.save(path, lp.numpy().astype(np.float32))
            entry["runs"].append({"chunk_size": chunk, "num_left_chunks": left,
                                  "start_offset": 0, "log_probs": path})
    return entry


def write_fbank(out: str) -> dict:
    fdir = os.path.join(out, "fbank")
    os.makedirs(fdir, exist_ok=True)
    wav, source = speech(3.0, 7)
    np.save(os.path.join(fdir, "wave.npy"), wav.numpy().astype(np.float32))
    np.save(os.path.join(fdir, "fbank.npy"), frontend.fbank(wav).numpy().astype(np.float32))
    return {"wave": os.path.join(fdir, "wave.npy"), "fbank": os.path.join(fdir, "fbank.npy"),
            "source": source}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*", default=None, help="case names (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    names = args.only or list(CASES) + ["wenet_converted"]
    manifest = {"fbank": write_fbank(args.out), "cases": []}
    for i, name in enumerate(names):
        if name == "wenet_converted":
            manifest["cases"].append(write_converted_case(args.out, 1000 + i))
        else:
            manifest["cases"].append(write_case(args.out, name, 1000 + i))
    tmp = os.path.join(args.out, "manifest.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
    os.replace(tmp, os.path.join(args.out, "manifest.json"))


if __name__ == "__main__":
    main()
