"""Writes samples/: a handful of held-out sentences, each spoken by another
voice (one voice family held out of training), as 16 kHz 16-bit mono WAV
files, with transcripts.tsv (file, voice, held_out, text; a header line).
The README demo and tests/model transcribe them.

The sentences come from the held-out corpus but not from the evaluation set
synth.py draws with its defaults, so they were never looked at while
training or evaluating. Audio is synthesized with the evaluation set's clean
settings; it is deterministic for a given synthesizer build (the committed
files were made with the .debs of fetch_debs.sh, see unpack_debs.sh).

    /usr/bin/python3 -m tools.train.make_samples --out samples
"""

import argparse
import os
import random
import sys
import tempfile

from tools.train import synth
from tools.train.corpus import read_lines

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# One per synthesizer family style; espeak:en-029 is held out of training.
VOICES = ["espeak:en-us", "espeak:en-gb-x-rp", "flite:slt", "flite:awb",
          "festival:kal_diphone", "espeak:en-029"]
MAX_SECONDS = 4.5  # Per file: six files stay well under 1 MB.


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(REPO, "samples"))
    p.add_argument("--corpus", default=os.path.join(REPO, "tools/train/corpus"))
    p.add_argument("--voices", default=",".join(VOICES))
    p.add_argument("--heldout-voices", default=synth.DEFAULT_HELDOUT)
    p.add_argument("--min-words", type=int, default=7)
    p.add_argument("--seed", type=int, default=8)
    a = p.parse_args(argv)
    heldout = set(a.heldout_voices.split(","))
    voices = a.voices.split(",")
    sentences = read_lines(os.path.join(a.corpus, "heldout.txt.gz"))
    # The default evaluation set (synth.py: every family, 40 per voice, seed 1).
    evaluated = {item[1] for item in synth.eval_plan(sentences, synth.ALL_FAMILIES, 40, 1)}
    candidates = [s for s in sentences if s not in evaluated and len(s.split()) >= a.min_words]
    rng = random.Random(a.seed)
    rng.shuffle(candidates)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, voice in enumerate(voices):
            settings = synth.voice_settings(voice, random.Random(a.seed * 1009 + i), clean=True)
            while True:
                if not candidates:
                    sys.exit("make_samples: ran out of sentences")
                text = candidates.pop()
                x = synth.synthesize([(voice, text, settings)], tmp)[0]
                if x is None:
                    sys.exit(f"make_samples: {voice} does not work here")
                if x.numel() <= MAX_SECONDS * synth.SAMPLE_RATE:
                    break
            name = f"{i + 1:02d}_{voice.replace(':', '_')}.wav"
            synth.write_wav(os.path.join(a.out, name), x)
            rows.append((name, voice, "yes" if voice in heldout else "no", text))
            print(f"{name}\t{x.numel() / synth.SAMPLE_RATE:.2f} s\t{text}")
    with open(os.path.join(a.out, "transcripts.tsv"), "w", encoding="utf-8") as f:
        f.write("file\tvoice\theld_out\ttext\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    total = sum(os.path.getsize(os.path.join(a.out, r[0])) for r in rows)
    print(f"make_samples: {len(rows)} files, {total / 1e6:.2f} MB in {a.out}")


if __name__ == "__main__":
    main()
