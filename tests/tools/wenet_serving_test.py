"""A WeNet model as its users have it, converted and served end to end.

For each of the converter's three inputs (a v2 recipe experiment, a v3
experiment, a TorchScript runtime model; random weights, written by
tools/reference/wenet_layout.py) the test converts it with
tools/convert_wenet.py and then
  1. runs the C++ engine (oasr-transcribe --npy, greedy, two left contexts)
     on a WAV and compares its CTC log-probs with the ORIGINAL WeNet-layout
     model's chunk-by-chunk forward (not with the converted files read back),
     so the whole path checkpoint -> converter -> C++ loader -> engine is
     checked against the model the user started from;
  2. serves the converted directory with oasr-server (CPU, 127.0.0.1, ports
     the server picks), streams the WAV through oasr-client, and checks that
     the finals were rescored by the attention decoder the conversion kept
     (/metrics: oasr_segments_rescored_total grows, none not rescored) and
     that they equal oasr-transcribe's rescored transcript of the same file.

    wenet_serving_test.py OASR_TRANSCRIBE OASR_SERVER OASR_CLIENT SOURCE_DIR WORK_DIR
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest
import urllib.request

import numpy as np
import torch

ARGS = sys.argv[1:6]
TRANSCRIBE, SERVER, CLIENT, SOURCE_DIR, WORK_DIR = ARGS if len(ARGS) == 5 else [""] * 5
sys.path.insert(0, SOURCE_DIR)
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "server"))

import bundled_server  # noqa: E402
from tools import convert_wenet  # noqa: E402
from tools.reference import frontend, wenet_layout  # noqa: E402
from tools.reference.test_convert_wenet import make_models  # noqa: E402
from tools.train.synth import read_wav  # noqa: E402

WAV = os.path.join(SOURCE_DIR, "samples", "01_espeak_en-us.wav")


def metric(text, name):
    m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else None


class WenetServingTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)

    def convert(self, name, args):
        out = os.path.join(WORK_DIR, name, "oasr")
        shutil.rmtree(out, ignore_errors=True)
        rc = convert_wenet.main(args + ["--output", out])
        self.assertEqual(rc, 0, name)
        return out

    def check_log_probs(self, name, model, out):
        with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
            chunk = json.load(f)["serving"]["chunk_size"]
        x, rate = read_wav(WAV)
        pad = frontend.tail_padding_samples(model.encoder.right_context)
        x = torch.cat([torch.as_tensor(x, dtype=torch.float32), torch.zeros(pad)])
        feats = frontend.fbank(x, rate).unsqueeze(0)
        for left in (-1, 2):
            npy = os.path.join(WORK_DIR, name, f"npy{left}")
            subprocess.run([TRANSCRIBE, "--model-dir", out, "--device", "cpu", "--greedy",
                            "--num-left-chunks", str(left), "--npy", npy, WAV], check=True,
                           stdout=subprocess.DEVNULL)
            got = torch.from_numpy(np.load(os.path.join(npy, "01_espeak_en-us.npy")))
            with torch.no_grad():
                want = model.log_probs_streaming(feats, chunk, left)[0]
            self.assertEqual(got.shape, want.shape, (name, left))
            diff = float((got - want).abs().max())
            self.assertLess(diff, 1e-3, (name, left))

    def check_served_and_rescored(self, name, out):
        want = subprocess.run([TRANSCRIBE, "--model-dir", out, "--device", "cpu", WAV],
                              check=True, capture_output=True, text=True).stdout
        want = want.strip().split("\t", 1)[1].split() if "\t" in want else []
        work = os.path.join(WORK_DIR, name, "server")
        os.makedirs(work, exist_ok=True)
        proc, port = bundled_server.start(SERVER, SOURCE_DIR, work, model_dir=out)
        try:
            with open(os.path.join(work, "ports.json"), encoding="utf-8") as f:
                metrics_port = json.load(f)["metrics_port"]
            lines = subprocess.run(
                [CLIENT, "--server", f"127.0.0.1:{port}", "stream", "--json", "--fast",
                 "--no-interim", WAV], check=True, capture_output=True, text=True,
                timeout=120).stdout.splitlines()
            finals = []
            for line in lines:
                for result in json.loads(line).get("results", []):
                    if result.get("is_final") or result.get("isFinal"):
                        finals += result["alternatives"][0].get("transcript", "").split()
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            text = urllib.request.urlopen(url, timeout=10).read().decode()
        finally:
            bundled_server.stop(proc)
        self.assertGreaterEqual(metric(text, "oasr_segments_rescored_total") or 0, 1, name)
        self.assertEqual(metric(text, "oasr_segments_not_rescored_total") or 0, 0, name)
        self.assertEqual(finals, want, name)
        self.assertTrue(want, f"{name}: the random model said nothing; pick another seed")

    def check_case(self, name, models, write, convert_args):
        """Writes a WeNet input with `write(src, model, decoder, dcfg, stats)`
        (returning what the converter reads), converts it with
        `convert_args(that)` and checks the result both ways."""
        src = os.path.join(WORK_DIR, name, "wenet")
        shutil.rmtree(src, ignore_errors=True)
        model, decoder, dcfg, stats = make_models(*models)
        out = self.convert(name, convert_args(write(src, model, decoder, dcfg, stats)))
        self.check_log_probs(name, model, out)
        self.check_served_and_rescored(name, out)

    def test_v2_recipe_checkpoint(self):
        self.check_case(
            "v2", ("layer_norm", "conv2d", "bitransformer"),
            lambda src, m, d, c, st: wenet_layout.write_experiment(
                m, d, c, src, st, layout="v2", module_prefix=True),
            lambda yaml_path: ["--checkpoint",
                               os.path.join(os.path.dirname(yaml_path), "final.pt")])

    def test_v3_checkpoint(self):
        self.check_case(
            "v3", ("batch_norm", "conv2d6", "transformer"),
            lambda src, m, d, c, st: wenet_layout.write_experiment(
                m, d, c, src, st, layout="v3", sos=2, tokenizer="bpe", cmvn_kaldi=True),
            lambda yaml_path: ["--checkpoint",
                               os.path.join(os.path.dirname(yaml_path), "final.pt"),
                               "--config", yaml_path])

    def test_torchscript_runtime_model(self):
        self.check_case(
            "jit", ("layer_norm", "conv2d8", "bitransformer"),
            lambda src, m, d, c, st: wenet_layout.write_runtime(m, d, src, reverse_weight=0.3),
            lambda zip_path: ["--torchscript", zip_path])

if __name__ == "__main__":
    if len(ARGS) != 5:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    os.makedirs(WORK_DIR, exist_ok=True)
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[6:])
