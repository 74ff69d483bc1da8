"""Waveform augmentation of synthesized speech, batched, on any torch device.

Synthesized speech is clean and perfectly regular; real input is not. Each
training utterance gets, drawn independently with the probabilities below:
speed perturbation (0.9 / 1.1, pitch moves with it as with sox `speed`),
vocal-tract length warping (the spectrum's frequency axis stretched,
formants and pitch with it, the timing kept), synthetic reverberation, a
microphone's response (high and low pass, tilt, resonances), a
telephone channel (8 kHz round trip, a 300-3400 Hz band, and a G.711 mu-law
or A-law round trip for two thirds of them), additive noise (white, pink or
brown) at a random SNR, and a random peak level; and a tempo change (WSOLA:
pitch and formants kept). Speed, tempo and warping are drawn independently,
so speaking rate, pitch and formants vary independently: a speed of 1.1
with a tempo of 1 / 1.1 is a pitch change (formants with it), and with a
warp of 1 / 1.1 as well, pitch alone.

This module is the one definition of that augmentation. Its operations work
on a padded batch (B, N) with per-utterance lengths: every stage sees only
the valid samples of an utterance (padding is zero on entry and is zeroed
again after each stage), so an utterance's result does not depend on the
batch it is in. Two users:
  * train.py, through gpu_frontend.py: a fresh augmentation of every batch at
    every step, on the training device (`draw` + `augment_batch`);
  * synth.py --store feats (the older data flow): `augment`, one utterance at
    synthesis time.
"""

import math
import random

import torch
import torchaudio

SAMPLE_RATE = 16000

# The augmentation: probabilities and ranges (uniform) per utterance.
SPEED_CHOICES = ((0.9, 0.2), (1.1, 0.2))  # (factor, probability); else 1.0
REVERB_PROB = 0.2
RT60_RANGE = (0.15, 0.6)  # seconds
DRR_DB_RANGE = (2.0, 15.0)  # direct-to-reverberant ratio
# Tempo apart from pitch and formants (WSOLA, change_tempo): a faster or
# slower speaker of the same voice. With the speed perturbation (tempo,
# pitch and formants together) and the vocal-tract warp (formants) drawn
# independently, tempo, pitch and formants each vary on their own.
TEMPO_PROB = 0.3
TEMPO_FACTORS = (0.87, 1.15)  # > 1: faster; each takes half of TEMPO_PROB
TEMPO_FRAME = 320  # 20 ms frames, Hann-weighted, overlapping by half
TEMPO_TOLERANCE = 80  # +-5 ms: how far a frame may move to continue the last
VTLP_PROB = 0.4
VTLP_RANGE = (0.88, 1.12)  # frequency-axis stretch (> 1: a shorter vocal tract)
VTLP_BOUNDARY = 0.7  # of Nyquist: the stretch is linear up to it, then meets Nyquist
STFT_SIZE, STFT_HOP = 512, 128  # the warping stage's analysis
MIC_PROB = 0.3
# A microphone's (and its preamp's) magnitude response: a high pass (2nd
# order), a low pass (4th order; at Nyquist: none), a tilt, and resonances or
# dips (Gaussian in log frequency). Zero phase.
MIC_HIGHPASS_HZ = (30.0, 300.0)
MIC_LOWPASS_HZ = (3500.0, 8000.0)
MIC_TILT_DB_PER_OCTAVE = (-2.5, 2.5)  # around 1 kHz
MIC_PEAKS = 3
MIC_PEAK_HZ = (150.0, 6000.0)
MIC_PEAK_DB = (-8.0, 8.0)
MIC_PEAK_OCTAVES = (0.25, 1.5)  # width (two standard deviations)
TELEPHONE_PROB = 0.15
TELEPHONE_RATE = 8000
TELEPHONE_BAND = (300.0, 3400.0)  # Hz
CODECS = ("none", "mu-law", "a-law")  # a telephone channel's codec, equally likely
NOISE_PROB = 0.4
SNR_DB_RANGE = (8.0, 35.0)
NOISE_KINDS = ("white", "pink", "brown")
NOISE_EXPONENTS = (0.0, 0.5, 1.0)  # of each kind: amplitude spectrum 1 / f^e
PEAK_DBFS_RANGE = (-20.0, -1.0)
# Clips with no speech at all, trained to give no units (train.py
# --noise-clips): near silence, coloured noise, mains hum, clicks.
NON_SPEECH_KINDS = ("silence", "noise", "hum", "clicks")
NON_SPEECH_RMS_DBFS = (-60.0, -12.0)  # silence: SILENCE_RMS_DBFS
SILENCE_RMS_DBFS = (-96.0, -66.0)  # a quiet room through a microphone, down to dither
HUM_HZ = (50.0, 60.0)
CLICKS_PER_SECOND = (1.0, 20.0)


