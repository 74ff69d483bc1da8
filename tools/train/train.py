"""Trains the streaming Conformer-CTC with tools/reference's model class.

Input: the shards of synth.py (DATA/train/shard*.pt) and a tokenizer folder
(bpe.model, units.txt). Shards hold either clean 16 kHz waveforms (synth.py
--store wav, the default) or fbank features augmented once at synthesis
(--store feats, the older flow). Waveforms live on the training device
(gpu_frontend.WaveStore) and every step makes its batch's features there:
a fresh augmentation of each utterance (augment.py; --online-augment, on by
default), then the reference's Kaldi fbank, batched (gpu_frontend.BatchFbank);
so every epoch hears each sentence with new speed, room, band, noise and
level. Each batch also gets clips with no speech in it (silence, noise,
mains hum, clicks; --noise-clips, 4 % of its utterances) whose transcript
is empty, so that the model gives no units for them. Feature shards go to
the device as they are (FeatureStore) and get no waveform augmentation
here, but the same non-speech clips (their fbank made on the device).

Growing data (--reload-shards, on by default): at every epoch boundary the
shard folder is listed again and the utterances of shards not loaded yet
(synth.py --train-only, which run_gpu.sh runs beside training) are appended
to the store at the next indices; the next epoch's batches cover them. The
global CMVN stays the one computed at the start of training. A resumed run
loads every shard there is by then, so the batch list of the checkpoint's
epoch (make_batches, seeded by the epoch) may be computed over more data than
when the checkpoint was written: resuming mid-epoch then skips the first
`batch` batches of the new list, which are not the ones already trained on
(some utterances of that epoch are seen twice, others not at all; the epochs
after it are whole).

Training: CTC loss, dynamic chunk masks (train_forward.dynamic_chunk), vocal
tract length perturbation and SpecAugment on the features, dropout, AdamW
with warmup and a cosine decay over the wall-clock budget, bf16 autocast on
CUDA, global CMVN computed once at the start over the training features as
training sees them (one augmented pass, with online augmentation).
Checkpoints (checkpoint.py, parts of at most 15 MiB) go to WORK/ckpt/stepN
every --ckpt-minutes; a run started with the same WORK resumes from the
newest (or from --resume DIR), the augmentation's random streams included
(restarted from the step, like SpecAugment's). At the end the
model is exported with tools/reference/model_dir.py as float16 weights, with
model.safetensors split into parts of at most 16 MiB when larger.

    python3 -m tools.train.train --data WORK/data --tokenizer WORK/tok \
        --work WORK/train --export OUT/model --max-minutes 11
"""

import argparse
import fnmatch
import glob
import json
import math
import os
import random
import shutil
import sys
import time

import torch

from tools.reference import frontend, model_dir
from tools.reference.model import ConformerCtcModel, ModelConfig
from tools.train import augment, checkpoint
from tools.train.evaluate import edit_distance, read_eval_rows
from tools.train.gpu_frontend import (FRAME_LENGTH, FRAME_SHIFT, BatchFbank, FlatStore,
                                      WaveFeatures, frame_lengths, non_speech_clips,
                                      shortest_samples)
from tools.train.synth import read_wav
from tools.train.tokenizer import Tokenizer
from tools.train.train_forward import (PositionCache, add_dropout_hooks, dynamic_chunk,
                                       encode, greedy_decode, output_lengths)


def log(msg: str):
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def shard_paths(data_dir: str):
    """DATA/train/shard*.pt, sorted (synth.py renames each finished shard into
    place, so a path listed here is a whole shard)."""
    return sorted(glob.glob(os.path.join(data_dir, "train", "shard*.pt")))


def load_shards(paths, kind=None):
    """(kind, utterances, metas, paths of the other kind) of the shards at
    `paths`: kind "wavs" (clean int16 waveforms) or "feats" ((T, 80) float16
    features, augmented at synthesis), the first shard's unless given; shards
    of another kind are left out."""
    utts, metas, other = [], [], []
    for path in paths:
        shard = torch.load(path, weights_only=False)
        k = "wavs" if "wavs" in shard else "feats"
        kind = kind or k
        if k != kind:
            other.append(path)
            continue
        utts.extend(shard[k])
        metas.extend(shard["meta"])
    return kind, utts, metas, other


