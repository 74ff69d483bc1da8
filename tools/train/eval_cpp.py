"""Held-out WER per voice through the C++ engine (oasr-transcribe), the way
the server runs the model: streaming in the model's chunks (16 encoder
frames = 640 ms), with unlimited and with 4 chunks of left context, greedy,
prefix beam search (beam 10) and prefix beam search with the model
directory's unit language model (lm.json; those columns are left out when the
model has none; --lm-flags passes e.g. "--lm-weight 0.3" to them). Writes a JSON report and, beside it, a
markdown table for docs/model.md.

    /usr/bin/python3 -m tools.train.eval_cpp --model models/en-conformer-ctc \\
        --eval WORK/data/eval --out /tmp/eval_cpp.json

--eval is a folder as synth.py writes it (eval.jsonl and WAVs). When it has
no eval.jsonl, the evaluation set is synthesized into it first (synth.py
--max-train 0: the same held-out sentences, voices and seeds as a training
run with the same --voices and --eval-per-voice; espeak-ng, flite and
festival must be installed; for the very same audio as the GPU machine's,
run the synthesizers of the .debs: eval "$(tools/train/unpack_debs.sh
.devdebs /tmp/debroot)" first). Transcripts and references are compared
after text_norm.normalize, word by word. About 4 minutes on 2 cores for the
default 640 utterances (16 families x 40) of the bundled geometry.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import wave

from tools.reference.model import subsampling_rate
from tools.train import synth
from tools.train.evaluate import edit_distance, read_eval_rows
from tools.train.text_norm import normalize

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# name -> (column label, oasr-transcribe flags).
CONFIGS = {
    "greedy_left_all": ("greedy, all left", ["--greedy", "--num-left-chunks", "-1"]),
    "greedy_left4": ("greedy, 4 left", ["--greedy", "--num-left-chunks", "4"]),
    "beam10_left_all": ("beam 10, all left", ["--beam", "10", "--no-lm", "--num-left-chunks", "-1"]),
    "beam10_left4": ("beam 10, 4 left", ["--beam", "10", "--no-lm", "--num-left-chunks", "4"]),
    # With the model directory's language model (lm.json), as the server decodes.
    "lm_left_all": ("beam 10 + LM, all left", ["--beam", "10", "--num-left-chunks", "-1"]),
    "lm_left4": ("beam 10 + LM, 4 left", ["--beam", "10", "--num-left-chunks", "4"]),
}
GROUPS = {"trained": "all training voices", "heldout": "all held-out voices"}


def words(text: str):
    """The words of a transcript or reference after the training
    normalisation (nothing is dropped as "not prose": a hypothesis is what
    it is)."""
    return (normalize(text, max_dropped=1.0) or "").split()


def heldout_voices(model: str, eval_dir: str) -> list:
    """The held-out families of the training run: from the model's (or the
    evaluation set's) synth_summary.json, else synth.py's default."""
    for folder in (model, os.path.dirname(os.path.abspath(eval_dir)), eval_dir):
        path = os.path.join(folder, "synth_summary.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                return json.load(f)["heldout_voices"]
    return synth.DEFAULT_HELDOUT.split(",")


def transcribe(binary: str, model: str, wavs: list, flags: list, threads: int) -> tuple:
    """({wav path: transcript}, {wav path: error}) of one oasr-transcribe
    run over `wavs` (it prints "file<TAB>transcript" per file it decoded and
    "file: error" on stderr for the others)."""
    cmd = [binary, "--model-dir", model, "--threads", str(threads)] + flags + wavs
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd[:8])} ... exited {r.returncode}: {r.stderr[-2000:]}")
    texts = {}
    for line in r.stdout.splitlines():
        path, _, text = line.partition("\t")
        texts[path] = text
    lines = r.stderr.splitlines()
    errors = {w: next((l for l in lines if l.startswith(w + ": ")), r.stderr.strip()[-500:])
              for w in wavs if w not in texts}
    return texts, errors


def audio_seconds(path: str) -> float:
    with wave.open(path, "rb") as w:
        return w.getnframes() / w.getframerate()


def wer(errors: int, n: int) -> float:
    return round(100.0 * errors / max(n, 1), 2)


def markdown(report: dict) -> str:
    configs = list(report["configs"])
    labels = [CONFIGS[c][0] for c in configs]
    lines = [f"WER % on held-out sentences through the C++ engine (oasr-transcribe), streaming "
             f"{report['chunk_ms']} ms chunks; \"all left\" = unlimited left context, \"4 left\" = "
             f"num_left_chunks 4.", "",
             "| voice | utterances | words | " + " | ".join(labels) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in labels) + " |"]
    for voice, v in report["voices"].items():
        name = voice + (" (held out)" if v["group"] == "heldout" else "")
        lines.append(f"| {name} | {v['utterances']} | {v['words']} | "
                     + " | ".join(str(v["wer"][c]) for c in configs) + " |")
    for group, t in report["total"].items():
        lines.append(f"| **{GROUPS[group]}** | {t['utterances']} | {t['words']} | "
                     + " | ".join(f"**{t['wer'][c]}**" for c in configs) + " |")
    return "\n".join(lines) + "\n"


def repo_relative(path: str) -> str:
    """A path inside the repository relative to its root (reports are
    committed; they name no machine's folders), else the path as given."""
    full = os.path.abspath(path)
    return os.path.relpath(full, REPO) if full.startswith(REPO + os.sep) else path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model directory (docs/model-format.md)")
    p.add_argument("--eval", required=True, help="folder with eval.jsonl and WAVs (made if absent)")
    p.add_argument("--out", required=True, help="JSON report; the .md table is written beside it")
    p.add_argument("--transcribe", default=os.path.join(REPO, "build/scheduler/oasr-transcribe"))
    p.add_argument("--heldout-voices", help="comma-separated (default: the training run's)")
    p.add_argument("--threads", type=int, default=2, help="encoder threads of oasr-transcribe")
    p.add_argument("--files-per-call", type=int, default=200)
    p.add_argument("--max-per-voice", type=int, default=0, help="0: every utterance")
    p.add_argument("--configs", default=",".join(CONFIGS), help="subset of " + ",".join(CONFIGS))
    p.add_argument("--lm-flags", default="", help="extra oasr-transcribe flags of the lm_ configs")
    p.add_argument("--flags", default="",
                   help="extra oasr-transcribe flags of every config (e.g. \"--min-word-confidence 0.3\")")
    # Synthesis of a missing evaluation set (synth.py's defaults).
    p.add_argument("--corpus", default=os.path.join(REPO, "tools/train/corpus"))
    p.add_argument("--voices", default=",".join(synth.ALL_FAMILIES))
    p.add_argument("--eval-per-voice", type=int, default=40)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    a = p.parse_args(argv)
    t0 = time.time()
    configs = [c for c in a.configs.split(",") if c]
    if not configs or any(c not in CONFIGS for c in configs):
        sys.exit(f"eval_cpp: --configs must name some of {list(CONFIGS)}")
    if not os.path.exists(os.path.join(a.model, "lm.json")):
        configs = [c for c in configs if not c.startswith("lm_")]
    flags = {c: CONFIGS[c][1] + a.flags.split() + (a.lm_flags.split() if c.startswith("lm_") else [])
             for c in configs}
    if not os.access(a.transcribe, os.X_OK):
        sys.exit(f"eval_cpp: {a.transcribe} is not an executable (build oasr-transcribe, or "
                 "pass --transcribe)")
    heldout = a.heldout_voices.split(",") if a.heldout_voices else heldout_voices(a.model, a.eval)
    if not os.path.exists(os.path.join(a.eval, "eval.jsonl")):
        print(f"eval_cpp: no {a.eval}/eval.jsonl; synthesizing the evaluation set", flush=True)
        synth.main(["--corpus", a.corpus, "--out", a.eval, "--eval-out", a.eval, "--max-train", "0",
                    "--voices", a.voices, "--heldout-voices", ",".join(heldout),
                    "--eval-per-voice", str(a.eval_per_voice), "--workers", str(a.workers)])
    rows = read_eval_rows(a.eval, a.max_per_voice)
    with open(os.path.join(a.model, "config.json"), encoding="utf-8") as f:
        conf = json.load(f)
    chunk = conf["serving"]["chunk_size"]
    chunk_ms = chunk * 10 * subsampling_rate(conf["encoder_conf"]["input_layer"])
    for r in rows:
        r["path"] = os.path.abspath(os.path.join(a.eval, r["wav"]))
    total_audio = sum(audio_seconds(r["path"]) for r in rows)

    hyps = {r["path"]: {} for r in rows}
    failed = []
    timing = {}
    for c in configs:
        start = time.time()
        paths = [r["path"] for r in rows]
        for i in range(0, len(paths), a.files_per_call):
            texts, errors = transcribe(a.transcribe, a.model, paths[i:i + a.files_per_call],
                                       flags[c], a.threads)
            for path, text in texts.items():
                hyps[path][c] = text
            failed += [{"wav": w, "config": c, "error": e} for w, e in errors.items()]
        seconds = time.time() - start
        timing[c] = {"seconds": round(seconds, 1), "rtf": round(seconds / max(total_audio, 1e-9), 4)}
        print(f"eval_cpp: {c}: {len(paths)} files, {total_audio:.0f} s of audio in {seconds:.0f} s",
              flush=True)

    per_voice, utterances = {}, []
    for r in rows:
        ref = words(r["text"])
        v = per_voice.setdefault(r["voice"], {"utterances": 0, "words": 0,
                                              "errors": {c: 0 for c in configs}})
        v["utterances"] += 1
        v["words"] += len(ref)
        u = {"id": r["id"], "voice": r["voice"], "ref": " ".join(ref), "hyp": {}}
        for c in configs:
            hyp = words(hyps[r["path"]].get(c, ""))  # a failed file counts as all deleted
            v["errors"][c] += edit_distance(ref, hyp)
            u["hyp"][c] = " ".join(hyp)
        utterances.append(u)

    report = {"model": repo_relative(a.model), "eval": repo_relative(a.eval),
              "chunk_frames": chunk, "chunk_ms": chunk_ms, "heldout_voices": heldout,
              "audio_seconds": round(total_audio, 1), "configs": {
                  c: {"label": CONFIGS[c][0], "flags": flags[c], **timing[c]} for c in configs},
              "voices": {}, "total": {}, "failed": failed}
    totals = {g: {"utterances": 0, "words": 0, "errors": {c: 0 for c in configs}} for g in GROUPS}
    # Training voices first, then the held-out ones.
    for voice, v in sorted(per_voice.items(), key=lambda kv: (kv[0] in heldout, kv[0])):
        group = "heldout" if voice in heldout else "trained"
        report["voices"][voice] = {"group": group, "utterances": v["utterances"], "words": v["words"],
                                   "errors": v["errors"],
                                   "wer": {c: wer(v["errors"][c], v["words"]) for c in configs}}
        t = totals[group]
        t["utterances"] += v["utterances"]
        t["words"] += v["words"]
        for c in configs:
            t["errors"][c] += v["errors"][c]
    for g, t in totals.items():
        if t["utterances"]:
            report["total"][g] = {**t, "wer": {c: wer(t["errors"][c], t["words"]) for c in configs}}
    report["seconds"] = round(time.time() - t0, 1)
    report["utterances"] = utterances
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    table = markdown(report)
    with open(os.path.splitext(a.out)[0] + ".md", "w", encoding="utf-8") as f:
        f.write(table)
    print(table)
    for g, t in report["total"].items():
        print(f"eval_cpp: {GROUPS[g]}: " + ", ".join(f"{c} {t['wer'][c]}%" for c in configs))
    if failed:
        print(f"eval_cpp: {len(failed)} transcriptions failed (counted as all words deleted); "
              f"see 'failed' in {a.out}", file=sys.stderr)
    print(f"eval_cpp: {report['seconds']} s; report {a.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
