"""A TorchScript export of the reference shaped like WeNet's runtime model.

WeNet's `wenet/bin/export_jit.py` saves `torch.jit.script(ASRModel)` as
final.zip; its C++ runtime calls the methods subsampling_rate(),
right_context(), sos_symbol(), eos_symbol(), is_bidirectional_decoder(),
forward_encoder_chunk(...), ctc_activation(...) and
forward_attention_decoder(...). Scripting also keeps every module's plain
attributes, e.g. encoder.static_chunk_size, encoder.use_dynamic_chunk,
encoder.use_dynamic_left_chunk, the conv modules' lorder and the attention
modules' h and d_k, and the training weights ctc_weight and reverse_weight.

`RuntimeModel` carries the same state_dict names (encoder.*, decoder.*,
ctc.ctc_lo.*, plus WeNet v3's registered `pe` position buffers when asked),
the same methods and the same attributes, so that tests can give
tools/convert_wenet.py a final.zip without WeNet. It is written from the
shape of WeNet's export, not from its code.
"""

import copy
from typing import Tuple

import torch
from torch import nn

from .model import ConformerCtcModel, position_table


class RuntimeModel(nn.Module):
    def __init__(self, model: ConformerCtcModel, decoder: nn.Module, sos: int, eos: int,
                 ctc_weight: float = 0.3, reverse_weight: float = 0.0,
                 static_chunk_size: int = 0, use_dynamic_chunk: bool = True,
                 use_dynamic_left_chunk: bool = False, pe_buffers: bool = True):
        """model: the encoder and CTC (copied); decoder: a decoder.TransformerDecoder
        or BiTransformerDecoder (copied). pe_buffers adds WeNet v3's registered
        5000-row position tables (encoder.embed.pos_enc.pe, decoder ... embed.1.pe),
        which v2 kept out of the state_dict."""
        super().__init__()
        self.encoder = copy.deepcopy(model.encoder)
        self.ctc = copy.deepcopy(model.ctc)
        self.decoder = copy.deepcopy(decoder)
        self.sos = sos
        self.eos = eos
        self.vocab_size = model.cfg.output_dim
        self.ignore_id = -1
        self.ctc_weight = ctc_weight
        self.reverse_weight = reverse_weight
        self.bidirectional = hasattr(decoder, "right_decoder")
        self.encoder.static_chunk_size = static_chunk_size
        self.encoder.use_dynamic_chunk = use_dynamic_chunk
        self.encoder.use_dynamic_left_chunk = use_dynamic_left_chunk
        self.encoder.normalize_before = True
        d = model.cfg.output_size
        if pe_buffers:
            table = position_table(0, 5000, d).unsqueeze(0)
            self.encoder.embed.pos_enc = nn.Module()
            self.encoder.embed.pos_enc.register_buffer("pe", table.clone())
            sides = ([self.decoder.left_decoder, self.decoder.right_decoder] if self.bidirectional
                     else [self.decoder])
            for side in sides:
                side.embed[1].register_buffer("pe", table.clone())
        self.eval()

    @torch.jit.unused
    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("training forward is not exported")

    @torch.jit.export
    def subsampling_rate(self) -> int:
        return self.encoder.embed.subsampling_rate

    @torch.jit.export
    def right_context(self) -> int:
        return self.encoder.embed.right_context

    @torch.jit.export
    def sos_symbol(self) -> int:
        return self.sos

    @torch.jit.export
    def eos_symbol(self) -> int:
        return self.eos

    @torch.jit.export
    def is_bidirectional_decoder(self) -> bool:
        return self.bidirectional

    @torch.jit.export
    def forward_encoder_chunk(self, xs: torch.Tensor, offset: int, required_cache_size: int,
                              att_cache: torch.Tensor = torch.zeros(0, 0, 0, 0),
                              cnn_cache: torch.Tensor = torch.zeros(0, 0, 0, 0)
                              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """xs (1, T, 80) raw fbank of one chunk window; caches in WeNet's
        dense layout. Returns (encoder output (1, c, d), att_cache, cnn_cache)."""
        return self.encoder.forward_chunk(xs, offset, required_cache_size, att_cache, cnn_cache)

    @torch.jit.export
    def ctc_activation(self, xs: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.ctc.ctc_lo(xs), dim=-1)

    @torch.jit.export
    def forward_attention_decoder(self, hyps: torch.Tensor, hyps_lens: torch.Tensor,
                                  encoder_out: torch.Tensor, reverse_weight: float = 0.0
                                  ) -> Tuple[torch.Tensor, torch.Tensor]:
        """hyps (N, L) int64: sos then the hypothesis, padded; hyps_lens (N,)
        counting sos; encoder_out (1, T, d). Returns the left and right
        decoders' log-probs (N, L, V); the right decoder reads sos then the
        hypothesis reversed (padded with eos), and is a 0-dim tensor when not run."""
        n = hyps.size(0)
        memory = encoder_out.repeat(n, 1, 1)
        body_lens = hyps_lens - 1
        width = hyps.size(1) - 1
        pos = torch.arange(width, device=hyps.device).unsqueeze(0)
        inside = pos < body_lens.unsqueeze(1)
        source = torch.clamp(body_lens.unsqueeze(1) - 1 - pos, min=0)
        body = torch.gather(hyps[:, 1:], 1, source)
        body = torch.where(inside, body, torch.full_like(body, self.eos))
        r_hyps = torch.cat([hyps[:, :1], body], dim=1)
        left, right = self.decoder.forward_pair(memory, None, hyps, hyps_lens, r_hyps,
                                                reverse_weight)
        return torch.log_softmax(left, dim=-1), torch.log_softmax(right, dim=-1)

