"""Held-out evaluation of an exported model directory with PyTorch.

Loads the model directory through tools/reference/model_dir.py (so it tests
the float16 weights that were exported), decodes every utterance of
synth.py's eval.jsonl greedily with 640 ms chunks (16 encoder frames), with
unlimited and with 4 chunks of left context, and reports WER per voice.
The chunk-masked full forward used here is the same maths as chunk-by-chunk
streaming; `--check-streaming N` verifies that on N utterances through the
reference's forward_chunk_by_chunk (CPU).

    python3 -m tools.train.evaluate --model OUT/model --eval WORK/data/eval \
        --heldout-voices espeak:en-029,flite:rms --out OUT/eval.json
"""

import argparse
import json
import os
import time

import torch

from tools.reference import frontend, model_dir
from tools.train.synth import DEFAULT_HELDOUT, read_wav
from tools.train.train_forward import PositionCache, encode, greedy_decode

CONFIGS = {"chunk16_left_unlimited": (16, -1), "chunk16_left4": (16, 4)}


def edit_distance(ref, hyp) -> int:
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def decode_units(ids, units) -> str:
    pieces = [units[i] for i in ids if 1 < i < len(units) - 1]
    return "".join(pieces).replace("\u2581", " ").strip()


def read_eval_rows(eval_dir: str, max_per_voice: int = 0):
    """The rows of synth.py's EVAL_DIR/eval.jsonl, in file order; with
    max_per_voice > 0, only the first that many of each voice."""
    with open(os.path.join(eval_dir, "eval.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if max_per_voice <= 0:
        return rows
    seen = {}
    kept = []
    for r in rows:
        seen[r["voice"]] = seen.get(r["voice"], 0) + 1
        if seen[r["voice"]] <= max_per_voice:
            kept.append(r)
    return kept


def load_units(path: str):
    units = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                u, i = line.rsplit(" ", 1)
                units[int(i)] = u
    return [units[i] for i in range(len(units))]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--eval", required=True, help="folder with eval.jsonl and WAVs")
    p.add_argument("--heldout-voices", default=DEFAULT_HELDOUT)
    p.add_argument("--out", required=True, help="JSON report; a .md table is written beside it")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--check-streaming", type=int, default=1)
    p.add_argument("--max-per-voice", type=int, default=0)
    a = p.parse_args(argv)
    t0 = time.time()
    model = model_dir.load_model_dir(a.model)
    units = load_units(os.path.join(a.model, "units.txt"))
    device = torch.device(a.device)
    rows = read_eval_rows(a.eval, a.max_per_voice)
    heldout = set(a.heldout_voices.split(","))

    stream_diff = None
    for r in rows[: a.check_streaming]:
        x, _ = read_wav(os.path.join(a.eval, r["wav"]))
        f = frontend.fbank(x).unsqueeze(0)
        with torch.no_grad():
            full = model.log_probs_full(f, 16, 4)
            stream = model.log_probs_streaming(f, 16, 4)
        n = min(full.size(1), stream.size(1))
        stream_diff = max(stream_diff or 0.0, float((full[:, :n] - stream[:, :n]).abs().max()))

    model.to(device)
    positions = PositionCache(model.cfg.output_size)
    per_voice = {}
    examples = []
    for r in rows:
        x, _ = read_wav(os.path.join(a.eval, r["wav"]))
        f = frontend.fbank(x).unsqueeze(0).to(device)
        lengths = torch.tensor([f.size(1)], device=device)
        ref = r["text"].split()
        v = per_voice.setdefault(r["voice"], {"utterances": 0, "words": 0,
                                              **{c: 0 for c in CONFIGS}})
        v["utterances"] += 1
        v["words"] += len(ref)
        for name, (chunk, left) in CONFIGS.items():
            with torch.no_grad():
                logp, out_len = encode(model, f, lengths, chunk, left, positions)
            hyp = decode_units(greedy_decode(logp[0].cpu(), int(out_len[0])), units).split()
            v[name] += edit_distance(ref, hyp)
            if name == "chunk16_left4" and len(examples) < 30 and v["utterances"] <= 2:
                examples.append({"voice": r["voice"], "ref": " ".join(ref), "hyp": " ".join(hyp)})

    def wer(errors, words):
        return round(100.0 * errors / max(words, 1), 2)

    report = {"voices": {}, "streaming_vs_masked_max_abs_diff": stream_diff,
              "seconds": round(time.time() - t0, 1), "examples": examples}
    totals = {"trained": {"words": 0, **{c: 0 for c in CONFIGS}},
              "heldout": {"words": 0, **{c: 0 for c in CONFIGS}}}
    for voice, v in sorted(per_voice.items()):
        group = "heldout" if voice in heldout else "trained"
        report["voices"][voice] = {"group": group, "utterances": v["utterances"], "words": v["words"],
                                   **{f"wer_{c}": wer(v[c], v["words"]) for c in CONFIGS}}
        totals[group]["words"] += v["words"]
        for c in CONFIGS:
            totals[group][c] += v[c]
    report["total"] = {g: {"words": t["words"], **{f"wer_{c}": wer(t[c], t["words"]) for c in CONFIGS}}
                       for g, t in totals.items()}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    lines = ["| voice | in training | utterances | words | WER % 640 ms, all left | WER % 640 ms, 4 left |",
             "| --- | --- | --- | --- | --- | --- |"]
    for voice, v in report["voices"].items():
        lines.append(f"| {voice} | {'no (held out)' if v['group'] == 'heldout' else 'yes'} | "
                     f"{v['utterances']} | {v['words']} | {v['wer_chunk16_left_unlimited']} | "
                     f"{v['wer_chunk16_left4']} |")
    for g, t in report["total"].items():
        lines.append(f"| **all {g} voices** | | | {t['words']} | {t['wer_chunk16_left_unlimited']} | "
                     f"{t['wer_chunk16_left4']} |")
    with open(os.path.splitext(a.out)[0] + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"evaluate: streaming vs chunk-masked max |diff| {stream_diff}; {report['seconds']} s")


if __name__ == "__main__":
    main()
