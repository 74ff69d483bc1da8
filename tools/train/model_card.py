"""The model card's evaluation table (docs/model.md) from one run: WER per
voice family of the synthetic held-out sentences (trained families, then
the unheard ones), on the human development set per source, and
pocketsphinx-en-us on the same human audio as the reference row; greedy and
beam 10 with the language models, both as served (4 chunks of left context).

    /usr/bin/python3 -m tools.train.model_card --model models/en-conformer-ctc \\
        --work WORK --out bench/results/model-card

WORK/synthetic_eval and WORK/human_dev are made when missing (synth.py's
evaluation plan; tools/train/human_dev.py, which needs apt-get download and
oggdec). Writes OUT.md (the table) and OUT.json (every figure, and where
the three full reports are: OUT-synthetic.json, OUT-human.json,
OUT-pocketsphinx.json). Without pocketsphinx_continuous the reference row
says so instead of a figure.
"""

import argparse
import json
import os
import shutil
import sys

from tools.train import eval_cpp, eval_pocketsphinx, human_dev

# Greedy, and beam 10 with the model's language models (without: beam 10 alone).
CONFIGS = ("greedy_left4", "lm_left4")
CONFIGS_NO_LM = ("greedy_left4", "beam10_left4")
HUMAN_SOURCES = ("tuxpaint", "ktuberling", "klettres", "kajongg")
UNHEARD = ("espeak:en-029", "flite:rms")


def _row(name, utterances, words, cells):
    return f"| {name} | {utterances} | {words} | " + " | ".join(cells) + " |"


def _wer(entry, config):
    return f"{entry['wer'][config]:.1f}"


def card_table(synthetic: dict, human: dict, pocketsphinx) -> str:
    """Markdown of the three reports (eval_cpp's JSON for the synthetic and
    the human sets, eval_pocketsphinx's or None)."""
    configs = CONFIGS if "lm_left4" in synthetic["configs"] else CONFIGS_NO_LM
    beam = "beam 10 + LMs" if configs is CONFIGS else "beam 10 (no LMs in the model)"
    head = [f"| set | utterances | words | greedy | {beam} |",
            "| --- | ---: | ---: | ---: | ---: |"]
    rows = []
    groups = (("trained", "all trained families"), ("heldout", "all unheard families"))
    for group, total_name in groups:
        for voice, entry in synthetic["voices"].items():
            if entry["group"] == group:
                name = f"synthetic: {voice}" + (" (unheard)" if group == "heldout" else "")
                rows.append(_row(name, entry["utterances"], entry["words"],
                                 [_wer(entry, c) for c in configs]))
        total = synthetic["total"].get(group)
        if total:
            rows.append(_row(f"**synthetic: {total_name}**", total["utterances"], total["words"],
                             [f"**{_wer(total, c)}**" for c in configs]))
    for source, entry in sorted(human["voices"].items()):
        rows.append(_row(f"human: {source}", entry["utterances"], entry["words"],
                         [_wer(entry, c) for c in configs]))
    total = human["total"]["heldout"]
    rows.append(_row("**human development set**", total["utterances"], total["words"],
                     [f"**{_wer(total, c)}**" for c in configs]))
    if pocketsphinx is None:
        rows.append("| pocketsphinx-en-us, human development set | | | not run "
                    "(pocketsphinx_continuous missing) | |")
    else:
        for source, entry in sorted(pocketsphinx["voices"].items()):
            rows.append(_row(f"pocketsphinx-en-us: {source}", entry["utterances"],
                             entry["words"], ["", f"{entry['wer']:.1f}"]))
        t = pocketsphinx["total"]
        rows.append(_row("**pocketsphinx-en-us, human development set**", t["utterances"],
                         t["words"], ["", f"**{t['wer']:.1f}**"]))
    return "\n".join(head + rows) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--work", required=True, help="where the evaluation sets are (made if absent)")
    p.add_argument("--out", required=True, help="OUT.md and OUT.json are written")
    p.add_argument("--transcribe", default=None, help="oasr-transcribe (eval_cpp's default)")
    p.add_argument("--pocketsphinx", default="pocketsphinx_continuous")
    a = p.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    has_lm = os.path.exists(os.path.join(a.model, "lm.json"))
    configs = CONFIGS if has_lm else CONFIGS_NO_LM
    common = ["--model", a.model, "--configs", ",".join(configs)]
    if a.transcribe:
        common += ["--transcribe", a.transcribe]
    reports = {k: f"{a.out}-{k}.json" for k in ("synthetic", "human", "pocketsphinx")}

    if eval_cpp.main(common + ["--eval", os.path.join(a.work, "synthetic_eval"),
                               "--heldout-voices", ",".join(UNHEARD),
                               "--out", reports["synthetic"]]):
        return 1
    human_dir = os.path.join(a.work, "human_dev")
    if not os.path.exists(os.path.join(human_dir, "eval.jsonl")):
        if human_dev.main(["--out", human_dir]):
            return 1
    if eval_cpp.main(common + ["--eval", human_dir, "--heldout-voices", ",".join(HUMAN_SOURCES),
                               "--out", reports["human"]]):
        return 1
    have_ps = shutil.which(a.pocketsphinx) is not None
    if have_ps and eval_pocketsphinx.main(["--eval", human_dir, "--out", reports["pocketsphinx"],
                                           "--pocketsphinx", a.pocketsphinx]):
        return 1

    def load(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    synthetic, human = load(reports["synthetic"]), load(reports["human"])
    ps = load(reports["pocketsphinx"]) if have_ps else None
    table = card_table(synthetic, human, ps)
    with open(a.out + ".md", "w", encoding="utf-8") as f:
        f.write(f"Model: {a.model}. WER %, 640 ms chunks, 4 chunks of left context.\n\n" + table)
    summary = {"model": a.model, "configs": list(configs),
               "synthetic": synthetic["total"], "human": human["total"]["heldout"],
               "pocketsphinx": ps["total"] if ps else None,
               "reports": {k: os.path.basename(v) for k, v in reports.items()
                           if k != "pocketsphinx" or ps}}
    with open(a.out + ".json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
