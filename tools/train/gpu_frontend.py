"""Training input made on the training device: waveforms -> fresh
augmentation -> Kaldi fbank, one padded batch at a time.

synth.py stores the clean 16 kHz waveforms (int16). Training keeps all of
them in one flat tensor on its device (WaveStore: 60 h are ~7 GB), and each
step turns a batch of them into features there:
  1. a gather into a zero-padded (B, N) float batch in [-1, 1);
  2. a fresh random augmentation of every utterance (augment.py: speed,
     reverberation, telephone band, noise, peak level; `augment_batch`), so
     every epoch hears each sentence differently;
  3. BatchFbank: torchaudio.compliance.kaldi.fbank's maths (the reference
     front end, tools/reference/frontend.fbank, which the C++ server is tested
     against) on the whole batch at once: (B, T, 80) log-mel, zero beyond
     each utterance's 1 + (n - 400) // 160 frames.
Lengths are exact at every stage; padding is zero after every stage.

    python3 -m tools.train.gpu_frontend --utts 200 --seconds 6 --device cuda

times steps 1-3 on a batch of synthetic speech.
"""

import argparse
import time

import torch
import torchaudio

from tools.reference import frontend
from tools.train import augment

FRAME_LENGTH = 400  # samples: 25 ms
FRAME_SHIFT = 160  # 10 ms
PADDED_WINDOW = 512
PREEMPHASIS = 0.97
LOW_FREQ, HIGH_FREQ = 20.0, 0.0  # Kaldi's defaults (0: Nyquist)


def frame_lengths(samples: torch.Tensor) -> torch.Tensor:
    """Fbank frames of utterances of `samples` samples (snip_edges)."""
    return torch.where(samples >= FRAME_LENGTH, 1 + (samples - FRAME_LENGTH) // FRAME_SHIFT,
                       torch.zeros_like(samples))


def shortest_samples(samples: torch.Tensor, online_augment: bool) -> torch.Tensor:
    """Each utterance's shortest length after augmentation (at the fastest
    speed, then the fastest tempo), for the CTC length check."""
    n = samples
    if online_augment:
        for factor, _ in augment.SPEED_CHOICES:
            n = torch.minimum(n, augment.resampled_length(samples, *augment.speed_rates(factor)))
        n = torch.minimum(n, augment.tempo_length(n, max(augment.TEMPO_FACTORS)))
    return n


class BatchFbank:
    """Kaldi fbank (frontend.fbank's settings: dither 0, energy floor 0,
    25/10 ms frames, snip_edges, DC removal, pre-emphasis 0.97, povey window,
    512-point power spectrum, 80 mel bins from 20 Hz to Nyquist, log) of a
    padded batch of waveforms in [-1, 1)."""

    def __init__(self, device):
        self.window = torch.hann_window(FRAME_LENGTH, periodic=False,
                                        dtype=torch.float32).pow(0.85).to(device)
        mel, _ = torchaudio.compliance.kaldi.get_mel_banks(
            frontend.NUM_MEL_BINS, PADDED_WINDOW, float(frontend.SAMPLE_RATE), LOW_FREQ, HIGH_FREQ,
            100.0, -500.0, 1.0)
        # (257, 80): the mel banks plus a zero row for the Nyquist bin.
        mel = torch.nn.functional.pad(mel.to(torch.float32), (0, 1))
        self.mel = mel.t().contiguous().to(device)
        self.eps = torch.finfo(torch.float32).eps

    def __call__(self, wav: torch.Tensor, lengths: torch.Tensor):
        """wav (B, N) float, zero-padded; lengths (B,) samples ->
        (features (B, T, 80) float32, frame lengths (B,) on wav's device)."""
        if wav.size(1) < FRAME_LENGTH:
            wav = torch.nn.functional.pad(wav, (0, FRAME_LENGTH - wav.size(1)))
        frames = (wav.float() * 32768.0).unfold(1, FRAME_LENGTH, FRAME_SHIFT)  # (B, T, 400)
        frames = frames - frames.mean(2, keepdim=True)
        previous = torch.cat([frames[..., :1], frames[..., :-1]], 2)
        frames = (frames - PREEMPHASIS * previous) * self.window
        power = torch.fft.rfft(frames, PADDED_WINDOW).abs().pow(2.0)
        feats = torch.matmul(power, self.mel).clamp(min=self.eps).log()
        flen = frame_lengths(lengths.to(wav.device))
        valid = torch.arange(feats.size(1), device=wav.device).unsqueeze(0) < flen.unsqueeze(1)
        return feats * valid.unsqueeze(2), flen


class FlatStore:
    """Variable-length tensors (their first dimension varies) concatenated in
    one flat tensor on a device, with lengths (CPU) and start offsets (on the
    device). `append` adds utterances at the next indices: the earlier ones
    keep their indices and contents. dtype None: the first items' dtype."""

    def __init__(self, items, device, dtype=None):
        self.device = torch.device(device)
        self.dtype = dtype
        self.lengths = torch.zeros(0, dtype=torch.long)
        self.offsets = torch.zeros(0, dtype=torch.long, device=self.device)
        self.flat = None
        self.append(items)

    def __len__(self):
        return self.lengths.numel()

    def append(self, items):
        """Adds `items` at indices len(self) ..; the flat tensor is
        concatenated anew on the device (it briefly holds the old one twice)."""
        if not items:
            return
        lengths = torch.tensor([t.size(0) for t in items], dtype=torch.long)
        start = 0 if self.flat is None else self.flat.size(0)
        offsets = start + torch.cumsum(lengths, 0) - lengths
        dtype = self.dtype or (items[0].dtype if self.flat is None else self.flat.dtype)
        flat = torch.cat([t.to(dtype) for t in items]).to(self.device)
        self.flat = flat if self.flat is None else torch.cat([self.flat, flat])
        self.lengths = torch.cat([self.lengths, lengths])
        self.offsets = torch.cat([self.offsets, offsets.to(self.device)])

    def rows(self, idx):
        """(indices into flat (B, T) on the device, 0 beyond each utterance;
        valid (B, T) on the device; lengths (B,) on the CPU) of utterances idx."""
        idx = torch.as_tensor(idx, dtype=torch.long)
        lengths = self.lengths[idx]
        t = torch.arange(int(lengths.max()), device=self.device)
        valid = t.unsqueeze(0) < lengths.to(self.device).unsqueeze(1)
        rows = torch.where(valid, self.offsets[idx.to(self.device)].unsqueeze(1) + t, 0)
        return rows, valid, lengths


