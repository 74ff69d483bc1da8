"""Reference PyTorch attention decoder and attention rescoring (WeNet U2/U2++).

Written from WeNet's maths (docs/model-format.md, "Attention decoder"), so that
a C++ rescoring can be checked against it. Module and parameter names follow
WeNet's state_dict keys under `decoder.`:

  * `TransformerDecoder` (train.yaml `decoder: transformer`, U2): embed.0
    (token embedding), decoders.{i} (self_attn, src_attn, feed_forward,
    norm1..3), after_norm, output_layer.
  * `BiTransformerDecoder` (`decoder: bitransformer`, U2++): left_decoder and
    right_decoder, each a TransformerDecoder; the right one reads the
    hypothesis reversed.

One decoder layer (pre-norm, LayerNorm eps 1e-5, no dropout at inference):

    x = x + SelfAttn(norm1(x), causal and padding mask)
    x = x + SrcAttn(norm2(x), encoder output)
    x = x + w_2(relu(w_1(norm3(x))))

with input x = embed(tokens) * sqrt(d) + pe[0 .. L) (the absolute sinusoid of
model.position_table) and output log_softmax(output_layer(after_norm(x))).

`attention_rescoring` scores an n-best list as WeNet does: each hypothesis y
(without sos/eos) is fed as [sos] + y; its left-to-right score is
sum_j log P(y_j | sos, y_<j) + log P(eos | sos, y); a bidirectional decoder
also scores [sos] + reversed(y) with the right decoder, and the decoder score
is (1 - reverse_weight) * left + reverse_weight * right; the total is
rescoring_weight * decoder score + ctc_weight * CTC score, and the best total
wins (the first one on ties).
"""

import math
from dataclasses import asdict, dataclass
from typing import List, Optional, Tuple

import torch
from torch import nn

from .model import position_table

DECODER_TYPES = ("transformer", "bitransformer")


