"""Reference PyTorch implementation of the streaming Conformer CTC model.

Written from docs/conformer-spec.md (the project's statement of WeNet's U2/U2++
maths). Module and parameter names follow WeNet's state_dict keys, so
`model.state_dict()` is a WeNet checkpoint's encoder + CTC part.

Three forwards, which must agree:
  * `forward_full`: the whole utterance at once with a chunk mask (offline).
  * `forward_chunk`: one chunk with dense WeNet-layout caches
    (att_cache (layers, h, t1, 2 * d_k), cnn_cache (layers, 1, d, K - 1)).
  * `forward_chunk_by_chunk`: the streaming loop over `forward_chunk`.
"""

import math
from dataclasses import dataclass, field, asdict
from typing import List, Optional, Tuple

import torch
from torch import nn

# (kernel, stride) of each Conv2d of the subsampling front, per input_layer.
SUBSAMPLING_CONVS = {
    "conv2d": [(3, 2), (3, 2)],
    "conv2d6": [(3, 2), (5, 3)],
    "conv2d8": [(3, 2), (3, 2), (3, 2)],
}
# Name of the output projection inside `embed` (WeNet's own naming).
SUBSAMPLING_OUT_NAME = {"conv2d": "out.0", "conv2d6": "linear", "conv2d8": "linear"}


@dataclass
class ModelConfig:
    """Geometry, with WeNet train.yaml names (encoder_conf.* flattened)."""

    input_dim: int = 80
    output_dim: int = 5002
    output_size: int = 256
    attention_heads: int = 4
    linear_units: int = 2048
    num_blocks: int = 12
    input_layer: str = "conv2d"
    cnn_module_kernel: int = 15
    cnn_module_norm: str = "layer_norm"
    causal: bool = True
    # Fixed by the spec; kept so configs round-trip with WeNet's names.
    pos_enc_layer_type: str = "rel_pos"
    selfattention_layer_type: str = "rel_selfattn"
    normalize_before: bool = True
    macaron_style: bool = True
    activation_type: str = "swish"
    use_cnn_module: bool = True
    static_chunk_size: int = 0
    use_dynamic_chunk: bool = True

    def check(self):
        if self.input_layer not in SUBSAMPLING_CONVS:
            raise ValueError(f"unsupported input_layer {self.input_layer}")
        if self.output_size % self.attention_heads != 0:
            raise ValueError("output_size must be a multiple of attention_heads")
        if self.cnn_module_norm not in ("layer_norm", "batch_norm"):
            raise ValueError(f"unsupported cnn_module_norm {self.cnn_module_norm}")
        if not self.causal:
            raise ValueError("only causal conv modules stream exactly")

    def as_dict(self):
        return asdict(self)


def subsampling_rate(input_layer: str) -> int:
    rate = 1
    for _, stride in SUBSAMPLING_CONVS[input_layer]:
        rate *= stride
    return rate


def subsampling_right_context(input_layer: str) -> int:
    """Extra input frames beyond `rate * (n - 1) + 1` needed for n outputs."""
    context, scale = 0, 1
    for kernel, stride in SUBSAMPLING_CONVS[input_layer]:
        context += (kernel - 1) * scale
        scale *= stride
    return context


