"""eval_cpp.py against a stand-in oasr-transcribe (a script that answers
from the references with known errors): the flags each configuration
passes, WER per voice and per group, text normalisation, the markdown
table, and a file that fails counting as all words deleted."""

import json
import os
import stat
import tempfile
import unittest

import torch

from tools.train import eval_cpp
from tools.train.synth import write_wav

# Answers every file with its reference (from refs.json beside the script),
# drops the last word under beam search, and fails espeak_en-029's file
# with 4 chunks of left context, as oasr-transcribe reports a failure.
FAKE = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
refs = json.load(open(os.path.join(os.path.dirname(sys.argv[0]), "refs.json")))
left = args[args.index("--num-left-chunks") + 1]
beam = "--beam" in args
assert ("--greedy" in args) != beam and args[args.index("--threads") + 1] == "2"
rc = 0
for path in [a for a in args if a.endswith(".wav")]:
    if "029" in path and left == "4":
        print(path + ": INTERNAL: failed", file=sys.stderr)
        rc = 1
        continue
    words = refs[os.path.basename(path)].split()
    print(path + "\\t" + " ".join(words[:-1] if beam else words).upper().replace("'", "\\u2019"))
sys.exit(rc)
"""


class EvalCppTest(unittest.TestCase):
    def test_report(self):
        with tempfile.TemporaryDirectory() as d:
            model, data = os.path.join(d, "model"), os.path.join(d, "data")
            os.makedirs(model)
            with open(os.path.join(model, "config.json"), "w", encoding="utf-8") as f:
                json.dump({"encoder_conf": {"input_layer": "conv2d"},
                           "serving": {"chunk_size": 16}}, f)
            with open(os.path.join(model, "synth_summary.json"), "w", encoding="utf-8") as f:
                json.dump({"heldout_voices": ["espeak:en-029"]}, f)
            rows = [("espeak:en-us", "a b c d"), ("espeak:en-us", "don't e"),
                    ("espeak:en-029", "f g h i j")]
            refs = {}
            os.makedirs(os.path.join(data, "v"))
            with open(os.path.join(data, "eval.jsonl"), "w", encoding="utf-8") as f:
                for i, (voice, text) in enumerate(rows):
                    wav = f"v/{voice.replace(':', '_')}-{i}.wav"
                    write_wav(os.path.join(data, wav), torch.zeros(1600))
                    refs[os.path.basename(wav)] = text
                    f.write(json.dumps({"id": str(i), "voice": voice, "wav": wav, "text": text}) + "\n")
            fake = os.path.join(d, "oasr-transcribe")
            with open(fake, "w", encoding="utf-8") as f:
                f.write(FAKE)
            os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
            with open(os.path.join(d, "refs.json"), "w", encoding="utf-8") as f:
                json.dump(refs, f)

            out = os.path.join(d, "report.json")
            rc = eval_cpp.main(["--model", model, "--eval", data, "--out", out,
                                "--transcribe", fake, "--files-per-call", "2"])
            self.assertEqual(rc, 1)  # one file failed in one configuration
            with open(out, encoding="utf-8") as f:
                report = json.load(f)
            self.assertEqual(report["chunk_ms"], 640)
            us, held = report["voices"]["espeak:en-us"], report["voices"]["espeak:en-029"]
            self.assertEqual((us["group"], us["words"], held["group"]), ("trained", 6, "heldout"))
            # Upper case and a typographic apostrophe normalise away.
            self.assertEqual(us["wer"]["greedy_left_all"], 0.0)
            self.assertEqual(us["wer"]["beam10_left4"], round(100 * 2 / 6, 2))
            self.assertEqual(held["wer"]["greedy_left_all"], 0.0)
            self.assertEqual(held["wer"]["greedy_left4"], 100.0)
            self.assertEqual(held["wer"]["beam10_left_all"], 20.0)
            self.assertEqual(report["total"]["heldout"]["wer"]["beam10_left4"], 100.0)
            self.assertEqual(len(report["failed"]), 2)
            with open(os.path.join(d, "report.md"), encoding="utf-8") as f:
                table = f.read()
            self.assertIn("| espeak:en-029 (held out) | 1 | 5 | 0.0 | 100.0 | 20.0 | 100.0 |", table)
            self.assertIn("| **all training voices** | 2 | 6 |", table)


if __name__ == "__main__":
    unittest.main()
