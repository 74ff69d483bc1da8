"""Compares the C++ engine's CTC log-probs with the PyTorch reference's on
WAV files: oasr-transcribe --npy (the encoder's dense streaming path, chunk
by chunk, the engine's windows and history) against the reference's
forward_chunk_by_chunk with the same chunk size and left context, both from
the model directory's weights read into float32 and both from the WAV
through their own front end (C++ fbank vs torchaudio's Kaldi fbank), the
WAV followed by the engine's tail padding.

    /usr/bin/python3 -m tools.train.check_cpp_logprobs \\
        --transcribe build/scheduler/oasr-transcribe --model models/en-conformer-ctc \\
        --tolerance 1e-3 samples/01_espeak_en-us.wav

Prints, per file and left context, the largest |difference| over all frames
and units and the share of frames whose best unit agrees; exits 1 when a
difference is above --tolerance or the frame counts differ.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from tools.reference import frontend, model_dir
from tools.train.synth import read_wav


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--transcribe", required=True, help="oasr-transcribe binary")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--left", default="-1,4", help="num_left_chunks values to compare")
    p.add_argument("--tolerance", type=float, default=1e-3, help="largest |log-prob difference|")
    p.add_argument("wavs", nargs="+")
    a = p.parse_args(argv)
    torch.set_num_threads(2)
    model = model_dir.load_model_dir(a.model)
    with open(os.path.join(a.model, "config.json"), encoding="utf-8") as f:
        chunk = json.load(f)["serving"]["chunk_size"]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for left in (int(v) for v in a.left.split(",")):
            npy_dir = os.path.join(tmp, f"left{left}")
            subprocess.run([a.transcribe, "--model-dir", a.model, "--greedy", "--num-left-chunks",
                            str(left), "--npy", npy_dir] + a.wavs, check=True,
                           stdout=subprocess.DEVNULL)
            for wav in a.wavs:
                stem = os.path.splitext(os.path.basename(wav))[0]
                got = torch.from_numpy(np.load(os.path.join(npy_dir, stem + ".npy")))
                x, rate = read_wav(wav)
                # The engine's end of stream: its tail padding of zeros.
                pad = frontend.tail_padding_samples(model.encoder.right_context)
                x = torch.cat([torch.as_tensor(x, dtype=torch.float32), torch.zeros(pad)])
                with torch.no_grad():
                    want = model.log_probs_streaming(frontend.fbank(x, rate).unsqueeze(0),
                                                     chunk, left)[0]
                if got.shape != want.shape:
                    print(f"{wav} left {left}: C++ {tuple(got.shape)} vs reference "
                          f"{tuple(want.shape)}")
                    ok = False
                    continue
                diff = float((got - want).abs().max())
                agree = float((got.argmax(-1) == want.argmax(-1)).float().mean())
                print(f"{wav} left {left}: {got.shape[0]} frames x {got.shape[1]} units, "
                      f"max |diff| {diff:.3g} (tolerance {a.tolerance:g}), "
                      f"best unit agrees on {100 * agree:.1f}% of frames")
                ok = ok and diff <= a.tolerance
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
