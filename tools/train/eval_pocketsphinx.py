"""WER per voice of pocketsphinx-en-us (Debian's pocketsphinx and
pocketsphinx-en-us: CMU Sphinx's 2015 US English acoustic model, its
dictionary and 3-gram) on an evaluation folder as eval_cpp.py reads it: the
reference row beside our model's on the same audio, scored the same way
(text_norm.normalize, word edit distance).

    /usr/bin/python3 -m tools.train.eval_pocketsphinx --eval WORK/human_dev \\
        --out /tmp/human_dev_pocketsphinx.json

Each WAV is resampled to 16 kHz mono (torchaudio) and decoded by
pocketsphinx_continuous -infile with the package's default model.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import tempfile
import time

from tools.train.eval_cpp import repo_relative, wer, words
from tools.train.evaluate import edit_distance, read_eval_rows


def decode(binary: str, wav: str, scratch: str) -> str:
    """pocketsphinx's transcript of `wav` (resampled into `scratch` first)."""
    import torch
    import torchaudio

    audio, rate = torchaudio.load(wav)
    audio = audio.mean(0, keepdim=True)
    if rate != 16000:
        audio = torchaudio.functional.resample(audio, rate, 16000)
    path = os.path.join(scratch, f"{abs(hash(wav))}.wav")
    torchaudio.save(path, torch.clamp(audio, -1.0, 1.0), 16000, encoding="PCM_S",
                    bits_per_sample=16)
    r = subprocess.run([binary, "-infile", path], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    os.remove(path)
    return " ".join(line.strip() for line in r.stdout.splitlines() if line.strip())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--eval", required=True, help="folder with eval.jsonl and WAVs")
    p.add_argument("--out", required=True, help="JSON report; the .md table is written beside it")
    p.add_argument("--pocketsphinx", default="pocketsphinx_continuous")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    a = p.parse_args(argv)
    t0 = time.time()
    rows = read_eval_rows(a.eval)
    with tempfile.TemporaryDirectory() as scratch, \
            concurrent.futures.ThreadPoolExecutor(a.workers) as pool:
        hyps = list(pool.map(lambda r: decode(a.pocketsphinx, os.path.join(a.eval, r["wav"]),
                                              scratch), rows))
    per_voice, utterances = {}, []
    for r, hyp_text in zip(rows, hyps):
        ref, hyp = words(r["text"]), words(hyp_text)
        v = per_voice.setdefault(r["voice"], {"utterances": 0, "words": 0, "errors": 0})
        v["utterances"] += 1
        v["words"] += len(ref)
        v["errors"] += edit_distance(ref, hyp)
        utterances.append({"id": r["id"], "voice": r["voice"], "ref": " ".join(ref),
                           "hyp": " ".join(hyp)})
    total = {"utterances": sum(v["utterances"] for v in per_voice.values()),
             "words": sum(v["words"] for v in per_voice.values()),
             "errors": sum(v["errors"] for v in per_voice.values())}
    for v in list(per_voice.values()) + [total]:
        v["wer"] = wer(v["errors"], v["words"])
    report = {"decoder": "pocketsphinx-en-us (pocketsphinx_continuous, default model)",
              "eval": repo_relative(a.eval), "voices": per_voice, "total": total,
              "seconds": round(time.time() - t0, 1), "utterances": utterances}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    lines = ["| voice | utterances | words | pocketsphinx-en-us |", "| --- | --- | --- | --- |"]
    for voice, v in per_voice.items():
        lines.append(f"| {voice} | {v['utterances']} | {v['words']} | {v['wer']} |")
    lines.append(f"| **all** | {total['utterances']} | {total['words']} | **{total['wer']}** |")
    with open(os.path.splitext(a.out)[0] + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"eval_pocketsphinx: {total['utterances']} utterances, WER {total['wer']} % "
          f"in {report['seconds']} s; report {a.out}")


if __name__ == "__main__":
    main()