class WaveStore(FlatStore):
    """Every utterance's int16 samples in one flat tensor on the device; a
    batch is one gather there."""

    def __init__(self, wavs, device):
        super().__init__(wavs, device, torch.int16)

    def batch(self, idx):
        """(waveforms (B, N) float32 in [-1, 1) on the device, zero beyond
        each utterance; lengths (B,) int64 on the CPU)."""
        rows, valid, lengths = self.rows(idx)
        return self.flat[rows].float() * (valid / 32768.0), lengths


def non_speech_clips(count: int, longest: int, params_gen: torch.Generator,
                     noise_gen: torch.Generator, device):
    """(clips (count, N) on `device`, lengths (count,) CPU) of audio with no
    speech (augment.non_speech), lengths uniform from 0.5 s to `longest`
    samples; N is `longest` (at least 0.5 s and a sample)."""
    longest = max(longest, augment.SAMPLE_RATE // 2 + 1)
    n = torch.randint(augment.SAMPLE_RATE // 2, longest, (count,), generator=params_gen)
    clips, _ = augment.non_speech(n, longest, params_gen, noise_gen, device)
    return clips, n


class WaveFeatures:
    """Training batches from waveforms: WaveStore gather, fresh augmentation
    (when `online_augment`), BatchFbank. `batch(idx)` returns what
    train.FeatureStore.batch returns: (features (B, T, 80) float32, frame
    lengths (B,)) on the device."""

    def __init__(self, wavs, device, online_augment: bool, seed: int = 0):
        self.store = WaveStore(wavs, device)
        self.fbank = BatchFbank(device)
        self.online_augment = online_augment
        self.reseed(seed)

    def reseed(self, seed: int):
        """Parameters come from a CPU generator, noise and room responses
        from one on the device; both restart from `seed` (resumable runs)."""
        self.params_gen = torch.Generator().manual_seed(seed)
        self.noise_gen = torch.Generator(device=self.store.device).manual_seed(seed)

    def waveforms(self, idx):
        """(augmented waveforms (B, N), lengths (B,) CPU) of utterances idx."""
        wav, lengths = self.store.batch(idx)
        if self.online_augment:
            p = augment.draw(len(idx), self.params_gen)
            wav, lengths = augment.augment_batch(wav, lengths, p, self.noise_gen)
        return wav, lengths

    def batch(self, idx, non_speech: int = 0):
        """Features of utterances idx, then of `non_speech` clips with no
        speech (augment.non_speech; lengths uniform from 0.5 s to the
        batch's longest utterance, so the batch does not grow), in that order."""
        wav, lengths = self.waveforms(idx)
        if non_speech:
            clips, n = non_speech_clips(non_speech, int(lengths.max()), self.params_gen,
                                        self.noise_gen, wav.device)
            longest = clips.size(1)
            wav = torch.cat([torch.nn.functional.pad(wav, (0, longest - wav.size(1))), clips])
            lengths = torch.cat([lengths, n])
        return self.fbank(wav, lengths)

    def append(self, wavs):
        """Adds utterances at the next indices (WaveStore.append)."""
        self.store.append(wavs)

    def __len__(self):
        return len(self.store)


def main(argv=None):
    p = argparse.ArgumentParser(description="times WaveStore gather + augmentation + fbank")
    p.add_argument("--utts", type=int, default=200)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    base = (frontend.synthetic_speech(a.seconds, 1) * 32767).round().to(torch.int16)
    # Lengths from 90 % to 100 % of --seconds, as in a length-sorted batch.
    wavs = [base[: int(base.numel() * (0.9 + 0.1 * k / max(a.utts - 1, 1)))] for k in range(a.utts)]
    data = WaveFeatures(wavs, device, online_augment=True, seed=1)
    idx = list(range(a.utts))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    times = {"gather": [], "augment": [], "fbank": []}
    for r in range(a.repeat + 1):
        sync()
        t0 = time.time()
        wav, lengths = data.store.batch(idx)
        sync()
        t1 = time.time()
        p_ = augment.draw(len(idx), data.params_gen)
        wav, lengths = augment.augment_batch(wav, lengths, p_, data.noise_gen)
        sync()
        t2 = time.time()
        feats, flen = data.fbank(wav, lengths)
        sync()
        t3 = time.time()
        if r:  # the first round warms up (kernels, caches)
            for k, v in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
                times[k].append(v)
    frames = int(flen.sum())
    ms = {k: round(1000 * sum(v) / len(v), 1) for k, v in times.items()}
    print(f"gpu_frontend: {a.utts} utterances x {a.seconds} s on {device} "
          f"({torch.get_num_threads()} threads), {frames} frames out: {ms} ms per batch "
          f"(mean of {a.repeat}), total {sum(ms.values()):.1f} ms")


if __name__ == "__main__":
    main()