def usable(metas, min_frames, tok: Tokenizer):
    """(indices of the utterances CTC can train on, their token id lists):
    CTC needs at least one frame per unit (plus blanks between repeats)."""
    keep, tokens = [], []
    for i, (m, n) in enumerate(zip(metas, min_frames)):
        ids = tok.encode(m["text"])
        if ids and len(ids) + 2 <= int(output_lengths(torch.tensor(int(n)))):
            keep.append(i)
            tokens.append(ids)
    return keep, tokens


def excluded(voice: str, patterns) -> bool:
    """Whether a voice family matches one of the fnmatch `patterns`."""
    return any(fnmatch.fnmatchcase(voice, p) for p in patterns)


def select(kind, utts, metas, tok: Tokenizer, online: bool, exclude=()):
    """(utterances, their fbank frames, token id lists, voices) of those CTC
    can train on (`usable`; for waveforms at their fastest augmented speed),
    less those of voice families matching `exclude` (fnmatch patterns)."""
    if kind == "wavs":
        samples = torch.tensor([w.numel() for w in utts], dtype=torch.long)
        frames = frame_lengths(samples).tolist()
        keep, tokens = usable(metas, frame_lengths(shortest_samples(samples, online)).tolist(), tok)
    else:
        frames = [f.size(0) for f in utts]
        keep, tokens = usable(metas, frames, tok)
    if exclude:
        kept = [(i, t) for i, t in zip(keep, tokens) if not excluded(metas[i]["voice"], exclude)]
        keep, tokens = [i for i, _ in kept], [t for _, t in kept]
    return ([utts[i] for i in keep], [int(frames[i]) for i in keep], tokens,
            [metas[i]["voice"] for i in keep])


def cmvn_stats(store, batches):
    """WeNet global_cmvn statistics (float64) over every frame of `batches`
    as store.batch makes them (padding frames are zero and not counted)."""
    s = sq = 0.0
    n = 0
    with torch.no_grad():
        for idx in batches:
            x, lengths = store.batch(idx)
            x = x.double()
            s = s + x.sum((0, 1))
            sq = sq + (x * x).sum((0, 1))
            n = n + lengths.sum()
    return {"mean_stat": s.tolist(), "var_stat": sq.tolist(), "frame_num": int(n)}


def make_batches(lengths, batch_frames: int, rng: random.Random, shuffle: bool = True):
    """Index lists with (utterances x longest) <= batch_frames, similar
    lengths together, in a random order (shortest first without shuffle)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    batches, cur, longest = [], [], 0
    for i in order:
        longest2 = max(longest, lengths[i])
        if cur and longest2 * (len(cur) + 1) > batch_frames:
            batches.append(cur)
            cur, longest2 = [], lengths[i]
        cur.append(i)
        longest = longest2
    if cur:
        batches.append(cur)
    if shuffle:
        rng.shuffle(batches)
    return batches


class FeatureStore(FlatStore):
    """Every training utterance's features in one (frames, 80) float16 tensor
    on the training device (75 h are ~4.3 GB), so that a batch is one gather
    there instead of a host-side padding loop and a copy per step; `append`
    adds utterances (FlatStore). Clips with no speech are made on the device
    when a batch asks for them (their fbank by gpu_frontend.BatchFbank)."""

    def __init__(self, items, device, seed: int = 0):
        super().__init__(items, device)
        self.fbank = None
        self.reseed(seed)

    def reseed(self, seed: int):
        """The non-speech clips' generators restart from `seed` (as
        WaveFeatures.reseed)."""
        self.params_gen = torch.Generator().manual_seed(seed)
        self.noise_gen = torch.Generator(device=self.device).manual_seed(seed)

    def batch(self, idx, non_speech: int = 0):
        """(padded features (B, T, 80) float32, lengths (B,)) on the device:
        utterances idx, then `non_speech` clips of silence, noise, hum or
        clicks no longer than the longest of them (WaveFeatures.batch's)."""
        rows, valid, lengths = self.rows(idx)
        x = self.flat[rows].float() * valid.unsqueeze(2)
        lengths = lengths.to(self.device)
        if non_speech:
            if self.fbank is None:
                self.fbank = BatchFbank(self.device)
            samples = FRAME_LENGTH + (int(lengths.max()) - 1) * FRAME_SHIFT
            clips, n = non_speech_clips(non_speech, samples, self.params_gen, self.noise_gen,
                                        self.device)
            feats, flen = self.fbank(clips, n)
            t = max(x.size(1), feats.size(1))
            x = torch.cat([torch.nn.functional.pad(x, (0, 0, 0, t - x.size(1))),
                           torch.nn.functional.pad(feats, (0, 0, 0, t - feats.size(1)))])
            lengths = torch.cat([lengths, flen.to(self.device)])
        return x, lengths


def batch_targets(idx, tokens, device):
    targets = torch.tensor([t for i in idx for t in tokens[i]], dtype=torch.long)
    tlens = torch.tensor([len(tokens[i]) for i in idx])
    return targets.to(device), tlens.to(device)


class HeldOut:
    """Greedy WER on a fixed sample of synth.py's held-out evaluation set
    (balanced over voices), logged during training to show the trend."""

    CONFIGS = (("all left", 16, -1), ("4 left", 16, 4))

    def __init__(self, eval_dir: str, per_voice: int, heldout_voices, tok: Tokenizer,
                 exclude=()):
        """Voices in `heldout_voices` or matching `exclude` (--exclude-voices)
        count as held out."""
        rows = read_eval_rows(eval_dir, per_voice)
        self.refs = [r["text"].split() for r in rows]
        self.heldout = [r["voice"] in heldout_voices or excluded(r["voice"], exclude)
                        for r in rows]
        self.feats = [frontend.fbank(read_wav(os.path.join(eval_dir, r["wav"]))[0]) for r in rows]
        self.tok = tok
        self.batch = None  # (features, lengths) on the device, made by the first wer().

    def wer(self, model, device, positions, amp: bool) -> str:
        if not self.feats:
            return "no held-out utterances"
        if self.batch is None:
            self.batch = FeatureStore(self.feats, device).batch(list(range(len(self.feats))))
        x, lengths = self.batch
        model.eval()
        parts = []
        with torch.no_grad(), torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                                             enabled=amp):
            for name, chunk, left in self.CONFIGS:
                logp, out_len = encode(model, x, lengths, chunk, left, positions)
                logp, out_len = logp.float().cpu(), out_len.cpu()
                errs, words = [0, 0], [0, 0]
                for k, ref in enumerate(self.refs):
                    hyp = self.tok.decode(greedy_decode(logp[k], int(out_len[k]))).split()
                    g = int(self.heldout[k])
                    errs[g] += edit_distance(ref, hyp)
                    words[g] += len(ref)
                parts.append(f"{name}: trained voices {100 * errs[0] / max(words[0], 1):.1f}% "
                             f"held-out voices {100 * errs[1] / max(words[1], 1):.1f}%")
        model.train()
        return "; ".join(parts)


