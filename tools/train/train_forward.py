"""Batched, device-aware forward of tools/reference's ConformerCtcModel.

The reference's forwards serve one utterance on the CPU; training needs
padded batches on a GPU. This module runs the very same submodules (so the
trained weights mean what the C++ engine computes) and adds only what
training needs around them:
  * a padding mask on the keys, combined with the dynamic chunk mask;
  * SpecAugment on the CMVN-normalised features;
  * dropout on the residual branches, through forward hooks (identity in
    eval mode, so exported weights are unaffected).
Padding cannot leak into valid frames otherwise: the conv2d subsampling and
the causal depthwise convolution only look back in time, and every norm is a
per-frame LayerNorm (cnn_module_norm = layer_norm).
"""

import math
import random

import torch
from torch import nn

from tools.reference.model import ConformerCtcModel, position_table


def output_lengths(lengths: torch.Tensor, input_layer: str = "conv2d") -> torch.Tensor:
    """Encoder frames of each utterance after conv2d 4x subsampling."""
    if input_layer != "conv2d":
        raise ValueError("training supports input_layer conv2d only")
    return ((lengths - 1) // 2 - 1) // 2


def dynamic_chunk(max_frames: int, rng: random.Random, full_prob: float = 0.5,
                  max_chunk: int = 25):
    """WeNet's dynamic chunk rule for one batch: (chunk_size, num_left_chunks)
    with chunk_size 0 meaning full context; the left context is unlimited
    (-1) half of the time, else uniform in 0 .. all chunks before."""
    if rng.random() < full_prob:
        return 0, -1
    chunk = rng.randint(1, max_chunk)
    if rng.random() < 0.5:
        return chunk, -1
    return chunk, rng.randint(0, max(max_frames - 1, 0) // chunk)


def attention_mask(lengths: torch.Tensor, t: int, chunk_size: int, num_left_chunks: int):
    """(B, 1, t, t) bool: key j visible to query i. Every query sees at least
    itself, so padded rows never become all -inf (NaN would then reach valid
    rows through 0 * NaN in attn @ v)."""
    device = lengths.device
    idx = torch.arange(t, device=device)
    valid = idx.unsqueeze(0) < lengths.unsqueeze(1)  # (B, t)
    mask = valid[:, None, None, :].expand(-1, 1, t, t)
    if chunk_size > 0:
        chunk = idx // chunk_size
        end = (chunk + 1) * chunk_size
        start = (torch.zeros_like(idx) if num_left_chunks < 0
                 else torch.clamp((chunk - num_left_chunks) * chunk_size, min=0))
        j = idx.unsqueeze(0)
        cm = (j >= start.unsqueeze(1)) & (j < end.unsqueeze(1))
        mask = mask & cm
    return mask | torch.eye(t, dtype=torch.bool, device=device)


def spec_augment(x: torch.Tensor, lengths: torch.Tensor, gen: torch.Generator,
                 num_f: int = 2, max_f: int = 10, num_t: int = 2, max_t: int = 50):
    """Zeroes random frequency bands and time spans of (B, T, F) in place.
    The draws come from `gen` on its own device (a CUDA generator spares the
    host-to-device copies, each of which waits for the GPU)."""
    b, t, f = x.shape
    dev = x.device
    g = gen.device
    fi = torch.arange(f, device=dev)
    ti = torch.arange(t, device=dev)
    keep = torch.ones(b, t, f, dtype=torch.bool, device=dev)
    for _ in range(num_f):
        w = torch.randint(0, max_f + 1, (b, 1), generator=gen, device=g).to(dev)
        s = (torch.rand(b, 1, generator=gen, device=g).to(dev) * (f - w)).long()
        keep &= ~((fi >= s) & (fi < s + w)).unsqueeze(1)
    for _ in range(num_t):
        limit = torch.clamp(lengths // 5, max=max_t).unsqueeze(1)  # <= 20% of each
        w = (torch.rand(b, 1, generator=gen, device=g).to(dev) * (limit + 1).float()).long()
        s = (torch.rand(b, 1, generator=gen, device=g).to(dev) * (lengths.unsqueeze(1) - w).clamp(min=1).float()).long()
        keep &= ~((ti >= s) & (ti < s + w)).unsqueeze(2)
    return x * keep


def freq_warp(x: torch.Tensor, gen: torch.Generator, max_warp: float, prob: float = 0.8,
              cut: float = 0.8) -> torch.Tensor:
    """Vocal tract length perturbation on the mel axis of (B, T, F) log-mel
    features: each utterance, with probability `prob`, has its bins read from
    positions i / alpha (alpha uniform in 1 +- max_warp) up to `cut` of the
    band, then linearly to the top bin, which stays in place. A speaker's
    formants move up or down by a few percent, so the model hears more vocal
    tracts than the synthesizers have."""
    b, _, f = x.shape
    dev = x.device
    alpha = 1.0 + (torch.rand(b, 1, generator=gen, device=gen.device) * 2.0 - 1.0) * max_warp
    alpha = torch.where(torch.rand(b, 1, generator=gen, device=gen.device) < prob, alpha, torch.ones_like(alpha))
    i = torch.arange(f, dtype=torch.float32, device=gen.device).unsqueeze(0)
    c = cut * (f - 1)
    top = (f - 1 - c / alpha) / (f - 1 - c)
    src = torch.where(i <= c, i / alpha, c / alpha + (i - c) * top).clamp(0, f - 1).to(dev)
    lo = src.floor().long().clamp(max=f - 2)
    w = (src - lo.float()).unsqueeze(1).to(x.dtype)  # (B, 1, F)
    lo = lo.unsqueeze(1).expand(-1, x.size(1), -1)
    return torch.gather(x, 2, lo) * (1 - w) + torch.gather(x, 2, lo + 1) * w


def add_dropout_hooks(model: ConformerCtcModel, p: float):
    """Dropout on each residual branch and after the subsampling (WeNet's
    dropout_rate placement, approximately). Active only in train mode."""
    if p <= 0:
        return []
    drop = nn.Dropout(p)

    def hook(module, inputs, output):
        if not module.training:
            return output
        if isinstance(output, tuple):
            return (drop(output[0]),) + tuple(output[1:])
        return drop(output)

    handles = [model.encoder.embed.register_forward_hook(hook)]
    for layer in model.encoder.encoders:
        for m in (layer.feed_forward_macaron, layer.self_attn, layer.conv_module,
                  layer.feed_forward):
            handles.append(m.register_forward_hook(hook))
    return handles


class PositionCache:
    """The spec's sinusoid table on the model's device, grown on demand."""

    def __init__(self, d: int):
        self.d = d
        self.table = None

    def get(self, t: int, device) -> torch.Tensor:
        if self.table is None or self.table.size(0) < t or self.table.device != device:
            n = max(t, 1024 if self.table is None else 2 * self.table.size(0))
            self.table = position_table(0, n, self.d).to(device)
        return self.table[:t]


def encode(model: ConformerCtcModel, feats: torch.Tensor, lengths: torch.Tensor,
           chunk_size: int, num_left_chunks: int, positions: PositionCache,
           specaug_gen: torch.Generator = None, max_warp: float = 0.0):
    """feats (B, T, 80) raw fbank (padded), lengths (B,) ->
    (CTC log-probs (B, T', V) float32, output lengths (B,)). With specaug_gen
    (training) the features get freq_warp (when max_warp > 0) and SpecAugment."""
    enc = model.encoder
    if specaug_gen is not None and max_warp > 0:
        feats = freq_warp(feats, specaug_gen, max_warp)
    x = enc.global_cmvn(feats)
    if specaug_gen is not None:
        x = spec_augment(x, lengths, specaug_gen)
    x = enc.embed(x) * math.sqrt(enc.cfg.output_size)
    t = x.size(1)
    out_len = output_lengths(lengths).clamp(min=1, max=t)
    pos = positions.get(t, x.device).to(x.dtype)
    mask = attention_mask(out_len, t, chunk_size, num_left_chunks)
    empty_att = torch.zeros(0, 0, 0, 0)
    empty_cnn = torch.zeros(0, 0, 0)
    for layer in enc.encoders:
        x, _, _ = layer(x, pos, mask, empty_att, empty_cnn)
    x = enc.after_norm(x)
    return torch.log_softmax(model.ctc.ctc_lo(x).float(), dim=-1), out_len


def greedy_decode(log_probs: torch.Tensor, length: int):
    """CTC best path of (T', V) log-probs: unit ids, repeats and blanks removed."""
    best = log_probs[:length].argmax(-1).tolist()
    out, prev = [], -1
    for k in best:
        if k != prev and k != 0:
            out.append(k)
        prev = k
    return out
