"""End-to-end test of the training pipeline at a tiny scale (CPU, ~2 min):
runs tools/train/smoke_test.sh (run_gpu.sh: unpack or system synthesizers,
tokenizer, synthesis, training, export, evaluation) and checks what it hands
back: the file limits of the GPU machine's output folder, the split model
reassembled, loaded by the reference and decoding a held-out utterance; that
training ran on waveforms with online augmentation, that synth.py
--train-only adds a shard and nothing else, and that training resumes over
the larger data.

Needs espeak-ng, flite, festival, festvox-kallpc16k and python3-sentencepiece
(or the .debs of tools/train/fetch_debs.sh in <repo>/.devdebs)."""

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import unittest

import torch

from tools.reference import frontend, model_dir
from tools.train import checkpoint
from tools.train.evaluate import decode_units, load_units
from tools.train.synth import read_wav

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1024 * 1024


class SmokeTest(unittest.TestCase):
    def test_tiny_pipeline(self):
        has_debs = os.path.isdir(os.path.join(REPO, ".devdebs"))
        missing = [p for p in ("espeak-ng", "flite", "festival") if shutil.which(p) is None]
        if missing and not has_debs:
            self.fail(f"synthesizers missing: {missing} (install them, or run fetch_debs.sh)")
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([os.path.join(REPO, "tools/train/smoke_test.sh"), d],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:])
            out = os.path.join(d, "out")
            files = sorted(os.listdir(out))
            # The GPU machine hands back at most 8 files of at most 16 MiB.
            self.assertLessEqual(len(files), 8, files)
            for f in files:
                self.assertLessEqual(os.path.getsize(os.path.join(out, f)), 16 * MIB, f)
            parts = [f for f in files if f.startswith("model.safetensors.part")]
            self.assertGreaterEqual(len(parts), 2, files)  # smoke splits at 50 KiB

            model = os.path.join(d, "model")
            os.makedirs(model)
            with tarfile.open(os.path.join(out, "model_meta.tar")) as t:
                t.extractall(model)
            for f in parts:
                shutil.copy(os.path.join(out, f), model)
            checkpoint.main(["join", os.path.join(model, "model.safetensors")]
                            + [os.path.join(model, f) for f in parts])
            for f in parts:
                os.remove(os.path.join(model, f))
            m = model_dir.load_model_dir(model)
            units = load_units(os.path.join(model, "units.txt"))
            self.assertEqual(units[0], "<blank>")
            self.assertEqual(units[-1], "<sos/eos>")
            self.assertEqual(m.cfg.output_dim, len(units))
            with open(os.path.join(model, "config.json"), encoding="utf-8") as f:
                conf = json.load(f)
            self.assertTrue(conf["encoder_conf"]["use_dynamic_chunk"])
            self.assertEqual(conf["serving"]["chunk_size"], 16)

            with open(os.path.join(model, "eval.json"), encoding="utf-8") as f:
                report = json.load(f)
            self.assertEqual(report["voices"]["espeak:en-029"]["group"], "heldout")
            self.assertEqual(report["voices"]["espeak:en-us"]["group"], "trained")
            self.assertLess(report["streaming_vs_masked_max_abs_diff"], 1e-4)
            with open(os.path.join(model, "synth_summary.json"), encoding="utf-8") as f:
                synth = json.load(f)
            self.assertNotIn("espeak:en-029", synth["train_voices"])
            # The default data flow: clean waveforms, augmented afresh at every step.
            self.assertEqual(synth["store"], "wav")
            with open(os.path.join(model, "train_summary.json"), encoding="utf-8") as f:
                summary = json.load(f)
            self.assertEqual((summary["data"], summary["online_augment"]), ("wavs", True))
            self.assertEqual(summary["steps"], 30)
            # The background synthesis ran beside training and found the
            # plan done (unless training ended before it had started).
            with open(os.path.join(out, "run.log"), encoding="utf-8") as f:
                log = f.read()
            self.assertIn("run_gpu: background synthesis with 1 workers", log)
            self.assertIn("run_gpu: background synthesis ended (exit status ", log)
            for line in log.splitlines():
                if line.startswith("synth-bg: synth: {"):
                    self.assertEqual(json.loads(line.split(" ", 2)[2])["new_shards"], 0)

            # synth.py --train-only continues the plan: one shard more, and
            # the evaluation set and synth_summary.json stay as they were.
            work = os.path.join(d, "work")
            data = os.path.join(work, "data")
            before = {p: os.path.getmtime(p) for p in self.files(os.path.join(data, "eval"))
                      + [os.path.join(data, "synth_summary.json")]}
            py = os.environ.get("PYTHON", "/usr/bin/python3")
            r = subprocess.run([py, "-m", "tools.train.synth", "--train-only", "--corpus",
                                "tools/train/corpus", "--out", data, "--max-train", "225",
                                "--workers", "1"], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:])
            self.assertEqual(sorted(os.listdir(os.path.join(data, "train"))),
                             [f"shard{j:05d}.pt" for j in range(9)])
            self.assertEqual(before, {p: os.path.getmtime(p) for p in before})
            with open(os.path.join(data, "synth_added.jsonl"), encoding="utf-8") as f:
                added = [json.loads(l) for l in f]
            self.assertEqual((added[-1]["new_shards"], added[-1]["stopped"]), (1, "plan done"))
            self.assertEqual(added[-1]["train_voices"], synth["train_voices"])

            # Training resumes from its checkpoint (and the augmentation's
            # streams), over the data there is now.
            args = ["--num-blocks", "2", "--output-size", "32", "--linear-units", "64",
                    "--batch-frames", "2000", "--device", "cpu", "--threads", "1",
                    "--warmup-steps", "10", "--log-every", "1", "--ckpt-minutes", "100"]
            cmd = [py, "-m", "tools.train.train",
                   "--data", os.path.join(work, "data"), "--tokenizer", os.path.join(work, "tok"),
                   "--work", os.path.join(work, "train"), "--max-steps", "33"]
            r = subprocess.run(cmd + args, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:])
            self.assertIn("resumed from", r.stdout)
            self.assertIn("step 33 ", r.stdout)
            with open(os.path.join(d, "work/train/train_summary.json"), encoding="utf-8") as f:
                resumed = json.load(f)
            self.assertEqual(resumed["steps"], 33)
            self.assertGreater(resumed["utterances"], summary["utterances"])

            # The exported directory decodes a held-out WAV by streaming.
            with open(os.path.join(d, "work/data/eval/eval.jsonl"), encoding="utf-8") as f:
                rows = [json.loads(l) for l in f]
            x, rate = read_wav(os.path.join(d, "work/data/eval", rows[0]["wav"]))
            self.assertEqual(rate, 16000)
            with torch.no_grad():
                lp = m.log_probs_streaming(frontend.fbank(x).unsqueeze(0), 16, 4)[0]
            self.assertTrue(bool(torch.isfinite(lp).all()))
            decode_units(lp.argmax(-1).tolist(), units)  # any text; the model is tiny


    @staticmethod
    def files(folder):
        return [os.path.join(root, f) for root, _, names in os.walk(folder) for f in names]


if __name__ == "__main__":
    unittest.main()
