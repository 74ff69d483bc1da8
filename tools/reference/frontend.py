"""Front end of the reference: Kaldi-compatible fbank and WeNet global CMVN.

The fbank is torchaudio.compliance.kaldi.fbank with the spec's settings; the
C++ front end is tested against exactly this function.
"""

import json
import math

import torch
import torchaudio

SAMPLE_RATE = 16000
NUM_MEL_BINS = 80


def fbank(waveform: torch.Tensor, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """waveform (N,) float in [-1, 1) at 16 kHz -> (frames, 80) log-mel."""
    if sample_rate != SAMPLE_RATE:
        raise ValueError(f"fbank expects {SAMPLE_RATE} Hz audio, got {sample_rate}")
    wav = (waveform.to(torch.float32) * 32768.0).unsqueeze(0)
    return torchaudio.compliance.kaldi.fbank(
        wav, num_mel_bins=NUM_MEL_BINS, frame_length=25.0, frame_shift=10.0,
        dither=0.0, energy_floor=0.0, sample_frequency=SAMPLE_RATE)


def tail_padding_samples(right_context: int) -> int:
    """Zeros (16 kHz) the engine appends at the end of a stream so that its
    last samples complete an fbank window and the subsampling's right
    context: all of the audio reaches an encoder frame."""
    return 400 + 160 * right_context


def cmvn_stats(feats: torch.Tensor) -> dict:
    """WeNet global_cmvn JSON content accumulated over feats (T, F)."""
    f = feats.to(torch.float64)
    return {"mean_stat": f.sum(0).tolist(), "var_stat": (f * f).sum(0).tolist(),
            "frame_num": int(f.size(0))}


def cmvn_from_stats(stats: dict):
    """(mean, istd) float32 tensors from WeNet global_cmvn statistics."""
    n = float(stats["frame_num"])
    if n <= 0:
        raise ValueError("global_cmvn frame_num must be positive")
    mean = [m / n for m in stats["mean_stat"]]
    var = [max(v / n - m * m, 1.0e-20) for v, m in zip(stats["var_stat"], mean)]
    istd = [1.0 / math.sqrt(v) for v in var]
    return (torch.tensor(mean, dtype=torch.float64).to(torch.float32),
            torch.tensor(istd, dtype=torch.float64).to(torch.float32))


def load_cmvn_json(path: str):
    with open(path, encoding="utf-8") as f:
        return cmvn_from_stats(json.load(f))


def synthetic_speech(seconds: float, seed: int) -> torch.Tensor:
    """A speech-like test signal at 16 kHz in [-1, 1): a gliding harmonic
    source with syllable-rate amplitude modulation, formant-like resonances
    and a little noise. Used where no recorded audio is at hand."""
    g = torch.Generator().manual_seed(seed)
    n = int(seconds * SAMPLE_RATE)
    t = torch.arange(n, dtype=torch.float64) / SAMPLE_RATE
    f0 = 120.0 + 40.0 * torch.sin(2 * math.pi * 0.7 * t)
    phase = 2 * math.pi * torch.cumsum(f0, 0) / SAMPLE_RATE
    x = torch.zeros(n, dtype=torch.float64)
    for k in range(1, 30):
        formant = (torch.exp(-((k * f0 - 700) / 300) ** 2)
                   + 0.6 * torch.exp(-((k * f0 - 1800) / 400) ** 2) + 0.05)
        x += formant * torch.sin(k * phase) / k
    envelope = 0.5 * (1 + torch.sin(2 * math.pi * 3.0 * t)) ** 2
    x = x * envelope + 0.02 * torch.randn(n, generator=g, dtype=torch.float64)
    x = 0.5 * x / x.abs().max()
    return x.to(torch.float32)