def to_int16(x: torch.Tensor) -> torch.Tensor:
    """16-bit PCM samples of a float waveform in [-1, 1)."""
    return (x.clamp(-1.0, 32767.0 / 32768.0) * 32768.0).round().to(torch.int16)


def resample(x: torch.Tensor, rate: int, new_rate: int) -> torch.Tensor:
    """torchaudio's sinc resampling of the last axis. Output length
    ceil(n * new_rate / rate); the input is read as zero beyond its end, so
    the first ceil(n_i * new_rate / rate) samples of a zero-padded row equal
    the resampled unpadded row. (Also synth.py's resampling of synthesizer
    output, which must stay as it is for the evaluation set to reproduce.)"""
    if rate == new_rate:
        return x
    g = math.gcd(int(rate), int(new_rate))
    return torchaudio.functional.resample(x.contiguous(), int(rate) // g, int(new_rate) // g)


def resampled_length(lengths, rate: int, new_rate: int):
    """Valid samples after `resample` of rows with `lengths` valid samples."""
    g = math.gcd(int(rate), int(new_rate))
    rate, new_rate = int(rate) // g, int(new_rate) // g
    return (lengths * new_rate + rate - 1) // rate


def speed_rates(factor: float):
    """(rate, new_rate) of a speed factor: played faster by s, the samples
    are read as if recorded at SAMPLE_RATE * s."""
    return int(round(SAMPLE_RATE * factor)), SAMPLE_RATE


def valid_mask(lengths: torch.Tensor, n: int, device) -> torch.Tensor:
    """(B, n) bool: sample t of row b is inside its utterance."""
    return torch.arange(n, device=device).unsqueeze(0) < lengths.to(device).unsqueeze(1)


def zero_padding(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    return x * valid_mask(lengths, x.size(1), x.device)


def fft_size(n: int) -> int:
    """Smallest 2^a 3^b 5^c >= n (fast for every FFT library)."""
    best = 1 << max(n - 1, 0).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            p = p35
            while p < n:
                p *= 2
            best = min(best, p)
            p35 *= 3
        p5 *= 5
    return best


def convolve(x: torch.Tensor, h: torch.Tensor, delay: int = 0) -> torch.Tensor:
    """Linear convolution (FFT) of rows (B, N) with kernels (B or 1, L),
    samples delay .. delay + N of the result (B, N)."""
    n = x.size(1)
    size = fft_size(n + h.size(1) - 1)
    y = torch.fft.irfft(torch.fft.rfft(x, size) * torch.fft.rfft(h, size), size)
    return y[:, delay:delay + n]


def change_speed(x: torch.Tensor, lengths: torch.Tensor, factor: float):
    """Speed perturbation of every row by one factor: (rows, new lengths)."""
    if factor == 1.0:
        return x, lengths
    rate, new_rate = speed_rates(factor)
    new_lengths = resampled_length(lengths, rate, new_rate)
    y = resample(x, rate, new_rate)[:, :int(new_lengths.max())]
    return zero_padding(y, new_lengths), new_lengths


def tempo_length(lengths, factor: float):
    """Valid samples after `change_tempo` by `factor` of rows with `lengths`."""
    if isinstance(lengths, torch.Tensor):
        return torch.round(lengths.double() / factor).long()
    return int(round(lengths / factor))


def change_tempo(x: torch.Tensor, lengths: torch.Tensor, factor: float):
    """Rows played `factor` times faster with their pitch and formants kept,
    by WSOLA: output frame j (TEMPO_FRAME samples, a hop of half that) is
    the input's frame near j * hop * factor, moved by up to TEMPO_TOLERANCE
    samples to where it best continues the frame before it (normalised
    cross-correlation with the input that followed that frame), so periods
    line up and nothing is smeared in frequency (a phase vocoder's phases
    drift apart between bins at every onset and lost a 300 Hz tone 12 dB
    when slowing it). Returns (x', lengths'), lengths' = tempo_length."""
    b = x.size(0)
    frame, hop, tol = TEMPO_FRAME, TEMPO_FRAME // 2, TEMPO_TOLERANCE
    new_lengths = tempo_length(lengths, factor)
    out_n = int(new_lengths.max())
    frames = out_n // hop + 2
    # Frame j's output starts at j * hop - hop (frame 0 fades the start in
    # with frame 1), its nominal input at the same place scaled by factor.
    left = hop + tol
    right = int(math.ceil(frames * hop * factor)) + frame + 2 * tol - x.size(1)
    xp = torch.nn.functional.pad(x, (left, max(0, right)))
    window = torch.hann_window(frame, periodic=True, device=x.device, dtype=x.dtype)
    at = torch.arange(frame, device=x.device)
    rows = torch.arange(b, device=x.device).unsqueeze(1)
    out = torch.zeros(b, frames * hop + frame, device=x.device, dtype=x.dtype)
    start = torch.full((b,), left - hop, device=x.device, dtype=torch.long)
    for j in range(frames):
        if j > 0:
            lo = left - hop + int(round(j * hop * factor)) - tol
            follow = xp[rows, (start + hop).unsqueeze(1) + at]  # (B, frame)
            cands = xp[:, lo:lo + 2 * tol + frame].unfold(1, frame, 1)  # (B, 2 tol + 1, frame)
            score = (cands * follow.unsqueeze(1)).sum(-1) / (cands.norm(dim=-1) + 1e-9)
            start = lo + score.argmax(1)
        out[:, j * hop:j * hop + frame] += xp[rows, start.unsqueeze(1) + at] * window
    return zero_padding(out[:, hop:hop + out_n], new_lengths), new_lengths


def room_responses(rt60: torch.Tensor, drr_db: torch.Tensor, gen: torch.Generator, device):
    """(B, L) room impulse responses: a direct path (1 at time 0) and an
    exponentially decaying noise tail of int(rt60 * SAMPLE_RATE) - 1 samples
    (-60 dB at rt60) whose energy sits drr_db below the direct path's."""
    n = (rt60.double() * SAMPLE_RATE).long()
    b, size = rt60.numel(), int(n.max())
    t = torch.arange(1, size, device=device, dtype=torch.float32) / SAMPLE_RATE
    decay = torch.exp(-6.9 * t.unsqueeze(0) / rt60.to(device, torch.float32).unsqueeze(1))
    tail = torch.randn((b, size - 1), generator=gen, device=device) * decay
    tail = zero_padding(tail, n - 1)
    energy = 10.0 ** (-drr_db.to(device, torch.float32) / 10.0)
    tail = tail * torch.sqrt(energy / tail.pow(2).sum(1).clamp(min=1e-8)).unsqueeze(1)
    return torch.cat([torch.ones(b, 1, device=device), tail], 1)


def reverberate(x: torch.Tensor, lengths: torch.Tensor, rirs: torch.Tensor) -> torch.Tensor:
    """Rows convolved with their room responses, cut to their lengths and
    scaled back to their own peak."""
    y = zero_padding(convolve(x, rirs), lengths)
    scale = x.abs().amax(1) / y.abs().amax(1).clamp(min=1e-8)
    return y * scale.unsqueeze(1)


def band_pass(low: float, high: float, taps: int = 511) -> torch.Tensor:
    """(1, taps) linear-phase FIR band pass (Blackman-windowed sinc)."""
    m = (taps - 1) // 2
    k = torch.arange(-m, m + 1, dtype=torch.float64)

    def lowpass(f):
        fc = f / SAMPLE_RATE
        return 2 * fc * torch.sinc(2 * fc * k)

    h = (lowpass(high) - lowpass(low)) * torch.blackman_window(taps, periodic=False,
                                                               dtype=torch.float64)
    return h.to(torch.float32).unsqueeze(0)


def mic_response_db(freqs: torch.Tensor, p: dict, rows: torch.Tensor) -> torch.Tensor:
    """(R, F) float32 gain in dB at `freqs` (Hz, > 0), on freqs' device, of
    the microphone responses of `rows` of draw()'s parameters."""
    dev = freqs.device
    f = freqs.to(torch.float32).clamp(min=1.0).unsqueeze(0)

    def param(name):  # (R, 1) or (R, MIC_PEAKS), float32, on the device
        v = p[name][rows].to(dev, torch.float32)
        return v.unsqueeze(1) if v.dim() == 1 else v

    hp, lp = param("mic_hp_hz"), param("mic_lp_hz")
    db = -10.0 * torch.log10(1.0 + (hp / f) ** 4)
    db = db - torch.where(lp < SAMPLE_RATE / 2, 10.0 * torch.log10(1.0 + (f / lp) ** 8),
                          torch.zeros_like(db))
    db = db + param("mic_tilt_db") * torch.log2(f / 1000.0)
    centre, gain = param("mic_peak_hz"), param("mic_peak_db")
    sigma = param("mic_peak_octaves") / 2
    for k in range(MIC_PEAKS):
        db = db + gain[:, k:k + 1] * torch.exp(
            -0.5 * (torch.log2(f / centre[:, k:k + 1]) / sigma[:, k:k + 1]) ** 2)
    return db


# Samples of zeros beyond a row before its spectrum is shaped: the responses'
# impulse responses (zero phase, both sides) wrap around into them.
MIC_GUARD = 4096


def microphone(x: torch.Tensor, lengths: torch.Tensor, p: dict, rows: torch.Tensor):
    """Rows (R, N) through their microphone responses (draw()'s parameters
    of `rows`): zero phase, in the frequency domain; the RMS is kept."""
    size = fft_size(x.size(1) + MIC_GUARD)
    freqs = torch.fft.rfftfreq(size, 1.0 / SAMPLE_RATE, device=x.device)
    gain = 10.0 ** (mic_response_db(freqs, p, rows) / 20.0)  # made where x is
    y = torch.fft.irfft(torch.fft.rfft(x, size) * gain, size)
    y = zero_padding(y[:, :x.size(1)], lengths)
    rms_in = x.pow(2).sum(1).clamp(min=1e-12)
    rms_out = y.pow(2).sum(1).clamp(min=1e-12)
    return y * (rms_in / rms_out).sqrt().unsqueeze(1)


_BAND = {}


def telephone(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """An 8 kHz round trip, then the 300-3400 Hz band (FIR, zero phase)."""
    return telephone_channel(x, lengths, torch.zeros(x.size(0), dtype=torch.long))


def g711(x: torch.Tensor, law: str) -> torch.Tensor:
    """A round trip through ITU-T G.711 (8-bit mu-law or A-law, the segmented
    codes of the standard) of samples in [-1, 1), read as 16-bit PCM."""
    s = (x * 32768.0).round().clamp(-32768, 32767).to(torch.int32)
    if law == "mu-law":
        mag = s.abs().clamp(max=32635) + 132  # the bias 0x84
        seg = (torch.log2(mag.float()).floor().to(torch.int32) - 7).clamp(0, 7)
        mant = (mag >> (seg + 3)) & 15
        y = (((mant << 3) + 132) << seg) - 132
        y = torch.where(s < 0, -y, y)
    elif law == "a-law":
        mag = torch.where(s >= 0, s >> 3, -(s >> 3) - 1)  # 13-bit magnitude
        seg = torch.where(mag < 32, torch.zeros_like(mag),
                          torch.log2(mag.clamp(min=1).float()).floor().to(torch.int32) - 4)
        mant = torch.where(seg < 2, mag >> 1, mag >> seg.clamp(min=0)) & 15
        y = torch.where(seg == 0, (mant << 4) + 8,
                        torch.where(seg == 1, (mant << 4) + 0x108,
                                    ((mant << 4) + 0x108) << (seg - 1).clamp(min=0)))
        y = torch.where(s < 0, -y, y)
    else:
        raise ValueError(f"unknown G.711 law {law!r}")
    return y.to(x.dtype) / 32768.0


def telephone_channel(x: torch.Tensor, lengths: torch.Tensor, codec: torch.Tensor) -> torch.Tensor:
    """`telephone` with each row's codec (an index into CODECS) applied to its
    8 kHz samples."""
    half = resampled_length(lengths, SAMPLE_RATE, TELEPHONE_RATE)
    y = zero_padding(resample(x, SAMPLE_RATE, TELEPHONE_RATE), half)
    for k, law in enumerate(CODECS):
        rows = (codec == k).nonzero().flatten().to(x.device)
        if law != "none" and rows.numel():
            y[rows] = g711(y[rows], law)
    y = zero_padding(resample(y, TELEPHONE_RATE, SAMPLE_RATE)[:, :x.size(1)], lengths)
    key = str(x.device)
    if key not in _BAND:
        _BAND[key] = band_pass(*TELEPHONE_BAND).to(x.device)
    h = _BAND[key]
    return zero_padding(convolve(y, h, (h.size(1) - 1) // 2), lengths)


_WINDOWS = {}


def _stft(x: torch.Tensor):
    """STFT of rows followed by at least one window of zeros (so a row's
    result never depends on how much padding its batch gives it)."""
    key = str(x.device)
    if key not in _WINDOWS:
        _WINDOWS[key] = torch.hann_window(STFT_SIZE, device=x.device)
    x = torch.nn.functional.pad(x, (0, STFT_SIZE))
    return torch.stft(x, STFT_SIZE, STFT_HOP, window=_WINDOWS[key], return_complex=True)


def _istft(spec: torch.Tensor, n: int) -> torch.Tensor:
    return torch.istft(spec, STFT_SIZE, STFT_HOP, window=_WINDOWS[str(spec.device)], length=n)


def _wrap(phase: torch.Tensor) -> torch.Tensor:
    return phase - 2 * math.pi * torch.round(phase / (2 * math.pi))


def _vtlp_knee(alpha: torch.Tensor, nyq: float):
    a = alpha.double()
    return a, VTLP_BOUNDARY * nyq * torch.clamp(1.0 / a, max=1.0)


def vtlp_warp(f: torch.Tensor, alpha: torch.Tensor, bins: int = STFT_SIZE // 2 + 1) -> torch.Tensor:
    """Frequencies f (B, ...) in bins moved by each row's stretch alpha (B,):
    alpha * f up to the knee f0 (vtlp_source_bins), then the straight line
    from (f0, alpha * f0) to (Nyquist, Nyquist)."""
    a, f0 = _vtlp_knee(alpha.to(f.device), float(bins - 1))
    shape = (-1,) + (1,) * (f.dim() - 1)
    a, f0 = a.view(shape).to(f.dtype), f0.view(shape).to(f.dtype)
    nyq = float(bins - 1)
    return torch.where(f <= f0, a * f, a * f0 + (f - f0) * (nyq - a * f0) / (nyq - f0))


def vtlp_source_bins(alpha: torch.Tensor, bins: int) -> torch.Tensor:
    """(B, bins) fractional source bin of each output bin for frequency-axis
    stretches alpha (B,): output frequency g comes from g / alpha below
    alpha * f0, f0 = VTLP_BOUNDARY * Nyquist * min(1, 1 / alpha); above it a
    straight line takes the rest of the band to Nyquist, so 0 and Nyquist
    stay where they are."""
    nyq = float(bins - 1)
    a, f0 = _vtlp_knee(alpha, nyq)
    a, f0 = a.unsqueeze(1), f0.unsqueeze(1)
    g = torch.arange(bins, dtype=torch.float64).unsqueeze(0)
    low = g / a
    high = f0 + (g - a * f0) * (nyq - f0) / (nyq - a * f0)
    return torch.where(g <= a * f0, low, high).clamp(0, nyq)


def warp_vocal_tract(x: torch.Tensor, lengths: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Vocal-tract length perturbation of rows: each frame's magnitude
    spectrum stretched along frequency by the row's alpha (vtlp_source_bins,
    linear interpolation); each output bin's phase advances at its source
    bin's measured frequency warped (vtlp_warp), as a phase vocoder's pitch
    shift does, so a partial at f comes out as one partial at the warped f.
    Length and timing unchanged."""
    n = x.size(1)
    spec = _stft(x)  # (B, F, T)
    bins, t = spec.size(1), spec.size(2)
    src = vtlp_source_bins(alpha, bins).to(x.device, torch.float32)
    lo = src.floor().long()
    hi = (lo + 1).clamp(max=bins - 1)
    near = src.round().long()
    w = (src - lo).unsqueeze(2)

    def take(v, idx):
        return torch.gather(v, 1, idx.unsqueeze(2).expand(-1, -1, v.size(2)))

    mag = spec.abs()
    new_mag = take(mag, lo) * (1 - w) + take(mag, hi) * w
    angle = torch.angle(spec)
    per_bin = 2 * math.pi * STFT_HOP / STFT_SIZE  # a hop's phase advance per bin of frequency
    advance = per_bin * torch.arange(bins, device=x.device, dtype=torch.float32).unsqueeze(1)
    step = _wrap(angle[..., 1:] - angle[..., :-1] - advance) + advance  # (B, F, T - 1)
    # The measured frequency of each source bin (in bins), warped as the
    # spectrum is: every bin of one partial then turns at the same rate.
    out_step = vtlp_warp(take(step, near) / per_bin, alpha) * per_bin
    phase = torch.cat([take(angle[..., :1], near),
                       take(angle[..., :1], near) + torch.cumsum(out_step, -1)], -1)
    y = _istft(torch.polar(new_mag, phase[..., :t]), n + STFT_SIZE)[:, :n]
    return zero_padding(y, lengths)


def colored_noise(lengths: torch.Tensor, n: int, exponent: torch.Tensor, gen: torch.Generator,
                  device) -> torch.Tensor:
    """(B, n) noise of unit RMS over each row's valid samples, amplitude
    spectrum 1 / f^exponent (0 white, 0.5 pink, 1 brown), zero beyond."""
    mask = valid_mask(lengths, n, device)
    white = torch.randn((lengths.numel(), n), generator=gen, device=device) * mask
    size = fft_size(n)  # one of few sizes: FFT plans are reused across batches
    spec = torch.fft.rfft(white, size)
    f = torch.arange(spec.size(1), dtype=torch.float32, device=device).clamp(min=1.0)
    spec = spec / f.unsqueeze(0).pow(exponent.to(device, torch.float32).unsqueeze(1))
    y = torch.fft.irfft(spec, size)[:, :n] * mask
    rms = (y.pow(2).sum(1) / lengths.to(device)).sqrt()
    return y / rms.clamp(min=1e-8).unsqueeze(1)


def add_noise(x: torch.Tensor, lengths: torch.Tensor, snr_db: torch.Tensor,
              exponent: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Rows plus coloured noise at snr_db below each row's mean power."""
    power = (x.pow(2).sum(1) / lengths.to(x.device)).clamp(min=1e-10)
    noise = colored_noise(lengths, x.size(1), exponent, gen, x.device)
    level = torch.sqrt(power / 10.0 ** (snr_db.to(x.device, torch.float32) / 10.0))
    return x + noise * level.unsqueeze(1)


def non_speech(lengths: torch.Tensor, n: int, params_gen: torch.Generator,
               gen: torch.Generator, device) -> tuple:
    """(clips (B, n), kinds (B,)) of non-speech audio, zero beyond each
    row's length: per row a kind of NON_SPEECH_KINDS and an RMS level in
    dBFS (near silence lower), drawn from params_gen (CPU); the waveforms'
    randomness from gen (on `device`)."""
    b = lengths.numel()

    def uniform(lo_hi):
        return lo_hi[0] + (lo_hi[1] - lo_hi[0]) * torch.rand(b, generator=params_gen)

    kind = torch.randint(len(NON_SPEECH_KINDS), (b,), generator=params_gen)
    rms_db = torch.where(kind == 0, uniform(SILENCE_RMS_DBFS), uniform(NON_SPEECH_RMS_DBFS))
    exponent = torch.tensor(NOISE_EXPONENTS)[torch.randint(len(NOISE_EXPONENTS), (b,),
                                                           generator=params_gen)]
    hum_hz = torch.tensor(HUM_HZ)[torch.randint(len(HUM_HZ), (b,), generator=params_gen)]
    clicks = uniform(CLICKS_PER_SECOND)
    # Near silence and noise: coloured noise (white for near silence).
    exponent = torch.where(kind == 0, torch.zeros(b), exponent)
    x = colored_noise(lengths, n, exponent, gen, device)
    t = torch.arange(n, device=device, dtype=torch.float32).unsqueeze(0) / SAMPLE_RATE
    mask = valid_mask(lengths, n, device)
    rows = (kind == 2).nonzero().flatten()
    if rows.numel():  # hum: five harmonics of the mains, random phases, a little noise
        k = rows.numel()
        h = torch.arange(1, 6, device=device, dtype=torch.float32)
        phase = 2 * math.pi * torch.rand((k, 5, 1), generator=gen, device=device)
        f = hum_hz[rows].to(device).view(k, 1, 1) * h.view(1, 5, 1)
        hum = (torch.sin(2 * math.pi * f * t.unsqueeze(0) + phase) / h.view(1, 5, 1)).sum(1)
        x[rows.to(device)] = hum * mask[rows.to(device)] + 0.05 * x[rows.to(device)]
    rows = (kind == 3).nonzero().flatten()
    if rows.numel():  # clicks: sparse impulses, each a 2 ms decaying burst, over a faint floor
        k = rows.numel()
        rate = clicks[rows].to(device).unsqueeze(1) / SAMPLE_RATE
        spikes = (torch.rand((k, n), generator=gen, device=device) < rate).float()
        spikes = spikes * torch.randn((k, n), generator=gen, device=device)
        tail = torch.exp(-torch.arange(64, device=device, dtype=torch.float32) / 32.0)
        burst = tail * torch.randn(64, generator=gen, device=device)
        x[rows.to(device)] = (convolve(spikes, burst.unsqueeze(0)) * mask[rows.to(device)]
                              + 0.01 * x[rows.to(device)])
    rms = (x.pow(2).sum(1) / lengths.to(device).clamp(min=1)).sqrt().clamp(min=1e-12)
    gain = 10.0 ** (rms_db.to(device) / 20.0) / rms
    return zero_padding(x * gain.unsqueeze(1), lengths).clamp(-1.0, 1.0), kind


def set_peak(x: torch.Tensor, peak_dbfs: torch.Tensor) -> torch.Tensor:
    """Rows scaled to the given peak level (dB relative to full scale)."""
    peak = x.abs().amax(1).clamp(min=1e-6)
    gain = 10.0 ** (peak_dbfs.to(x.device, torch.float32) / 20.0)
    return x * (gain / peak).unsqueeze(1)


# Edges (synth.py --edge-trim): the silence a synthesizer puts around its
# speech, cut to what people's recordings have. flite and festival start
# every utterance after ~0.2 s of silence and espeak-ng ends each with
# ~0.36 s, where people's recorded words start within 20-60 ms of the file's
# start; a model that has learnt "silence first" misses a first short word
# ("a frog" -> "prog"; bench/results/human-dev.md).
EDGE_FRAME = 160  # 10 ms at 16 kHz: the frames whose level finds the speech
EDGE_FLOOR_DB = -45.0  # below the loudest frame: silence
EDGE_LEAD_S = (0.0, 0.1)  # the silence kept before the speech
EDGE_TRAIL_S = (0.02, 0.15)  # and after it


def trim_edges(x: torch.Tensor, rng: random.Random):
    """(x with its leading and trailing silence cut to a random length in
    EDGE_LEAD_S and EDGE_TRAIL_S, (lead, trail) kept in seconds) of one
    16 kHz waveform. The speech runs from the first to the last 10 ms frame
    within EDGE_FLOOR_DB of the loudest; an edge shorter than its draw is
    left as it is, and a waveform with no such frame is returned whole."""
    frames = x.numel() // EDGE_FRAME
    lead_s, trail_s = rng.uniform(*EDGE_LEAD_S), rng.uniform(*EDGE_TRAIL_S)
    if frames == 0:
        return x, (0.0, 0.0)
    rms = x[: frames * EDGE_FRAME].view(frames, EDGE_FRAME).pow(2).mean(1).sqrt()
    if rms.max() <= 0:
        return x, (0.0, 0.0)
    loud = (rms >= rms.max() * 10.0 ** (EDGE_FLOOR_DB / 20.0)).nonzero().flatten()
    start = int(loud[0]) * EDGE_FRAME
    end = min(x.numel(), (int(loud[-1]) + 1) * EDGE_FRAME)
    first = max(0, start - round(lead_s * SAMPLE_RATE))
    last = min(x.numel(), end + round(trail_s * SAMPLE_RATE))
    return x[first:last], (round((start - first) / SAMPLE_RATE, 3),
                           round((last - end) / SAMPLE_RATE, 3))


# The stages' probabilities that `set_probabilities` may change, by name.
STAGE_PROBABILITIES = {"tempo": "TEMPO_PROB", "vtlp": "VTLP_PROB", "reverb": "REVERB_PROB",
                       "mic": "MIC_PROB", "telephone": "TELEPHONE_PROB", "noise": "NOISE_PROB"}


def set_probabilities(spec: str) -> dict:
    """Sets stages' probabilities from "name=p,name=p" (names of
    STAGE_PROBABILITIES; "" changes nothing), for recipe comparisons; returns
    every stage's probability as it now is. Raises ValueError on an unknown
    name or a value outside [0, 1]."""
    for item in filter(None, (t.strip() for t in spec.split(","))):
        name, _, value = item.partition("=")
        if name not in STAGE_PROBABILITIES:
            raise ValueError(f"unknown augmentation stage {name!r}; known: "
                             f"{', '.join(STAGE_PROBABILITIES)}")
        try:
            prob = float(value)
        except ValueError:
            prob = -1.0
        if not 0.0 <= prob <= 1.0:
            raise ValueError(f"{item!r}: a probability in [0, 1] is needed")
        globals()[STAGE_PROBABILITIES[name]] = prob
    return {name: globals()[var] for name, var in STAGE_PROBABILITIES.items()}


def _choose(u: torch.Tensor, choices) -> torch.Tensor:
    """Each row's factor from its uniform draw u: (factor, probability)
    choices take consecutive slices of [0, 1); the rest is 1.0."""
    out = torch.ones_like(u)
    below = 0.0
    for factor, prob in choices:
        out[(u >= below) & (u < below + prob)] = factor
        below += prob
    return out


def draw(b: int, gen: torch.Generator) -> dict:
    """Augmentation parameters of b utterances (CPU tensors; gen a CPU
    generator): which stages apply to which utterance, and their settings."""

    def uniform(lo_hi):
        return lo_hi[0] + (lo_hi[1] - lo_hi[0]) * torch.rand(b, generator=gen, dtype=torch.float64)

    p = {"speed": _choose(torch.rand(b, generator=gen, dtype=torch.float64), SPEED_CHOICES)}
    p["vtlp"] = torch.rand(b, generator=gen) < VTLP_PROB
    p["vtlp_alpha"] = uniform(VTLP_RANGE)
    p["reverb"] = torch.rand(b, generator=gen) < REVERB_PROB
    p["mic"] = torch.rand(b, generator=gen) < MIC_PROB
    p["mic_hp_hz"], p["mic_lp_hz"] = uniform(MIC_HIGHPASS_HZ), uniform(MIC_LOWPASS_HZ)
    p["mic_tilt_db"] = uniform(MIC_TILT_DB_PER_OCTAVE)
    log_lo, log_hi = math.log2(MIC_PEAK_HZ[0]), math.log2(MIC_PEAK_HZ[1])
    peaks = torch.rand((b, MIC_PEAKS), generator=gen, dtype=torch.float64)
    p["mic_peak_hz"] = 2.0 ** (log_lo + (log_hi - log_lo) * peaks)
    p["mic_peak_db"] = torch.stack([uniform(MIC_PEAK_DB) for _ in range(MIC_PEAKS)], 1)
    p["mic_peak_octaves"] = torch.stack([uniform(MIC_PEAK_OCTAVES) for _ in range(MIC_PEAKS)], 1)
    p["rt60"], p["drr_db"] = uniform(RT60_RANGE), uniform(DRR_DB_RANGE)
    p["telephone"] = torch.rand(b, generator=gen) < TELEPHONE_PROB
    p["codec"] = torch.randint(len(CODECS), (b,), generator=gen)
    p["noise"] = torch.rand(b, generator=gen) < NOISE_PROB
    p["snr_db"] = uniform(SNR_DB_RANGE)
    p["noise_kind"] = torch.randint(len(NOISE_KINDS), (b,), generator=gen)
    p["peak_dbfs"] = uniform(PEAK_DBFS_RANGE)
    # Drawn last, so that the stages above keep their draws of a seed.
    p["tempo"] = _choose(torch.rand(b, generator=gen, dtype=torch.float64),
                         [(f, TEMPO_PROB / len(TEMPO_FACTORS)) for f in TEMPO_FACTORS])
    return p


def _rows(mask: torch.Tensor):
    return mask.nonzero().flatten()


def augment_batch(x: torch.Tensor, lengths: torch.Tensor, p: dict, gen: torch.Generator):
    """Augments a padded batch: x (B, N) float on any device, zero beyond
    `lengths` (B,) (a CPU int64 tensor), p from `draw`, gen a generator on
    x's device (noise and room responses). Returns (x', lengths'): speed
    perturbation changes lengths; the padding of x' is zero."""
    dev = x.device
    x = x.clone()
    # Speed, then tempo: the rows of each factor together, one pass each.
    for key, factors, fn in (("speed", [f for f, _ in SPEED_CHOICES], change_speed),
                             ("tempo", TEMPO_FACTORS, change_tempo)):
        parts = []
        new_lengths = lengths.clone()
        for factor in factors:
            rows = _rows(p[key] == factor)
            if rows.numel():
                sub_len = lengths[rows]
                sub, new_lengths[rows] = fn(x[rows.to(dev), :int(sub_len.max())], sub_len, factor)
                parts.append((rows, sub))
        if parts:
            width = int(new_lengths.max())
            x = torch.nn.functional.pad(x, (0, max(0, width - x.size(1))))[:, :width].contiguous()
            for rows, sub in parts:  # whole rows: nothing of the old samples stays behind
                x[rows.to(dev)] = torch.nn.functional.pad(sub, (0, width - sub.size(1)))
            lengths = new_lengths

    def stage(mask, fn):
        rows = _rows(mask)
        if rows.numel():
            sub_len = lengths[rows]
            m = int(sub_len.max())
            rows_dev = rows.to(dev)
            x[rows_dev, :m] = fn(x[rows_dev, :m], sub_len, rows)

    stage(p["vtlp"], lambda s, n, rows: warp_vocal_tract(s, n, p["vtlp_alpha"][rows]))
    stage(p["reverb"], lambda s, n, rows: reverberate(
        s, n, room_responses(p["rt60"][rows], p["drr_db"][rows], gen, dev)))
    stage(p["mic"], lambda s, n, rows: microphone(s, n, p, rows))
    stage(p["telephone"], lambda s, n, rows: telephone_channel(s, n, p["codec"][rows]))
    stage(p["noise"], lambda s, n, rows: add_noise(
        s, n, p["snr_db"][rows], torch.tensor(NOISE_EXPONENTS)[p["noise_kind"][rows]], gen))
    return set_peak(x, p["peak_dbfs"]), lengths


def augment(x: torch.Tensor, rng: random.Random):
    """(augmented waveform, description dict) of one 16 kHz waveform (CPU),
    drawn from rng: the same maths and probabilities as the batched path."""
    gen = torch.Generator().manual_seed(rng.getrandbits(62))
    p = draw(1, gen)
    y, n = augment_batch(x.unsqueeze(0), torch.tensor([x.numel()]), p, gen)
    desc = {}
    if float(p["speed"][0]) != 1.0:
        desc["speed"] = float(p["speed"][0])
    if float(p["tempo"][0]) != 1.0:
        desc["tempo"] = float(p["tempo"][0])
    if bool(p["vtlp"][0]):
        desc["vtlp_alpha"] = round(float(p["vtlp_alpha"][0]), 3)
    if bool(p["reverb"][0]):
        desc["rt60"] = round(float(p["rt60"][0]), 3)
        desc["drr_db"] = round(float(p["drr_db"][0]), 1)
    if bool(p["mic"][0]):
        desc["mic"] = {"hp_hz": round(float(p["mic_hp_hz"][0])),
                       "lp_hz": round(float(p["mic_lp_hz"][0])),
                       "tilt_db": round(float(p["mic_tilt_db"][0]), 1),
                       "peaks": [[round(float(p["mic_peak_hz"][0, k])),
                                  round(float(p["mic_peak_db"][0, k]), 1)]
                                 for k in range(MIC_PEAKS)]}
    if bool(p["telephone"][0]):
        desc["telephone"] = CODECS[int(p["codec"][0])]
    if bool(p["noise"][0]):
        desc["snr_db"] = round(float(p["snr_db"][0]), 1)
        desc["noise"] = NOISE_KINDS[int(p["noise_kind"][0])]
    desc["peak_dbfs"] = round(float(p["peak_dbfs"][0]), 1)
    return y[0, :int(n[0])], desc
