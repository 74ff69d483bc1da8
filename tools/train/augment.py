"""Waveform augmentation of synthesized speech (torch only, CPU).

Synthesized speech is clean and perfectly regular; real input is not. Each
training utterance gets, with the probabilities in `augment`: speed
perturbation (0.9 / 1.1, pitch moves with it as with sox `speed`), a random
gain, synthetic reverberation, telephone band limiting (8 kHz round trip and
a 300-3400 Hz band) and additive noise (white, pink or brown) at a random SNR.
"""

import math
import random

import torch
import torchaudio

SAMPLE_RATE = 16000


def resample(x: torch.Tensor, rate: int, new_rate: int) -> torch.Tensor:
    if rate == new_rate:
        return x
    g = math.gcd(int(rate), int(new_rate))
    return torchaudio.functional.resample(x, int(rate) // g, int(new_rate) // g)


def colored_noise(n: int, kind: str, gen: torch.Generator) -> torch.Tensor:
    """Unit-RMS noise: white, pink (1/f power) or brown (1/f^2 power)."""
    white = torch.randn(n, generator=gen)
    if kind == "white":
        return white
    spec = torch.fft.rfft(white)
    f = torch.arange(spec.numel(), dtype=torch.float32).clamp(min=1.0)
    spec = spec / (f.sqrt() if kind == "pink" else f)
    x = torch.fft.irfft(spec, n)
    return x / x.pow(2).mean().sqrt().clamp(min=1e-8)


def add_noise(x: torch.Tensor, snr_db: float, kind: str, gen: torch.Generator) -> torch.Tensor:
    power = x.pow(2).mean().clamp(min=1e-10)
    noise = colored_noise(x.numel(), kind, gen)
    return x + noise * torch.sqrt(power / (10.0 ** (snr_db / 10.0)))


def reverberate(x: torch.Tensor, rt60: float, drr_db: float, gen: torch.Generator) -> torch.Tensor:
    """Convolution with a direct path plus an exponentially decaying noise
    tail (a crude room) whose energy sits `drr_db` below the direct path's."""
    n = int(rt60 * SAMPLE_RATE)
    t = torch.arange(1, n, dtype=torch.float32) / SAMPLE_RATE
    tail = torch.randn(n - 1, generator=gen) * torch.exp(-6.9 * t / rt60)
    tail = tail * torch.sqrt(10.0 ** (-drr_db / 10.0) / tail.pow(2).sum().clamp(min=1e-8))
    rir = torch.cat([torch.ones(1), tail])
    size = x.numel() + n - 1
    y = torch.fft.irfft(torch.fft.rfft(x, size) * torch.fft.rfft(rir, size), size)[: x.numel()]
    return y * (x.abs().max() / y.abs().max().clamp(min=1e-8))


def telephone(x: torch.Tensor) -> torch.Tensor:
    """8 kHz round trip plus a 300-3400 Hz band (FFT mask)."""
    y = resample(resample(x, SAMPLE_RATE, 8000), 8000, SAMPLE_RATE)[: x.numel()]
    spec = torch.fft.rfft(y)
    freqs = torch.fft.rfftfreq(y.numel(), 1.0 / SAMPLE_RATE)
    spec[(freqs < 300) | (freqs > 3400)] = 0
    return torch.fft.irfft(spec, y.numel())


def augment(x: torch.Tensor, rng: random.Random):
    """(augmented waveform, description dict) of a 16 kHz waveform."""
    gen = torch.Generator().manual_seed(rng.getrandbits(62))
    desc = {}
    r = rng.random()
    if r < 0.2:
        desc["speed"] = 0.9
    elif r < 0.4:
        desc["speed"] = 1.1
    if "speed" in desc:
        # Played faster by s: read the samples as if recorded at rate * s.
        x = resample(x, int(SAMPLE_RATE * desc["speed"]), SAMPLE_RATE)
    if rng.random() < 0.2:
        desc["rt60"] = round(rng.uniform(0.15, 0.6), 3)
        desc["drr_db"] = round(rng.uniform(2.0, 15.0), 1)
        x = reverberate(x, desc["rt60"], desc["drr_db"], gen)
    if rng.random() < 0.1:
        desc["telephone"] = True
        x = telephone(x)
    if rng.random() < 0.4:
        desc["snr_db"] = round(rng.uniform(8.0, 35.0), 1)
        desc["noise"] = rng.choice(["white", "pink", "brown"])
        x = add_noise(x, desc["snr_db"], desc["noise"], gen)
    peak = x.abs().max().clamp(min=1e-6)
    gain = 10.0 ** (rng.uniform(-20.0, -1.0) / 20.0)  # peak level in dBFS
    desc["peak_dbfs"] = round(20 * math.log10(gain), 1)
    return x * (gain / peak), desc
