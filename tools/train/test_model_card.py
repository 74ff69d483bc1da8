"""model_card.py end to end against stand-ins: a synthetic evaluation folder
(one trained family, one unheard), a human development folder (two
sources), an oasr-transcribe that answers the references (greedy drops each
utterance's last word) and a pocketsphinx_continuous that always says
"the". Checks the table's rows, their order and figures, and the summary."""

import json
import os
import stat
import tempfile
import unittest

import torch

from tools.train import model_card
from tools.train.synth import write_wav

TRANSCRIBE = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
refs = json.load(open(os.path.join(os.path.dirname(sys.argv[0]), "refs.json")))
assert args[args.index("--num-left-chunks") + 1] == "4"
for path in [a for a in args if a.endswith(".wav")]:
    words = refs[os.path.basename(path)].split()
    print(path + "\\t" + " ".join(words[:-1] if "--greedy" in args else words))
"""

POCKETSPHINX = """#!/bin/sh
echo the
"""


def write_set(folder, rows, refs):
    os.makedirs(os.path.join(folder, "w"), exist_ok=True)
    with open(os.path.join(folder, "eval.jsonl"), "w", encoding="utf-8") as f:
        for i, (voice, text) in enumerate(rows):
            wav = f"w/{os.path.basename(folder)}-{i}.wav"
            write_wav(os.path.join(folder, wav), torch.zeros(1600))
            refs[os.path.basename(wav)] = text
            f.write(json.dumps({"id": str(i), "voice": voice, "wav": wav, "text": text}) + "\n")


def script(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


class ModelCardTest(unittest.TestCase):
    def test_one_run_fills_the_table(self):
        with tempfile.TemporaryDirectory() as d:
            model, work = os.path.join(d, "model"), os.path.join(d, "work")
            os.makedirs(model)
            with open(os.path.join(model, "config.json"), "w", encoding="utf-8") as f:
                json.dump({"encoder_conf": {"input_layer": "conv2d"},
                           "serving": {"chunk_size": 16}}, f)
            with open(os.path.join(model, "lm.json"), "w", encoding="utf-8") as f:
                json.dump({}, f)  # the stand-in reads no language model
            refs = {}
            write_set(os.path.join(work, "synthetic_eval"),
                      [("espeak:en-us", "a b c d"), ("espeak:en-us", "e f"),
                       ("flite:rms", "g h i j k")], refs)
            write_set(os.path.join(work, "human_dev"),
                      [("tuxpaint", "a badger"), ("klettres", "car"), ("klettres", "the sky")],
                      refs)
            with open(os.path.join(d, "refs.json"), "w", encoding="utf-8") as f:
                json.dump(refs, f)
            transcribe = script(os.path.join(d, "oasr-transcribe"), TRANSCRIBE)
            ps = script(os.path.join(d, "pocketsphinx_continuous"), POCKETSPHINX)
            out = os.path.join(d, "card", "model-card")
            rc = model_card.main(["--model", model, "--work", work, "--out", out,
                                  "--transcribe", transcribe, "--pocketsphinx", ps])
            self.assertEqual(rc, 0)
            with open(out + ".md", encoding="utf-8") as f:
                lines = [l for l in f.read().splitlines() if l.startswith("| ")]
            cells = [[c.strip() for c in l.strip("|").split("|")] for l in lines[2:]]
            self.assertEqual([c[0] for c in cells], [
                "synthetic: espeak:en-us", "**synthetic: all trained families**",
                "synthetic: flite:rms (unheard)", "**synthetic: all unheard families**",
                "human: klettres", "human: tuxpaint", "**human development set**",
                "pocketsphinx-en-us: klettres", "pocketsphinx-en-us: tuxpaint",
                "**pocketsphinx-en-us, human development set**"])
            # Greedy drops one word an utterance, beam + LMs none.
            self.assertEqual(cells[0][1:], ["2", "6", "33.3", "0.0"])
            self.assertEqual(cells[2][1:], ["1", "5", "20.0", "0.0"])
            self.assertEqual(cells[6][1:], ["3", "5", "**60.0**", "**0.0**"])
            # "the" for every recording: tuxpaint 2 errors of 2, klettres "car" 1, "the sky" 1.
            self.assertEqual(cells[7][1:], ["2", "3", "", "66.7"])
            self.assertEqual(cells[8][1:], ["1", "2", "", "100.0"])
            self.assertEqual(cells[9][1:], ["3", "5", "", "**80.0**"])
            with open(out + ".json", encoding="utf-8") as f:
                summary = json.load(f)
            self.assertEqual(summary["human"]["wer"]["greedy_left4"], 60.0)
            self.assertEqual(summary["pocketsphinx"]["wer"], 80.0)
            self.assertEqual(sorted(summary["reports"]), ["human", "pocketsphinx", "synthetic"])

            # Without pocketsphinx the reference row says so; without language
            # models the second column is beam search alone.
            os.remove(os.path.join(model, "lm.json"))
            rc = model_card.main(["--model", model, "--work", work, "--out", out,
                                  "--transcribe", transcribe,
                                  "--pocketsphinx", os.path.join(d, "missing")])
            self.assertEqual(rc, 0)
            with open(out + ".md", encoding="utf-8") as f:
                text = f.read()
            self.assertIn("not run (pocketsphinx_continuous missing)", text)
            self.assertIn("| greedy | beam 10 (no LMs in the model) |", text)


if __name__ == "__main__":
    unittest.main()
