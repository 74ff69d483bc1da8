"""Synthesizes training and evaluation speech with Debian's English voices.

Voice families (one family = one synthesizer voice or espeak-ng accent):
  espeak:<accent>   espeak-ng's English accents, each with random variants
                    (+m1..+m8, +f1..+f5 and named ones, whispered ones
                    among them), rate, pitch, volume;
  flite:<voice>     flite's built-in voices (kal, kal16, awb, rms, slt) with
                    random duration stretch and mean pitch;
  festival:<voice>  festival's English voices (kal_diphone, ked_diphone,
                    cmu_us_slt_arctic_hts) with random duration stretch;
                    for training, the HTS voice (cmu_us_slt_arctic_hts)
                    is a random speaker of its own (vocal-tract warp,
                    pitch, rate) through libHTSEngine (hts.py)
                    where that library is installed.
Families in --heldout-voices are never used for training, only for the
evaluation set, so their WER shows how far the model generalises.

Training utterances go into shards of 25 under OUT/train/ (shardNNNNN.pt,
{"wavs" or "feats": [...], "meta": [{text, voice, settings, seconds, codec?}]}):
  --store wav (default): the 16 kHz waveform, an int16 tensor per
      utterance. train.py augments them afresh at every step on its device
      (augment.py through gpu_frontend.py), so no augmentation happens here
      but one: --codec-share of them (default 12 %) have been through a GSM,
      Opus or G.722 round trip (codecs.py; meta "codec" says which), a codec
      being too slow to run at every training step;
  --store feats (the older flow): augmented once here (augment.augment, its
      description in meta "aug") and stored as float16 fbank features.
Evaluation utterances (held-out sentences, every family, clean, default voice
settings with a fixed variant) are stored as 16 kHz int16 WAV files under
OUT/eval/ with OUT/eval/eval.jsonl.
Everything is seeded per utterance, so a run here and a run on the GPU
machine produce the same evaluation audio from the same synthesizer build.

    python3 -m tools.train.synth --corpus tools/train/corpus --out WORK/data \
        --workers 16 --max-train 60000 --max-minutes 4

With --max-train 0 only the evaluation set is written (to --eval-out, or
OUT/eval), e.g. to evaluate a model on a machine other than the one that
trained it.

A rerun skips the shards that exist (each is written to a .tmp file and
renamed into place), so it continues the same plan; the plan's first N
utterances do not depend on --max-train. A plain rerun writes the evaluation
set (WAVs, eval.jsonl) and synth_summary.json again. --train-only (what
run_gpu.sh runs beside training, which reads the evaluation set and the
shards meanwhile) only adds the missing training shards: the training voices
and store come from OUT/synth_summary.json, nothing of the evaluation set or
the summary is written, its own summary is a line appended to
OUT/synth_added.jsonl, and SIGTERM ends it as the time budget does (in-flight
shards are dropped).
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import wave
import multiprocessing as mp

import torch

from tools.reference import frontend
from tools.train import augment, codecs, hts
from tools.train.augment import to_int16
from tools.train.corpus import read_lines

SAMPLE_RATE = 16000
ESPEAK_ACCENTS = ["en-us", "en", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan",
                  "en-gb-x-gbcwmd", "en-029", "en-us-nyc"]
ESPEAK_VARIANTS = (["m%d" % i for i in range(1, 9)] + ["f%d" % i for i in range(1, 6)]
                   + ["Alex", "Andy", "Annie", "Denis", "Gene", "Jacky", "Lee", "Mario",
                      "Michael", "adam", "aunty", "belinda", "benjamin", "david", "ed",
                      "edward", "iven", "john", "linda", "max", "paul", "quincy", "robert",
                      "steph", "travis", "victor", "zac", "klatt", "klatt2", "klatt3",
                      # Whispered speech (no voicing), and older voices.
                      "whisper", "whisperf", "croak", "grandma", "grandpa"])
FLITE_VOICES = {"kal": (90, 130), "kal16": (90, 130), "awb": (90, 130),
                "rms": (80, 120), "slt": (150, 210)}
FESTIVAL_VOICES = ["kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts"]
ALL_FAMILIES = (["espeak:" + a for a in ESPEAK_ACCENTS] + ["flite:" + v for v in FLITE_VOICES]
                + ["festival:" + v for v in FESTIVAL_VOICES])
DEFAULT_HELDOUT = "espeak:en-029,flite:rms"
# Share of training utterances per synthesizer (espeak-ng has by far the
# most voices; the others are fewer but sound more natural).
ENGINE_WEIGHTS = {"espeak": 0.55, "flite": 0.25, "festival": 0.20}


def read_wav(path: str):
    """(float32 tensor in [-1, 1), sample rate) of a 16-bit PCM mono WAV."""
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: expected 16-bit PCM")
        rate, channels, n = w.getframerate(), w.getnchannels(), w.getnframes()
        data = w.readframes(n)
    x = torch.frombuffer(bytearray(data), dtype=torch.int16).to(torch.float32) / 32768.0
    if channels > 1:
        x = x.view(-1, channels).mean(1)
    return x, rate


def write_wav(path: str, x: torch.Tensor):
    pcm = to_int16(x)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.numpy().tobytes())


def voice_settings(family: str, rng: random.Random, clean: bool) -> dict:
    """Random (or, for clean evaluation audio, default) settings of a family."""
    engine, name = family.split(":", 1)
    if engine == "espeak":
        if clean:
            return {"variant": ESPEAK_VARIANTS[rng.randrange(13)], "speed": 165, "pitch": 50,
                    "amplitude": 100}
        return {"variant": rng.choice(ESPEAK_VARIANTS), "speed": rng.randint(130, 210),
                "pitch": rng.randint(25, 80), "amplitude": rng.randint(70, 150)}
    if engine == "flite":
        lo, hi = FLITE_VOICES[name]
        if clean:
            return {"stretch": 1.0, "f0": None}
        return {"stretch": round(rng.uniform(0.8, 1.25), 3), "f0": rng.randint(lo, hi)}
    if clean:
        return {"stretch": 1.0}
    s = {"stretch": round(rng.uniform(0.8, 1.25), 3)}
    if name == hts.VOICE and HTS_SPEAKERS and _hts_voice() is not None:
        s.update(hts.draw(rng))  # a speaker of its own: libHTSEngine synthesizes it
    return s


# --hts-speakers (set before the workers fork). An HTS utterance through
# libHTSEngine costs ~1.7x festival's own (the labels and the engine: 168
# against 100 ms for ~3 s on one core here), about 15 % of the synthesis'
# throughput at the default engine shares.
HTS_SPEAKERS = True
_HTS = {}


def _hts_voice():
    """This process's hts.HtsVoice for festvox-us-slt-hts, or None where
    libHTSEngine or the voice is missing (festival then synthesizes it with
    its duration stretch only)."""
    if "voice" not in _HTS:
        path = hts.find_voice() if hts.available() else None
        _HTS["voice"] = hts.HtsVoice(path) if path else None
    return _HTS["voice"]


# The end of the last synthesizer run's output per engine, for the probe to
# say why a voice does not work.
LAST_OUTPUT = {}


def _run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    LAST_OUTPUT[os.path.basename(cmd[0])] = (
        f"exit {r.returncode}: " + r.stdout.decode(errors="replace")[-600:])
    if r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, cmd)


def synthesize(items, tmp: str):
    """items: [(family, text, settings)] of one engine -> [waveform at 16 kHz
    or None where the synthesizer failed]."""
    engine = items[0][0].split(":", 1)[0]
    # A folder of its own per call: a synthesizer that fails on an item must
    # leave no file, never an earlier call's file under the same name (that
    # would pair one sentence's audio with another's text).
    tmp = tempfile.mkdtemp(prefix=engine, dir=tmp)
    paths = [os.path.join(tmp, f"u{i}.wav") for i in range(len(items))]
    # Items with a speaker drawn for libHTSEngine: festival writes their
    # labels (path .lab), the engine synthesizes them below.
    hts_items = [engine == "festival" and "alpha" in s for _, _, s in items]
    if engine == "festival":
        script = os.path.join(tmp, "batch.scm")
        with open(script, "w", encoding="utf-8") as f:
            if any(hts_items):
                f.write(hts.LABELS_SCHEME)
            for (family, text, s), path, labels in zip(items, paths, hts_items):
                f.write(f"(voice_{family.split(':', 1)[1]})\n")
                # Texts are normalised (a-z, apostrophe, space): no escaping.
                if labels:
                    f.write(f'(hts_labels "{text}" "{path[:-4]}.lab")\n')
                    continue
                f.write(f"(Parameter.set 'Duration_Stretch {s['stretch']})\n")
                f.write(f'(utt.save.wave (utt.synth (Utterance Text "{text}")) "{path}" \'riff)\n')
        cmd = ["festival"]
        libdir = os.environ.get("OASR_FESTIVAL_LIBDIR")
        if libdir:
            # Festival reads init.scm from its data directory: without
            # --datadir it looks in /usr/share/festival even with --libdir.
            cmd += ["--libdir", libdir, "--datadir", libdir]
        try:
            _run(cmd + ["-b", script])
        except subprocess.CalledProcessError:
            pass  # the files that were written are still used
    else:
        for (family, text, s), path in zip(items, paths):
            name = family.split(":", 1)[1]
            if engine == "espeak":
                cmd = ["espeak-ng", "-v", f"{name}+{s['variant']}", "-s", str(s["speed"]),
                       "-p", str(s["pitch"]), "-a", str(s["amplitude"]), "-w", path, text]
            else:
                cmd = ["flite", "-voice", name, "-t", text, "-o", path,
                       "--setf", f"duration_stretch={s['stretch']}"]
                if s["f0"]:
                    cmd += ["--setf", f"int_f0_target_mean={s['f0']}"]
            try:
                _run(cmd)
            except subprocess.CalledProcessError:
                pass
    out = []
    for (_, _, s), path, labels in zip(items, paths, hts_items):
        got = None
        if labels:
            lab = path[:-4] + ".lab"
            if os.path.exists(lab) and os.path.getsize(lab) > 0:
                got = _hts_voice().synthesize(lab, s["alpha"], s["half_tone"],
                                              1.0 / s["stretch"])
        elif os.path.exists(path) and os.path.getsize(path) > 44:
            got = read_wav(path)
        out.append(None if got is None else augment.resample(got[0], got[1], SAMPLE_RATE))
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def _train_job(job):
    """Synthesizes one job and writes its shard: clean int16 waveforms
    (store "wav") or augmented fbank features (store "feats")."""
    torch.set_num_threads(1)
    shard_path, seed, items, store, codec_share, edge_trim = job
    rng = random.Random(seed)
    codec_names = codecs.available() if codec_share > 0 else []
    by_engine = {}
    for idx, (family, text) in enumerate(items):
        settings = voice_settings(family, rng, clean=False)
        by_engine.setdefault(family.split(":")[0], []).append((idx, (family, text, settings)))
    utts, meta = [], []
    with tempfile.TemporaryDirectory(dir=os.environ.get("OASR_SYNTH_TMP")) as tmp:
        for engine, group in by_engine.items():
            waves = synthesize([g[1] for g in group], tmp)
            for (idx, (family, text, settings)), x in zip(group, waves):
                if x is None or x.numel() < SAMPLE_RATE // 5:
                    continue
                m = {"text": text, "voice": family, "settings": settings}
                if edge_trim > 0 and rng.random() < edge_trim:
                    x, m["edges"] = augment.trim_edges(x, rng)
                if codec_names and rng.random() < codec_share:
                    m["codec"] = codecs.draw(rng, codec_names)
                    x = codecs.round_trip(x, m["codec"])
                if store == "feats":
                    x, m["aug"] = augment.augment(x, rng)
                    utts.append(frontend.fbank(x).to(torch.float16))
                else:
                    utts.append(to_int16(x))
                m["seconds"] = round(x.numel() / SAMPLE_RATE, 3)
                meta.append(m)
    torch.save({"wavs" if store == "wav" else "feats": utts, "meta": meta}, shard_path + ".tmp")
    os.replace(shard_path + ".tmp", shard_path)
    return len(meta), sum(m["seconds"] for m in meta)


def _eval_job(job):
    torch.set_num_threads(1)
    out_dir, items = job
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("OASR_SYNTH_TMP")) as tmp:
        for family, text, utt_id, seed in items:
            settings = voice_settings(family, random.Random(seed), clean=True)
            x = synthesize([(family, text, settings)], tmp)[0]
            if x is None:
                continue
            rel = os.path.join(family.replace(":", "_"), utt_id + ".wav")
            os.makedirs(os.path.dirname(os.path.join(out_dir, rel)), exist_ok=True)
            write_wav(os.path.join(out_dir, rel), x)
            rows.append({"id": utt_id, "voice": family, "wav": rel, "text": text,
                         "settings": settings})
    return rows


def probe_families(families, tmp_root=None):
    """The families whose synthesizer works here (each says one word)."""
    ok = []
    with tempfile.TemporaryDirectory(dir=tmp_root) as tmp:
        for family in families:
            s = voice_settings(family, random.Random(0), clean=True)
            x = synthesize([(family, "hello", s)], tmp)[0]
            if x is not None and x.abs().max() > 0.01:
                ok.append(family)
            else:
                engine = {"espeak": "espeak-ng"}.get(family.split(":")[0], family.split(":")[0])
                print(f"synth: voice {family} does not work here; skipped "
                      f"({LAST_OUTPUT.get(engine, 'no output')!r})", file=sys.stderr)
    return ok


# --short-share: the word counts of a short phrase and their odds. People
# talk to a recognizer in single words and short phrases as often as in
# sentences ("yes", "call home", "a badger"); a model that has heard only
# sentences of 3-25 words inserts words around an isolated one.
SHORT_WORDS = ((1, 0.45), (2, 0.35), (3, 0.20))


def short_phrase(sentence: str, rng: random.Random) -> str:
    """A run of 1-3 consecutive words of `sentence` (SHORT_WORDS' odds)."""
    words = sentence.split()
    n = min(len(words), rng.choices([k for k, _ in SHORT_WORDS], [w for _, w in SHORT_WORDS])[0])
    start = rng.randrange(len(words) - n + 1)
    return " ".join(words[start:start + n])


def train_plan(sentences, families, count: int, seed: int, short_share: float = 0.0):
    """[(family, text)] for `count` training utterances: sentences in a
    seeded random order, families drawn with ENGINE_WEIGHTS; a `short_share`
    of them say only a short phrase of their sentence (short_phrase). The
    phrases draw from a generator of their own, so the families and
    sentences are the same plan at every share."""
    rng = random.Random(seed)
    short_rng = random.Random(seed * 7907 + 17)
    order = list(range(len(sentences)))
    rng.shuffle(order)
    engines = {}
    for f in families:
        engines.setdefault(f.split(":")[0], []).append(f)
    names = sorted(engines)
    weights = [ENGINE_WEIGHTS.get(e, 0.1) for e in names]
    plan = []
    for i in range(count):
        engine = rng.choices(names, weights)[0]
        text = sentences[order[i % len(order)]]
        if short_share > 0 and short_rng.random() < short_share:
            text = short_phrase(text, short_rng)
        plan.append((rng.choice(engines[engine]), text))
    return plan


def eval_plan(sentences, families, per_voice: int, seed: int):
    """[(family, text, utterance id, seed)] of the evaluation set: per family
    `per_voice` held-out sentences drawn in a seeded order."""
    erng = random.Random(seed + 1)
    items = []
    for fi, family in enumerate(families):
        picks = erng.sample(range(len(sentences)), min(per_voice, len(sentences)))
        for k, si in enumerate(picks):
            items.append((family, sentences[si], f"{family.replace(':', '_')}-{k:03d}",
                          seed * 100003 + fi * 1009 + k))
    return items


STOP_REQUESTED = False


def _request_stop(signum, frame):
    global STOP_REQUESTED
    STOP_REQUESTED = True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", required=True, help="folder with train.txt.gz, heldout.txt.gz")
    p.add_argument("--out", required=True)
    p.add_argument("--voices", default=",".join(ALL_FAMILIES))
    p.add_argument("--heldout-voices", default=DEFAULT_HELDOUT)
    p.add_argument("--max-train", type=int, default=60000,
                   help="training utterances (0: only the evaluation set)")
    p.add_argument("--eval-out", help="folder of the evaluation set (default OUT/eval)")
    p.add_argument("--eval-per-voice", type=int, default=40)
    p.add_argument("--job-size", type=int, default=25)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--max-minutes", type=float, default=4.0,
                   help="stop synthesizing training speech after this long")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train-only", action="store_true",
                   help="only add the plan's missing training shards (beside training): no "
                        "evaluation set, synth_summary.json left as it is (its training voices "
                        "and store are used), a line per run appended to OUT/synth_added.jsonl; "
                        "SIGTERM stops it as the time budget does")
    p.add_argument("--store", choices=("wav", "feats"), default="wav",
                   help="training shards hold clean int16 waveforms (augmented by train.py at "
                        "every step) or fbank features augmented here once")
    p.add_argument("--codec-share", type=float, default=0.12,
                   help="share of training utterances passed through a GSM 06.10, Opus or "
                        "G.722 round trip (codecs.py) once, here; codecs whose library is "
                        "missing are left out")
    p.add_argument("--short-share", type=float, default=0.2,
                   help="share of training utterances that say only 1-3 consecutive words of "
                        "their sentence (isolated words and short phrases); --train-only uses "
                        "the first run's share")
    p.add_argument("--edge-trim", type=float, default=0.5,
                   help="share of training utterances whose leading and trailing silence is "
                        "cut to 0-0.1 s and 0.02-0.15 s (augment.trim_edges), as people's "
                        "recordings have; --train-only uses the first run's share")
    p.add_argument("--hts-speakers", action=argparse.BooleanOptionalAction, default=True,
                   help="the HTS voice as a random speaker per training utterance "
                        "(libHTSEngine, hts.py); off: festival's own synthesis with its rate")
    p.add_argument("--augment", default="",
                   help="--store feats: stages' probabilities for a recipe comparison, "
                        "NAME=P[,NAME=P...] of " + ", ".join(augment.STAGE_PROBABILITIES)
                        + " (augment.set_probabilities; recorded in synth_summary.json)")
    a = p.parse_args(argv)

    t0 = time.time()
    if a.augment and a.store != "feats":
        sys.exit("synth: --augment changes the augmentation at synthesis (--store feats); "
                 "train.py --augment changes it for waveform shards")
    global HTS_SPEAKERS
    HTS_SPEAKERS = a.hts_speakers  # before the workers are forked, as below
    try:
        # Set before the workers are forked: they inherit it.
        probabilities = augment.set_probabilities(a.augment)
    except ValueError as e:
        sys.exit(f"synth: --augment: {e}")
    if not 0.0 <= a.short_share <= 1.0 or not 0.0 <= a.edge_trim <= 1.0:
        sys.exit("synth: --short-share and --edge-trim must be within 0..1")
    if a.train_only and a.max_train <= 0:
        sys.exit("synth: --train-only needs --max-train > 0")
    first = os.path.join(a.out, "synth_summary.json")
    if a.train_only and os.path.exists(first):
        # The first run's training voices, so that the plan is its plan.
        with open(first, encoding="utf-8") as f:
            done = json.load(f)
        if done["store"] != a.store:
            sys.exit(f"synth: {a.out} holds --store {done['store']} shards, not {a.store}")
        families, heldout = done["train_voices"], done["heldout_voices"]
        a.short_share = done.get("short_share", 0.0)
        a.edge_trim = done.get("edge_trim", 0.0)
    else:
        requested = [v for v in a.voices.split(",") if v]
        unknown = [v for v in requested if v not in ALL_FAMILIES]
        if unknown:
            sys.exit(f"synth: unknown voices {unknown}; known: {ALL_FAMILIES}")
        families = probe_families(requested)
        heldout = [v for v in families if v in a.heldout_voices.split(",")]
    train_families = [v for v in families if v not in heldout]
    if not train_families and a.max_train > 0:
        sys.exit("synth: no working training voice")
    train_dir = os.path.join(a.out, "train")
    if a.max_train > 0:
        os.makedirs(train_dir, exist_ok=True)
    eval_dir = a.eval_out or os.path.join(a.out, "eval")
    eval_jobs = []
    if not a.train_only:
        os.makedirs(eval_dir, exist_ok=True)
        heldout_sents = read_lines(os.path.join(a.corpus, "heldout.txt.gz"))
        eval_items = eval_plan(heldout_sents, families, a.eval_per_voice, a.seed)
        eval_jobs = [(eval_dir, eval_items[i:i + a.job_size])
                     for i in range(0, len(eval_items), a.job_size)]

    if a.max_train > 0 and a.codec_share > 0:
        missing = [c for c in codecs.LIBRARIES if c not in codecs.available()]
        if missing:
            packages = ", ".join(codecs.PACKAGES[c] for c in missing)
            print(f"synth: codecs {missing} not installed here ({packages}); the "
                  f"codec share uses {codecs.available() or 'none'}", file=sys.stderr)
    jobs = []
    if a.max_train > 0:
        sentences = read_lines(os.path.join(a.corpus, "train.txt.gz"))
        plan = train_plan(sentences, train_families, a.max_train, a.seed, a.short_share)
        jobs = [(os.path.join(train_dir, f"shard{j:05d}.pt"), a.seed * 7919 + j,
                 plan[i:i + a.job_size], a.store, a.codec_share, a.edge_trim)
                for j, i in enumerate(range(0, len(plan), a.job_size))]
        jobs = [j for j in jobs if not os.path.exists(j[0])]  # resumable

    rows = []
    utts = seconds = 0.0
    shards = 0
    stopped = "plan done"
    with mp.get_context("fork").Pool(a.workers, initializer=signal.signal,
                                     initargs=(signal.SIGTERM, signal.SIG_DFL)) as pool:
        if a.train_only:
            # Stops as at the time budget (run_gpu.sh ends it when training
            # ends). Installed after the workers are forked, so that they
            # start with the default action: a worker that never reaches
            # its initializer still dies on pool.terminate's SIGTERM.
            signal.signal(signal.SIGTERM, _request_stop)
        for r in pool.imap_unordered(_eval_job, eval_jobs):
            rows.extend(r)
        deadline = t0 + a.max_minutes * 60
        results = pool.imap_unordered(_train_job, jobs)
        while True:
            try:
                n, s = results.next(timeout=1.0)
                utts += n
                seconds += s
                shards += 1
            except StopIteration:
                break
            except mp.TimeoutError:
                pass
            if time.time() > deadline or STOP_REQUESTED:
                stopped = "stopped by SIGTERM" if STOP_REQUESTED else "time budget reached"
                print(f"synth: {stopped}; stopping", flush=True)
                pool.terminate()
                break
    for leftover in os.listdir(train_dir) if a.max_train > 0 else []:
        if leftover.endswith(".tmp"):
            os.remove(os.path.join(train_dir, leftover))
    summary = {"train_voices": train_families, "heldout_voices": heldout, "store": a.store,
               "codecs": codecs.available() if a.codec_share > 0 else [],
               "augment": probabilities if a.store == "feats" else None,
               "hts_speakers": bool(HTS_SPEAKERS and _hts_voice() is not None),
               "codec_share": a.codec_share, "short_share": a.short_share,
               "edge_trim": a.edge_trim,
               "new_train_utterances": int(utts), "new_train_hours": round(seconds / 3600, 3),
               "minutes": round((time.time() - t0) / 60, 2)}
    if a.train_only:
        # The evaluation set and synth_summary.json stay the first run's
        # (training reads them while this runs); one line per run here.
        summary.update(new_shards=shards, shards_left=len(jobs) - shards, stopped=stopped)
        with open(os.path.join(a.out, "synth_added.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(summary) + "\n")
    else:
        rows.sort(key=lambda r: r["id"])
        with open(os.path.join(eval_dir, "eval.jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        summary["eval_utterances"] = len(rows)
        with open(first, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
    print("synth:", json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