@dataclass
class DecoderConfig:
    """Decoder geometry, with WeNet's train.yaml names (decoder, decoder_conf.*)."""

    decoder: str = "bitransformer"
    attention_heads: int = 4
    linear_units: int = 2048
    num_blocks: int = 6
    r_num_blocks: int = 0  # right-to-left blocks; bitransformer only

    def check(self, d: int):
        """Raises ValueError naming the field, its value and the limit."""
        if self.decoder not in DECODER_TYPES:
            raise ValueError(f"decoder={self.decoder} (supported: {', '.join(DECODER_TYPES)})")
        for name, lo in (("attention_heads", 1), ("linear_units", 1), ("num_blocks", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < lo:
                raise ValueError(f"decoder_conf.{name}={value} is not an integer >= {lo}")
        if d % self.attention_heads != 0:
            raise ValueError(f"decoder_conf.attention_heads={self.attention_heads} does not "
                             f"divide the encoder width {d}")
        if self.decoder == "bitransformer":
            if not isinstance(self.r_num_blocks, int) or self.r_num_blocks < 1:
                raise ValueError(f"decoder_conf.r_num_blocks={self.r_num_blocks}: a "
                                 "bitransformer needs at least 1 right-to-left block")
        elif self.r_num_blocks != 0:
            raise ValueError(f"decoder_conf.r_num_blocks={self.r_num_blocks}: only a "
                             "bitransformer has right-to-left blocks (expected 0)")

    @property
    def bidirectional(self) -> bool:
        return self.decoder == "bitransformer"

    def as_dict(self):
        return asdict(self)


class MultiHeadedAttention(nn.Module):
    """Scaled dot-product attention, h heads of d_k = d / h (feature index =
    head * d_k + j), linear_q/k/v/out with biases."""

    def __init__(self, heads: int, d: int):
        super().__init__()
        self.h = heads  # WeNet's attribute names (a TorchScript export keeps them)
        self.d_k = d // heads
        self.linear_q = nn.Linear(d, d)
        self.linear_k = nn.Linear(d, d)
        self.linear_v = nn.Linear(d, d)
        self.linear_out = nn.Linear(d, d)

    def forward(self, query, key, value, mask: Optional[torch.Tensor]):
        """query (B, Tq, d), key/value (B, Tk, d); mask (B, Tq or 1, Tk) bool,
        True where a key may be seen, or None. Every query must see at least one
        key. Returns (B, Tq, d)."""
        b = query.size(0)
        q = self.linear_q(query).view(b, -1, self.h, self.d_k).transpose(1, 2)
        k = self.linear_k(key).view(b, -1, self.h, self.d_k).transpose(1, 2)
        v = self.linear_v(value).view(b, -1, self.h, self.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(b, -1, self.h * self.d_k)
        return self.linear_out(out)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d: int, units: int):
        super().__init__()
        self.w_1 = nn.Linear(d, units)
        self.w_2 = nn.Linear(units, d)
        self.activation = nn.ReLU()  # WeNet's decoder default (activation_type relu)

    def forward(self, x):
        return self.w_2(self.activation(self.w_1(x)))


class PositionalEncoding(nn.Module):
    """x * sqrt(d) + pe[0 .. T) (absolute positions; no parameters)."""

    def __init__(self, d: int):
        super().__init__()
        self.d = d
        self.xscale = math.sqrt(d)

    def forward(self, x):
        return x * self.xscale + position_table(0, x.size(1), self.d).to(x.dtype)


class DecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int, units: int):
        super().__init__()
        self.self_attn = MultiHeadedAttention(heads, d)
        self.src_attn = MultiHeadedAttention(heads, d)
        self.feed_forward = PositionwiseFeedForward(d, units)
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.norm3 = nn.LayerNorm(d, eps=1e-5)
        self.normalize_before = True

    def forward(self, x, tgt_mask, memory, memory_mask: Optional[torch.Tensor]):
        y = self.norm1(x)
        x = x + self.self_attn(y, y, y, tgt_mask)
        y = self.norm2(x)
        x = x + self.src_attn(y, memory, memory, memory_mask)
        return x + self.feed_forward(self.norm3(x))


def target_mask(ys_lens: torch.Tensor, length: int) -> torch.Tensor:
    """(B, L, L) bool: position i sees positions j <= i that are not padding."""
    idx = torch.arange(length, device=ys_lens.device)
    valid = idx.unsqueeze(0) < ys_lens.unsqueeze(1)  # (B, L)
    causal = idx.unsqueeze(0) <= idx.unsqueeze(1)    # (L, L): j <= i
    return valid.unsqueeze(1) & causal.unsqueeze(0)


class TransformerDecoder(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, units: int, num_blocks: int):
        super().__init__()
        self.embed = nn.Sequential(nn.Embedding(vocab, d), PositionalEncoding(d))
        self.decoders = nn.ModuleList([DecoderLayer(d, heads, units) for _ in range(num_blocks)])
        self.after_norm = nn.LayerNorm(d, eps=1e-5)
        self.output_layer = nn.Linear(d, vocab)
        self.num_blocks = num_blocks
        self.normalize_before = True
        self.use_output_layer = True

    def forward(self, memory, memory_mask: Optional[torch.Tensor], ys_in, ys_lens):
        """memory (B, T, d) encoder output; memory_mask (B, 1, T) bool or None
        (all valid); ys_in (B, L) int64 tokens starting with sos, padded
        anywhere past ys_lens (B,). Returns logits (B, L, V); positions past a
        row's length are unspecified."""
        x = self.embed(ys_in)
        mask = target_mask(ys_lens, ys_in.size(1))
        for layer in self.decoders:
            x = layer(x, mask, memory, memory_mask)
        return self.output_layer(self.after_norm(x))

    def forward_pair(self, memory, memory_mask: Optional[torch.Tensor], ys_in, ys_lens,
                     r_ys_in, reverse_weight: float) -> Tuple[torch.Tensor, torch.Tensor]:
        """WeNet's decoder call shape: (left logits, right logits); a
        unidirectional decoder has no right logits (a 0-dim tensor)."""
        return self.forward(memory, memory_mask, ys_in, ys_lens), torch.tensor(0.0)


class BiTransformerDecoder(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, units: int, num_blocks: int,
                 r_num_blocks: int):
        super().__init__()
        self.left_decoder = TransformerDecoder(vocab, d, heads, units, num_blocks)
        self.right_decoder = TransformerDecoder(vocab, d, heads, units, r_num_blocks)

    def forward(self, memory, memory_mask: Optional[torch.Tensor], ys_in, ys_lens):
        return self.left_decoder(memory, memory_mask, ys_in, ys_lens)

    def forward_pair(self, memory, memory_mask: Optional[torch.Tensor], ys_in, ys_lens,
                     r_ys_in, reverse_weight: float) -> Tuple[torch.Tensor, torch.Tensor]:
        """(left logits, right logits of r_ys_in); the right decoder runs only
        when reverse_weight > 0 (a 0-dim tensor otherwise), as in WeNet."""
        left = self.left_decoder(memory, memory_mask, ys_in, ys_lens)
        right = torch.tensor(0.0)
        if reverse_weight > 0.0:
            right = self.right_decoder(memory, memory_mask, r_ys_in, ys_lens)
        return left, right


def build_decoder(cfg: DecoderConfig, vocab: int, d: int) -> nn.Module:
    """The decoder module for cfg (encoder width d, V = vocab), in eval mode."""
    cfg.check(d)
    if cfg.bidirectional:
        dec = BiTransformerDecoder(vocab, d, cfg.attention_heads, cfg.linear_units,
                                   cfg.num_blocks, cfg.r_num_blocks)
    else:
        dec = TransformerDecoder(vocab, d, cfg.attention_heads, cfg.linear_units, cfg.num_blocks)
    return dec.eval()


def directions(decoder: nn.Module) -> Tuple[TransformerDecoder, Optional[TransformerDecoder]]:
    """(left-to-right decoder, right-to-left decoder or None)."""
    if isinstance(decoder, BiTransformerDecoder):
        return decoder.left_decoder, decoder.right_decoder
    return decoder, None


def pad_hyps(hyps: List[List[int]], sos: int, eos: int, reverse: bool = False):
    """WeNet's decoder input: [sos] + hyp (reversed when asked), padded with
    eos. Returns (ys_in (N, L) int64, lens (N,) = len(hyp) + 1)."""
    length = 1 + max((len(h) for h in hyps), default=0)
    ys = torch.full((len(hyps), length), eos, dtype=torch.long)
    ys[:, 0] = sos
    for i, h in enumerate(hyps):
        if h:
            ys[i, 1:1 + len(h)] = torch.tensor(h[::-1] if reverse else h, dtype=torch.long)
    return ys, torch.tensor([len(h) + 1 for h in hyps], dtype=torch.long)


def decoder_log_probs(dec: TransformerDecoder, encoder_out: torch.Tensor,
                      hyps: List[List[int]], sos: int, eos: int, reverse: bool = False):
    """log_softmax of one direction for every hypothesis of one utterance.

    encoder_out (T, d); returns (N, 1 + max len, V) float32; row i is valid up
    to len(hyps[i]) inclusive (the eos position)."""
    ys, lens = pad_hyps(hyps, sos, eos, reverse)
    memory = encoder_out.unsqueeze(0).expand(len(hyps), -1, -1)
    with torch.no_grad():
        return torch.log_softmax(dec(memory, None, ys, lens), dim=-1)


def sequence_score(log_probs: torch.Tensor, hyp: List[int], eos: int) -> float:
    """sum_j log_probs[j, hyp[j]] + log_probs[len(hyp), eos], in float64."""
    lp = log_probs.double()
    return float(sum(lp[j, w] for j, w in enumerate(hyp)) + lp[len(hyp), eos])


@dataclass
class RescoringResult:
    best: int                 # index into the n-best
    scores: List[float]       # rescoring_weight * decoder + ctc_weight * ctc
    left_scores: List[float]  # left-to-right decoder scores
    right_scores: List[float]  # right-to-left scores (zeros without a right decoder)
    decoder_scores: List[float]  # the two directions combined by reverse_weight


def attention_rescoring(decoder: nn.Module, encoder_out: torch.Tensor, hyps: List[List[int]],
                        ctc_scores: List[float], sos: int, eos: int, ctc_weight: float,
                        reverse_weight: float = 0.0,
                        rescoring_weight: float = 1.0) -> RescoringResult:
    """Rescores one utterance's n-best (token ids without sos/eos, each with its
    CTC prefix score) with the attention decoder; see the module docstring.

    reverse_weight must be in [0, 1] and 0 for a unidirectional decoder (WeNet's
    Python ignores it there; its C++ runtime would still scale the left score
    by 1 - reverse_weight, so it is refused instead of guessed)."""
    if len(hyps) != len(ctc_scores) or not hyps:
        raise ValueError(f"{len(hyps)} hypotheses with {len(ctc_scores)} CTC scores")
    if not 0.0 <= reverse_weight <= 1.0:
        raise ValueError(f"reverse_weight={reverse_weight} is outside [0, 1]")
    left, right = directions(decoder)
    if right is None and reverse_weight != 0.0:
        raise ValueError(f"reverse_weight={reverse_weight} needs a bitransformer decoder "
                         "(this one has no right-to-left blocks; use 0)")
    l_lp = decoder_log_probs(left, encoder_out, hyps, sos, eos)
    left_scores = [sequence_score(l_lp[i], h, eos) for i, h in enumerate(hyps)]
    right_scores = [0.0] * len(hyps)
    if right is not None and reverse_weight > 0.0:
        r_lp = decoder_log_probs(right, encoder_out, hyps, sos, eos, reverse=True)
        right_scores = [sequence_score(r_lp[i], h[::-1], eos) for i, h in enumerate(hyps)]
        dec_scores = [(1.0 - reverse_weight) * l + reverse_weight * r
                      for l, r in zip(left_scores, right_scores)]
    else:
        dec_scores = list(left_scores)
    scores = [rescoring_weight * s + ctc_weight * c for s, c in zip(dec_scores, ctc_scores)]
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return RescoringResult(best, scores, left_scores, right_scores, dec_scores)
