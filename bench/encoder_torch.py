"""PyTorch side of oasr-bench-encoder.

  encoder_torch.py write-model DIR   random 12 x 256 x 2048, V = 5002 model
  encoder_torch.py time DIR SECONDS CHUNK THREADS
                                     single-stream streaming RTF of the
                                     reference on the same model (prints
                                     "rtf <value>")

Run with /usr/bin/python3 from the repository root.
"""

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.reference import model_dir  # noqa: E402
from tools.reference.model import ConformerCtcModel, ModelConfig, randomize_  # noqa: E402

BENCH_CONFIG = ModelConfig(output_dim=5002, output_size=256, attention_heads=4,
                           linear_units=2048, num_blocks=12, cnn_module_kernel=15)


def write_model(out):
    model = randomize_(ConformerCtcModel(BENCH_CONFIG), seed=2024)
    model_dir.write_model_dir(model, out, dtype="float32", chunk_size=16, num_left_chunks=-1)


def time_model(path, seconds, chunk, threads):
    torch.set_num_threads(threads)
    model = model_dir.load_model_dir(path)
    frames = int(seconds * 100) - 2
    feats = torch.randn(1, frames, 80, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        model.log_probs_streaming(feats[:, :200], chunk)  # warm-up
        start = time.perf_counter()
        model.log_probs_streaming(feats, chunk)
        elapsed = time.perf_counter() - start
    print(f"rtf {elapsed / seconds:.5f}")


def main():
    if sys.argv[1] == "write-model":
        write_model(sys.argv[2])
    elif sys.argv[1] == "time":
        time_model(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