def build_model(a, vocab: int) -> ConformerCtcModel:
    cfg = ModelConfig(output_dim=vocab, output_size=a.output_size, attention_heads=a.heads,
                      linear_units=a.linear_units, num_blocks=a.num_blocks,
                      cnn_module_kernel=a.kernel, cnn_module_norm="layer_norm", causal=True,
                      input_layer="conv2d", static_chunk_size=0, use_dynamic_chunk=True)
    return ConformerCtcModel(cfg)


def init_weights(model: ConformerCtcModel, init_dir: str, tok: Tokenizer):
    """Loads an exported model directory's encoder and CTC weights and its
    global CMVN into `model` (float32), after checking that its units are
    this tokenizer's and its geometry is the model's."""
    with open(os.path.join(init_dir, "units.txt"), encoding="utf-8") as f:
        units = [line.split()[0] for line in f if line.strip()]
    if units != list(tok.units):
        sys.exit(f"train: --init {init_dir}: its units.txt is not this tokenizer's "
                 f"({len(units)} units against {tok.vocab_size})")
    source = model_dir.load_model_dir(init_dir)
    mine = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in source.state_dict().items()}
    if mine != theirs:
        diff = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        sys.exit(f"train: --init {init_dir}: another geometry ({len(diff)} tensors differ, "
                 f"e.g. {diff[0]}: {theirs.get(diff[0])} against {mine.get(diff[0])})")
    model.load_state_dict(source.state_dict())


def lr_at(a, step: int, progress: float) -> float:
    warm = min(1.0, (step + 1) / a.warmup_steps)
    decay = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return a.lr * warm * max(decay, a.final_lr_ratio)


def export(model: ConformerCtcModel, tok: Tokenizer, out_dir: str, max_file_mib: float):
    """Writes the model directory (float16) and splits large files."""
    model = model.to("cpu").float().eval()
    for stale in glob.glob(os.path.join(out_dir, "model.safetensors*")):
        os.remove(stale)
    model_dir.write_model_dir(model, out_dir, dtype="float16", chunk_size=16, num_left_chunks=4,
                              units=tok.units)
    files = checkpoint.split_file(os.path.join(out_dir, "model.safetensors"),
                                  int(max_file_mib * 1024 * 1024))
    return files