def position_table(start: int, length: int, d: int) -> torch.Tensor:
    """Sinusoid rows [start, start + length) of the spec's table, (length, d).

    The angle is one float32 multiply of float32(p) and a float32 frequency
    (as WeNet computes it); frequencies and sines are evaluated in float64 and
    rounded, so that the C++ encoder can reproduce the table bit for bit at
    any position, including far beyond WeNet's 5000 rows.
    """
    i2 = torch.arange(0, d, 2, dtype=torch.float64)
    freq = torch.exp(i2 * -(math.log(10000.0) / d)).to(torch.float32)
    pos = torch.arange(start, start + length, dtype=torch.float64).to(torch.float32)
    angle = (pos.unsqueeze(1) * freq.unsqueeze(0)).to(torch.float64)
    pe = torch.zeros(length, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.to(torch.float32)


def chunk_mask(size: int, chunk_size: int, num_left_chunks: int) -> torch.Tensor:
    """(size, size) bool, True where query frame i may attend key frame j."""
    idx = torch.arange(size)
    chunk = idx // chunk_size
    end = torch.clamp((chunk + 1) * chunk_size, max=size)
    if num_left_chunks < 0:
        start = torch.zeros_like(idx)
    else:
        start = torch.clamp((chunk - num_left_chunks) * chunk_size, min=0)
    j = idx.unsqueeze(0)
    return (j >= start.unsqueeze(1)) & (j < end.unsqueeze(1))


class GlobalCMVN(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("istd", torch.ones(dim))

    def forward(self, x):
        return (x - self.mean) * self.istd


class Subsampling(nn.Module):
    """Conv2d front: input (B, T, F) -> (B, T', d) (x sqrt(d) applied later).

    The output projection is `out.0` for conv2d and `linear` otherwise
    (WeNet's own naming); the two subclasses below hold one each, so that the
    module stays scriptable (tools/reference/wenet_jit.py exports it).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.output_size
        layers = []
        freq = cfg.input_dim
        in_ch = 1
        for kernel, stride in SUBSAMPLING_CONVS[cfg.input_layer]:
            layers += [nn.Conv2d(in_ch, d, kernel, stride), nn.ReLU()]
            in_ch = d
            freq = (freq - kernel) // stride + 1
        self.conv = nn.Sequential(*layers)
        self.out_freq = freq
        # WeNet's subsampling modules carry these two attributes.
        self.subsampling_rate = subsampling_rate(cfg.input_layer)
        self.right_context = subsampling_right_context(cfg.input_layer)

    def _flatten(self, x):
        x = self.conv(x.unsqueeze(1))  # (B, C, T', F')
        b, c, t, f = x.shape
        return x.transpose(1, 2).reshape(b, t, c * f)


class Conv2dSubsampling4(Subsampling):
    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.out = nn.Sequential(nn.Linear(cfg.output_size * self.out_freq, cfg.output_size))

    def forward(self, x):
        return self.out(self._flatten(x))


class Conv2dSubsamplingLinear(Subsampling):
    """conv2d6 and conv2d8."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.linear = nn.Linear(cfg.output_size * self.out_freq, cfg.output_size)

    def forward(self, x):
        return self.linear(self._flatten(x))


def make_subsampling(cfg: ModelConfig) -> Subsampling:
    if cfg.input_layer == "conv2d":
        return Conv2dSubsampling4(cfg)
    return Conv2dSubsamplingLinear(cfg)


class FeedForward(nn.Module):
    def __init__(self, d: int, units: int):
        super().__init__()
        self.w_1 = nn.Linear(d, units)
        self.w_2 = nn.Linear(units, d)
        # A module, as in WeNet, so that a TorchScript export names it (SiLU).
        self.activation = nn.SiLU()

    def forward(self, x):
        return self.w_2(self.activation(self.w_1(x)))


class RelPositionAttention(nn.Module):
    def __init__(self, heads: int, d: int):
        super().__init__()
        self.h = heads
        self.d_k = d // heads
        self.linear_q = nn.Linear(d, d)
        self.linear_k = nn.Linear(d, d)
        self.linear_v = nn.Linear(d, d)
        self.linear_out = nn.Linear(d, d)
        self.linear_pos = nn.Linear(d, d, bias=False)
        self.pos_bias_u = nn.Parameter(torch.empty(heads, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.empty(heads, self.d_k))
        nn.init.xavier_uniform_(self.pos_bias_u)
        nn.init.xavier_uniform_(self.pos_bias_v)

    def forward(self, x, pos, mask: Optional[torch.Tensor], cache: torch.Tensor):
        """x (B, T, d); pos (T_keys, d) table rows of the keys' absolute
        positions; mask (T, T_keys) bool or None; cache (B, h, t1, 2 d_k).
        Returns (out (B, T, d), new_cache (B, h, t1 + T, 2 d_k))."""
        b, t, _ = x.shape
        q = self.linear_q(x).view(b, t, self.h, self.d_k)
        k = self.linear_k(x).view(b, t, self.h, self.d_k).transpose(1, 2)
        v = self.linear_v(x).view(b, t, self.h, self.d_k).transpose(1, 2)
        if cache.size(2) > 0:
            k = torch.cat([cache[..., : self.d_k], k], dim=2)
            v = torch.cat([cache[..., self.d_k :], v], dim=2)
        new_cache = torch.cat([k, v], dim=-1)
        p = self.linear_pos(pos).view(-1, self.h, self.d_k).transpose(0, 1)  # (h, Tk, d_k)
        q_u = (q + self.pos_bias_u).transpose(1, 2)
        q_v = (q + self.pos_bias_v).transpose(1, 2)
        scores = (q_u @ k.transpose(-2, -1) + q_v @ p.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(b, t, self.h * self.d_k)
        return self.linear_out(out), new_cache


class ConvModule(nn.Module):
    def __init__(self, d: int, kernel: int, norm: str):
        super().__init__()
        self.pointwise_conv1 = nn.Conv1d(d, 2 * d, 1)
        self.depthwise_conv = nn.Conv1d(d, d, kernel, groups=d)
        self.use_layer_norm = norm == "layer_norm"
        self.norm = nn.LayerNorm(d) if self.use_layer_norm else nn.BatchNorm1d(d)
        self.pointwise_conv2 = nn.Conv1d(d, d, 1)
        self.activation = nn.SiLU()
        self.lorder = kernel - 1  # WeNet's name; > 0 marks a causal module

    def forward(self, x, cache: torch.Tensor):
        """x (B, T, d); cache (B, d, K - 1) or (0, 0, 0) for none.
        Returns (out (B, T, d), new_cache (B, d, K - 1))."""
        x = x.transpose(1, 2)
        if cache.size(2) == 0:
            x = nn.functional.pad(x, (self.lorder, 0))
        else:
            x = torch.cat([cache, x], dim=2)
        new_cache = x[:, :, -self.lorder :]
        x = nn.functional.glu(self.pointwise_conv1(x), dim=1)
        x = self.depthwise_conv(x)
        if self.use_layer_norm:
            x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        else:
            x = self.norm(x)
        x = self.pointwise_conv2(self.activation(x))
        return x.transpose(1, 2), new_cache


class ConformerLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.output_size
        self.self_attn = RelPositionAttention(cfg.attention_heads, d)
        self.feed_forward = FeedForward(d, cfg.linear_units)
        self.feed_forward_macaron = FeedForward(d, cfg.linear_units)
        self.conv_module = ConvModule(d, cfg.cnn_module_kernel, cfg.cnn_module_norm)
        self.norm_ff = nn.LayerNorm(d, eps=1e-5)
        self.norm_mha = nn.LayerNorm(d, eps=1e-5)
        self.norm_ff_macaron = nn.LayerNorm(d, eps=1e-5)
        self.norm_conv = nn.LayerNorm(d, eps=1e-5)
        self.norm_final = nn.LayerNorm(d, eps=1e-5)

    def forward(self, x, pos, mask: Optional[torch.Tensor], att_cache, cnn_cache):
        x = x + 0.5 * self.feed_forward_macaron(self.norm_ff_macaron(x))
        a, new_att = self.self_attn(self.norm_mha(x), pos, mask, att_cache)
        x = x + a
        c, new_cnn = self.conv_module(self.norm_conv(x), cnn_cache)
        x = x + c
        x = x + 0.5 * self.feed_forward(self.norm_ff(x))
        return self.norm_final(x), new_att, new_cnn


class ConformerEncoder(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self._output_size = cfg.output_size
        self.global_cmvn = GlobalCMVN(cfg.input_dim)
        self.embed = make_subsampling(cfg)
        self.encoders = nn.ModuleList([ConformerLayer(cfg) for _ in range(cfg.num_blocks)])
        self.after_norm = nn.LayerNorm(cfg.output_size, eps=1e-5)
        self.rate = subsampling_rate(cfg.input_layer)
        self.right_context = subsampling_right_context(cfg.input_layer)

    def _embed(self, feats):
        x = self.embed(self.global_cmvn(feats))
        return x * math.sqrt(self._output_size)

    def forward_full(self, feats, chunk_size: int, num_left_chunks: int = -1):
        """feats (B, T, F) raw fbank -> (B, T', d). chunk_size <= 0: full attention."""
        x = self._embed(feats)
        t = x.size(1)
        pos = position_table(0, t, self.cfg.output_size).to(x)
        mask = chunk_mask(t, chunk_size, num_left_chunks) if chunk_size > 0 else None
        empty = x.new_zeros(0, 0, 0, 0)
        for layer in self.encoders:
            x, _, _ = layer(x, pos, mask, empty, x.new_zeros(0, 0, 0))
        return self.after_norm(x)

    def forward_chunk(self, feats, offset: int, required_cache_size: int, att_cache, cnn_cache):
        """One chunk of a stream (batch 1).

        feats (1, T, F) raw fbank for this chunk's window; offset: encoder
        frames of the stream before this chunk; att_cache (L, h, t1, 2 d_k)
        (t1 may be 0); cnn_cache (L, 1, d, K - 1) or (0, 0, 0, 0).
        required_cache_size < 0 keeps all history, > 0 keeps that many frames.
        Returns (out (1, c, d), new_att_cache, new_cnn_cache).
        """
        x = self._embed(feats)
        c = x.size(1)
        t1 = att_cache.size(2)
        pos = position_table(offset - t1, t1 + c, self._output_size).to(x)
        new_att, new_cnn = [], []
        for i, layer in enumerate(self.encoders):
            ac = att_cache[i : i + 1] if t1 > 0 else x.new_zeros(1, 0, 0, 0)
            cc = cnn_cache[i] if cnn_cache.size(0) > 0 else x.new_zeros(0, 0, 0)
            x, a, k = layer(x, pos, None, ac, cc)
            new_att.append(a)
            new_cnn.append(k)
        start = 0 if required_cache_size < 0 else max(t1 + c - required_cache_size, 0)
        att = torch.cat(new_att, dim=0)[:, :, start:, :]
        return self.after_norm(x), att, torch.stack(new_cnn, dim=0)

    def chunk_windows(self, num_frames: int, chunk_size: int) -> List[Tuple[int, int]]:
        """Feature windows [begin, end) of consecutive chunks of a stream."""
        window = (chunk_size - 1) * self.rate + self.right_context + 1
        stride = self.rate * chunk_size
        return [(b, min(b + window, num_frames))
                for b in range(0, num_frames - self.right_context, stride)]

    def forward_chunk_by_chunk(self, feats, chunk_size: int, num_left_chunks: int = -1,
                               start_offset: int = 0):
        """Streams feats (1, T, F) through forward_chunk; returns (1, T', d)."""
        cfg = self.cfg
        d_k = cfg.output_size // cfg.attention_heads
        att_cache = feats.new_zeros(cfg.num_blocks, cfg.attention_heads, 0, 2 * d_k)
        cnn_cache = feats.new_zeros(0, 0, 0, 0)
        required = chunk_size * num_left_chunks if num_left_chunks >= 0 else -1
        offset = start_offset
        outs = []
        for begin, end in self.chunk_windows(feats.size(1), chunk_size):
            y, att_cache, cnn_cache = self.forward_chunk(
                feats[:, begin:end], offset, required, att_cache, cnn_cache)
            offset += y.size(1)
            outs.append(y)
        return torch.cat(outs, dim=1)


class CTC(nn.Module):
    def __init__(self, d: int, vocab: int):
        super().__init__()
        self.ctc_lo = nn.Linear(d, vocab)

    def forward(self, x):
        return torch.log_softmax(self.ctc_lo(x), dim=-1)


class ConformerCtcModel(nn.Module):
    """encoder + ctc, named as in a WeNet ASRModel (decoder omitted)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.check()
        self.cfg = cfg
        self.encoder = ConformerEncoder(cfg)
        self.ctc = CTC(cfg.output_size, cfg.output_dim)

    def log_probs_full(self, feats, chunk_size: int, num_left_chunks: int = -1):
        return self.ctc(self.encoder.forward_full(feats, chunk_size, num_left_chunks))

    def log_probs_streaming(self, feats, chunk_size: int, num_left_chunks: int = -1,
                            start_offset: int = 0):
        return self.ctc(self.encoder.forward_chunk_by_chunk(
            feats, chunk_size, num_left_chunks, start_offset))

    def weights_state_dict(self):
        """state_dict without BatchNorm's num_batches_tracked counters."""
        return {k: v for k, v in self.state_dict().items()
                if not k.endswith("num_batches_tracked")}


def randomize_(model: ConformerCtcModel, seed: int):
    """Gives every parameter and buffer non-trivial values (random init plus
    random biases, norms and BatchNorm statistics), so that every weight
    influences the output a parity test compares."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked") or "global_cmvn" in name:
                continue
            if name.endswith("running_var"):
                t.copy_(0.5 + torch.rand(t.shape, generator=g))
            elif name.endswith("running_mean"):
                t.copy_(0.1 * torch.randn(t.shape, generator=g))
            elif "norm" in name and name.endswith("weight"):
                t.copy_(1.0 + 0.1 * torch.randn(t.shape, generator=g))
            elif t.dim() == 1 or "pos_bias" in name:
                t.copy_(0.05 * torch.randn(t.shape, generator=g))
            else:
                fan_in = t[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                t.copy_((torch.rand(t.shape, generator=g) * 2 - 1) * bound)
    model.eval()
    return model