def main(argv=None, epoch_hook=None):
    """epoch_hook(epoch), when given, is called at every epoch boundary
    before the shards are looked at again (tests write a shard there)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--tokenizer", required=True, help="folder with bpe.model")
    p.add_argument("--work", required=True, help="checkpoints and logs")
    p.add_argument("--export", help="model directory to write at the end")
    p.add_argument("--resume", help="checkpoint folder (default: newest under WORK/ckpt)")
    p.add_argument("--init", help="start from the weights and CMVN of an exported model "
                                  "directory (the same geometry and units as this run's); a "
                                  "fresh optimizer, warm-up and schedule; ignored when a "
                                  "checkpoint resumes the run")
    p.add_argument("--num-blocks", type=int, default=12)
    p.add_argument("--output-size", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--linear-units", type=int, default=1024)
    p.add_argument("--kernel", type=int, default=15)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--freq-warp", type=float, default=0.1,
                   help="vocal tract length perturbation: mel axis scaled by 1 +- this (0: off)")
    p.add_argument("--batch-frames", type=int, default=120000,
                   help="padded fbank frames a batch (of the clean audio: speed perturbation "
                        "may lengthen a batch by up to 11 %%)")
    p.add_argument("--reload-shards", action=argparse.BooleanOptionalAction, default=True,
                   help="at every epoch boundary, add the utterances of shards that appeared "
                        "since (synth.py --train-only running beside training)")
    p.add_argument("--online-augment", action=argparse.BooleanOptionalAction, default=None,
                   help="fresh augmentation of every batch (augment.py) on the device; "
                        "default: on when the shards hold waveforms")
    p.add_argument("--augment", default="",
                   help="waveform shards: stages' probabilities of the augmentation at every "
                        "step, NAME=P[,NAME=P...] (augment.set_probabilities)")
    p.add_argument("--noise-clips", type=float, default=0.04,
                   help="clips of silence, noise, hum or clicks (augment.non_speech) added to "
                        "each batch, as a fraction of its utterances, with empty transcripts: "
                        "the model learns that they hold no words")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--final-lr-ratio", type=float, default=0.02)
    p.add_argument("--warmup-steps", type=int, default=1000)
    p.add_argument("--weight-decay", type=float, default=1e-3)
    p.add_argument("--max-minutes", type=float, default=11.0,
                   help="total training wall-clock budget, over all resumed runs")
    p.add_argument("--stop-after-minutes", type=float, default=None,
                   help="end this call after this long (checkpoint kept; resume later)")
    p.add_argument("--max-steps", type=int, default=0, help="0: until the time budget")
    p.add_argument("--ckpt-minutes", type=float, default=3.0)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch default)")
    p.add_argument("--max-file-mib", type=float, default=16)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sortagrad", action=argparse.BooleanOptionalAction, default=True,
                   help="first epoch in order of length, shortest first")
    p.add_argument("--eval-data", help="synth.py eval folder: log a held-out greedy WER")
    p.add_argument("--eval-per-voice", type=int, default=12)
    p.add_argument("--eval-minutes", type=float, default=1.5, help="minutes between WER logs")
    p.add_argument("--heldout-voices", default="", help="voices left out of training")
    p.add_argument("--exclude-voices", default="",
                   help="voice families (fnmatch patterns, comma-separated, e.g. "
                        "'festival:*,flite:kal*') whose utterances in the shards are not "
                        "trained on: leave-one-family-out runs from one synthesis")
    a = p.parse_args(argv)
    t_start = time.time()
    try:
        probabilities = augment.set_probabilities(a.augment)
    except ValueError as e:
        sys.exit(f"train: --augment: {e}")
    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    os.makedirs(a.work, exist_ok=True)

    tok = Tokenizer(os.path.join(a.tokenizer, "bpe.model"))
    paths = shard_paths(a.data)
    kind, utts, metas, other = load_shards(paths)
    if other:
        sys.exit(f"train: {a.data}/train mixes waveform and feature shards ({other[0]})")
    if not utts:
        sys.exit(f"train: no training utterances in {a.data}/train")
    online = kind == "wavs" if a.online_augment is None else a.online_augment
    if online and kind != "wavs":
        sys.exit("train: --online-augment needs waveform shards (synth.py --store wav); "
                 f"{a.data}/train holds features, augmented at synthesis")
    if a.augment and not online:
        sys.exit("train: --augment changes the augmentation of waveform shards at every step; "
                 f"{a.data}/train holds features (synth.py --augment changes theirs)")
    loaded = set(paths)
    exclude = [v for v in a.exclude_voices.split(",") if v]
    utts, frames, tokens, voices = select(kind, utts, metas, tok, online, exclude)
    left_out = sum(excluded(m["voice"], exclude) for m in metas) if exclude else 0
    if exclude:
        log(f"data: {left_out} utterances of {','.join(exclude)} left out (--exclude-voices)")
    dropped = len(metas) - len(utts) - left_out
    if not utts:
        sys.exit(f"train: no training utterances left in {a.data}/train ({left_out} of "
                 f"--exclude-voices {a.exclude_voices!r}, {dropped} too short for CTC)")
    store = (WaveFeatures(utts, device, online) if kind == "wavs"
             else FeatureStore(utts, device))
    del utts, metas
    hours = sum(frames) / 100 / 3600
    utterances_at_start = len(frames)
    log(f"data: {len(frames)} utterances ({'waveforms' if kind == 'wavs' else 'features'}, "
        f"online augmentation {'on' if online else 'off'}), {hours:.2f} h, {dropped} dropped "
        f"(too short for CTC), {len(set(voices))} voices, {tok.vocab_size} units; "
        f"loaded in {time.time() - t_start:.0f} s")

    def reload_shards():
        """Appends the utterances of shards that appeared since the last look
        (synth.py --train-only, running beside training) to the store,
        `frames` and `tokens`, at the next indices."""
        t0 = time.time()
        new = [p for p in shard_paths(a.data) if p not in loaded]
        if not new:
            return
        loaded.update(new)
        _, utts, metas, other = load_shards(new, kind)
        for path in other:
            log(f"data: {path} is not a {kind} shard; left out")
        utts, more, toks, _ = select(kind, utts, metas, tok, online, exclude)
        store.append(utts)
        frames.extend(more)
        tokens.extend(toks)
        log(f"data: +{len(more)} utterances, +{sum(more) / 360000:.2f} h from {len(new)} new "
            f"shards ({len(metas) - len(more)} dropped), now {len(frames)} utterances, "
            f"{sum(frames) / 360000:.2f} h; loaded in {time.time() - t0:.1f} s")

    held = (HeldOut(a.eval_data, a.eval_per_voice, set(a.heldout_voices.split(",")), tok,
                    exclude) if a.eval_data else None)
    model = build_model(a, tok.vocab_size)
    nparams = sum(p.numel() for p in model.parameters())
    step, train_seconds, epoch, start_batch = 0, 0.0, 0, 0
    resume = a.resume or checkpoint.latest(os.path.join(a.work, "ckpt"))
    state = checkpoint.load(resume) if resume else None
    if state:
        model.load_state_dict(state["model"])
    model.to(device)
    # Created after the move, so that load_state_dict puts the optimizer's
    # state where its parameters are (and keeps Adam's step counters on CPU).
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), eps=1e-9,
                            weight_decay=a.weight_decay)
    if state:
        opt.load_state_dict(state["optimizer"])
        step, train_seconds, epoch = state["step"], state["train_seconds"], state["epoch"]
        start_batch = state.get("batch", 0)
        log(f"resumed from {resume}: step {step}, {train_seconds / 60:.1f} min trained")
    elif a.init:
        init_weights(model, a.init, tok)  # copied into the parameters on the device
        log(f"initialized from {a.init} (its weights and CMVN)")
    else:
        stats = cmvn_stats(store, make_batches(frames, a.batch_frames, random.Random(a.seed),
                                               shuffle=False))
        mean, istd = frontend.cmvn_from_stats(stats)
        model.encoder.global_cmvn.mean.copy_(mean.to(device))
        model.encoder.global_cmvn.istd.copy_(istd.to(device))
        with open(os.path.join(a.work, "global_cmvn"), "w", encoding="utf-8") as f:
            json.dump(stats, f)
    log(f"model: {nparams / 1e6:.2f} M parameters ({nparams * 2 / 1e6:.1f} MB in float16), "
        f"device {device}")
    # A stream of its own (not gen's or rng's), restarted per step like them.
    store.reseed(random.Random(f"augment/{a.seed}/{step}").getrandbits(62))
    add_dropout_hooks(model, a.dropout)
    positions = PositionCache(a.output_size)
    rng = random.Random(a.seed * 1000 + step)
    gen = torch.Generator().manual_seed(a.seed * 1000 + step)
    ctc = torch.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    amp = device.type == "cuda"

    def save_ckpt():
        path = os.path.join(a.work, "ckpt", f"step{step}")
        checkpoint.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                         "train_seconds": train_seconds, "epoch": epoch, "batch": batch_in_epoch,
                         "args": vars(a)}, path)
        for old in glob.glob(os.path.join(a.work, "ckpt", "step*")):
            if old != path:
                shutil.rmtree(old, ignore_errors=True)
        log(f"checkpoint {path}")

    model.train()
    call_start = time.time()
    last_ckpt = time.time()
    budget = a.max_minutes * 60
    del state
    batch_in_epoch = start_batch
    last_eval = time.time()
    window = {"loss": 0.0, "utts": 0, "frames": 0, "t": time.time()}
    done = bool((a.max_steps and step >= a.max_steps) or train_seconds >= budget)
    while not done:
        batches = make_batches(frames, a.batch_frames, random.Random(a.seed + epoch),
                               shuffle=not (a.sortagrad and epoch == 0))
        for idx in batches[start_batch:]:
            t0 = time.time()
            extra = int(len(idx) * a.noise_clips + rng.random()) if a.noise_clips else 0
            x, lengths = store.batch(idx, extra) if extra else store.batch(idx)
            targets, tlens = batch_targets(idx, tokens, device)
            if extra:  # the non-speech clips' transcripts are empty
                tlens = torch.cat([tlens, torch.zeros(extra, dtype=tlens.dtype, device=device)])
            max_out = int(output_lengths(torch.tensor(x.size(1))))
            chunk, left = dynamic_chunk(max_out, rng)
            progress = step / a.max_steps if a.max_steps else train_seconds / budget
            for g in opt.param_groups:
                g["lr"] = lr_at(a, step, progress)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
                logp, out_len = encode(model, x, lengths, chunk, left, positions, gen, a.freq_warp)
            loss = ctc(logp.transpose(0, 1), targets, out_len, tlens) / (len(idx) + extra)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            if torch.isfinite(grad_norm):
                opt.step()
            step += 1
            lv = float(loss.detach())
            train_seconds += time.time() - t0
            window["loss"] += lv * (len(idx) + extra)
            window["utts"] += len(idx) + extra
            window["frames"] += sum(frames[i] for i in idx)
            batch_in_epoch += 1
            if step % a.log_every == 0:
                dt = time.time() - window["t"]
                log(f"step {step} epoch {epoch} loss {window['loss'] / window['utts']:.3f} "
                    f"lr {opt.param_groups[0]['lr']:.2e} grad {float(grad_norm):.2f} "
                    f"chunk {chunk}/{left} {window['frames'] / 100 / dt:.0f} s audio/s "
                    f"trained {train_seconds / 60:.2f} min")
                window = {"loss": 0.0, "utts": 0, "frames": 0, "t": time.time()}
            if (a.max_steps and step >= a.max_steps) or train_seconds >= budget:
                done = True
            elif a.stop_after_minutes and time.time() - call_start >= a.stop_after_minutes * 60:
                done = True
            elif time.time() - last_ckpt >= a.ckpt_minutes * 60:
                save_ckpt()
                last_ckpt = time.time()
            if held and (done or time.time() - last_eval >= a.eval_minutes * 60):
                log(f"held-out WER at step {step} (greedy, 640 ms chunks): "
                    f"{held.wer(model, device, positions, amp)}")
                last_eval = time.time()
            if done:
                break
        else:
            epoch += 1
            start_batch = batch_in_epoch = 0
            if epoch_hook:
                epoch_hook(epoch)
            if a.reload_shards:
                reload_shards()
    save_ckpt()
    finished = (a.max_steps and step >= a.max_steps) or train_seconds >= budget
    summary = {"steps": step, "epochs": epoch, "train_minutes": round(train_seconds / 60, 2),
               "utterances": len(frames), "hours": round(sum(frames) / 360000, 3),
               "utterances_added": len(frames) - utterances_at_start, "parameters": nparams,
               "data": kind, "online_augment": online, "noise_clips": a.noise_clips,
               "init": a.init, "augment": probabilities if online else None,
               "excluded_voices": exclude,
               "finished": bool(finished)}
    if a.export and finished:
        files = export(model, tok, a.export, a.max_file_mib)
        summary["export"] = [os.path.basename(f) for f in files]
    with open(os.path.join(a.work, "train_summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    log("train: " + json.dumps(summary))


if __name__ == "__main__":
    main()
