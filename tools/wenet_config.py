"""Reads a WeNet train.yaml (v2 or v3 layout) for tools/convert_wenet.py.

Every field WeNet's ConformerEncoder, TransformerDecoder and
BiTransformerDecoder accept takes WeNet's own default when absent (the
keyword defaults of wenet-e2e/wenet v2.2.1 and v3.1.0, which agree where both
have the keyword; v3.1.0 adds keywords, WeNet's main after it adds a few
more). Options that would change the maths the server implements are refused
with a message naming the field and its value (and saying when that value is
WeNet's default for an absent field), never converted approximately.

Layouts:
  v2: cmvn_file / is_json_cmvn at the top level; sos = eos = V - 1.
  v3: cmvn: global_cmvn with cmvn_conf.{cmvn_file,is_json_cmvn};
      tokenizer / tokenizer_conf.{symbol_table_path,bpe_path,special_tokens};
      ctc_conf.ctc_blank_id; model: asr_model.
Relative paths resolve against the yaml's folder (see `resolve_path`).
"""

import os
from dataclasses import dataclass, field
from typing import List, Optional

from tools.reference.decoder import DecoderConfig
from tools.reference.model import ModelConfig


class ConversionError(Exception):
    pass


# WeNet's ConformerEncoder keyword defaults.
ENCODER_DEFAULTS = {
    # v2.2.1 and v3.1.0
    "output_size": 256, "attention_heads": 4, "linear_units": 2048, "num_blocks": 6,
    "dropout_rate": 0.1, "positional_dropout_rate": 0.1, "attention_dropout_rate": 0.0,
    "input_layer": "conv2d", "pos_enc_layer_type": "rel_pos", "normalize_before": True,
    "static_chunk_size": 0, "use_dynamic_chunk": False, "use_dynamic_left_chunk": False,
    "positionwise_conv_kernel_size": 1, "macaron_style": True,
    "selfattention_layer_type": "rel_selfattn", "activation_type": "swish",
    "use_cnn_module": True, "cnn_module_kernel": 15, "causal": False,
    "cnn_module_norm": "batch_norm",
    # v3.1.0
    "query_bias": True, "key_bias": True, "value_bias": True, "conv_bias": True,
    "gradient_checkpointing": False, "use_sdpa": False, "layer_norm_type": "layer_norm",
    "norm_eps": 1e-5, "n_kv_head": None, "head_dim": None,
    "mlp_type": "position_wise_feed_forward", "mlp_bias": True, "n_expert": 8,
    "n_expert_activated": 2,
    # WeNet's main after v3.1.0
    "conv_norm_eps": 1e-5, "conv_inner_factor": 2, "final_norm": True,
}
# Keywords of older WeNet releases, accepted at the value that means the
# served maths only.
ENCODER_LEGACY = {"concat_after": False, "zero_triu": False, "cnn_module_activation": "swish"}
# Training-only or unused by the Conformer (positionwise_conv_kernel_size;
# n_expert* only matter for mlp_type moe): any value.
ENCODER_ANY = {"dropout_rate", "positional_dropout_rate", "attention_dropout_rate",
               "use_dynamic_left_chunk", "gradient_checkpointing", "use_sdpa",
               "positionwise_conv_kernel_size", "n_expert", "n_expert_activated"}
# Accepted values of the options that shape the maths (first = the one served).
ENCODER_VALUES = {
    "input_layer": ("conv2d", "conv2d6", "conv2d8"),
    "pos_enc_layer_type": ("rel_pos",),
    "selfattention_layer_type": ("rel_selfattn",),
    "normalize_before": (True,), "macaron_style": (True,), "activation_type": ("swish",),
    "use_cnn_module": (True,), "causal": (True,), "cnn_module_norm": ("layer_norm", "batch_norm"),
    "query_bias": (True,), "key_bias": (True,), "value_bias": (True,), "conv_bias": (True,),
    "layer_norm_type": ("layer_norm",), "norm_eps": (1e-5,),
    "mlp_type": ("position_wise_feed_forward",), "mlp_bias": (True,),
    "conv_norm_eps": (1e-5,), "conv_inner_factor": (2,), "final_norm": (True,),
    "use_dynamic_chunk": (True, False),
}
ENCODER_INTS = {"output_size": (1, 65536), "attention_heads": (1, 65536),
                "linear_units": (1, 65536), "num_blocks": (1, 256),
                "cnn_module_kernel": (2, 1024), "static_chunk_size": (0, 1 << 20)}

# WeNet's TransformerDecoder / BiTransformerDecoder keyword defaults
# (r_num_blocks: BiTransformerDecoder only).
DECODER_DEFAULTS = {
    # v2.2.1 and v3.1.0
    "attention_heads": 4, "linear_units": 2048, "num_blocks": 6, "r_num_blocks": 0,
    "dropout_rate": 0.1, "positional_dropout_rate": 0.1, "self_attention_dropout_rate": 0.0,
    "src_attention_dropout_rate": 0.0, "input_layer": "embed", "use_output_layer": True,
    "normalize_before": True, "src_attention": True,
    # v3.1.0
    "query_bias": True, "key_bias": True, "value_bias": True, "activation_type": "relu",
    "gradient_checkpointing": False, "tie_word_embedding": False, "use_sdpa": False,
    "layer_norm_type": "layer_norm", "norm_eps": 1e-5, "n_kv_head": None, "head_dim": None,
    "mlp_type": "position_wise_feed_forward", "mlp_bias": True, "n_expert": 8,
    "n_expert_activated": 2,
}
DECODER_ANY = {"dropout_rate", "positional_dropout_rate", "self_attention_dropout_rate",
               "src_attention_dropout_rate", "gradient_checkpointing", "use_sdpa",
               "tie_word_embedding", "n_expert", "n_expert_activated"}
DECODER_VALUES = {
    "input_layer": ("embed", "abs_pos"),  # both: token embedding + absolute sinusoid
    "use_output_layer": (True,), "normalize_before": (True,), "src_attention": (True,),
    "query_bias": (True,), "key_bias": (True,), "value_bias": (True,),
    "activation_type": ("relu",), "layer_norm_type": ("layer_norm",), "norm_eps": (1e-5,),
    "mlp_type": ("position_wise_feed_forward",), "mlp_bias": (True,),
}
DECODER_INTS = {"attention_heads": (1, 65536), "linear_units": (1, 65536),
                "num_blocks": (1, 256), "r_num_blocks": (0, 256)}
NO_DECODER_HINT = "; pass --no-decoder to convert the encoder and CTC only"


def _value_text(value, absent: bool) -> str:
    return f"{value} (WeNet's default; the field is absent)" if absent else f"{value}"


def _int_field(where: str, key: str, value, limits, absent: bool) -> int:
    lo, hi = limits
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConversionError(f"train.yaml: {where}{key}={_value_text(value, absent)} is not "
                              f"an integer in [{lo}, {hi}]")
    return value


def _as_number(value):
    """YAML 1.1 reads 1e-5 (no dot) as a string; WeNet's keyword gets it as
    written, so a float option compares its numeric value."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _same(value, allowed) -> bool:
    if isinstance(allowed, float):
        value = _as_number(value)
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == allowed
    return type(value) is type(allowed) and value == allowed


def _check_value(where: str, key: str, value, allowed, absent: bool, what: str = "",
                 hint: str = ""):
    if not any(_same(value, a) for a in allowed):
        raise ConversionError(
            f"train.yaml: unsupported option {where}{key}={_value_text(value, absent)}"
            f"{' (' + what + ')' if what else ''} "
            f"(supported: {', '.join(str(a) for a in allowed)}){hint}")


# Named meanings of refused values, so the message says what the model is.
_ENCODER_WHAT = {
    ("pos_enc_layer_type", "rope_pos"): "rotary positions",
    ("selfattention_layer_type", "shaw_rel_selfattn"): "Shaw relative positions",
    ("selfattention_layer_type", "rope_abs_selfattn"): "rotary positions",
    ("selfattention_layer_type", "grouped_rel_selfattn"): "grouped attention",
    ("causal", False): "a non-causal conv module cannot stream",
    ("mlp_type", "gated"): "a gated MLP", ("mlp_type", "moe"): "a mixture of experts",
    ("layer_norm_type", "rms_norm"): "RMSNorm",
}


def encoder_config(train: dict, input_dim: int, output_dim: int) -> ModelConfig:
    """ModelConfig from train.yaml's encoder / encoder_conf (defaults filled)."""
    encoder = train.get("encoder", "conformer")
    if encoder != "conformer":
        absent = "encoder" not in train
        raise ConversionError(f"train.yaml: unsupported option encoder="
                              f"{_value_text(encoder, absent)} (supported: conformer)")
    conf = train.get("encoder_conf") or {}
    if not isinstance(conf, dict):
        raise ConversionError("train.yaml: encoder_conf is not a mapping")
    for key, value in conf.items():
        if key not in ENCODER_DEFAULTS and key not in ENCODER_LEGACY:
            raise ConversionError(f"train.yaml: unknown option encoder_conf.{key}={value}")
    values = {k: conf.get(k, v) for k, v in ENCODER_DEFAULTS.items()}
    p = "encoder_conf."
    for key, allowed in ENCODER_LEGACY.items():
        if key in conf:
            _check_value(p, key, conf[key], (allowed,), False)
    for key, limits in ENCODER_INTS.items():
        _int_field(p, key, values[key], limits, key not in conf)
    for key, allowed in ENCODER_VALUES.items():
        value = values[key]
        _check_value(p, key, value, allowed, key not in conf,
                     _ENCODER_WHAT.get((key, value), "") if isinstance(value, (str, bool)) else "")
    d, h = values["output_size"], values["attention_heads"]
    if d % h != 0:
        raise ConversionError(f"train.yaml: encoder_conf.output_size={d} is not a multiple of "
                              f"encoder_conf.attention_heads={h}")
    if values["n_kv_head"] not in (None, h):
        raise ConversionError(f"train.yaml: unsupported option encoder_conf.n_kv_head="
                              f"{values['n_kv_head']} (grouped KV heads; supported: None or "
                              f"attention_heads={h})")
    if values["head_dim"] not in (None, d // h):
        raise ConversionError(f"train.yaml: unsupported option encoder_conf.head_dim="
                              f"{values['head_dim']} (supported: None or output_size / "
                              f"attention_heads = {d // h})")
    if values["static_chunk_size"] == 0 and not values["use_dynamic_chunk"]:
        raise ConversionError(
            "train.yaml: encoder_conf.static_chunk_size="
            f"{_value_text(0, 'static_chunk_size' not in conf)} with use_dynamic_chunk="
            f"{_value_text(values['use_dynamic_chunk'], 'use_dynamic_chunk' not in conf)} is a "
            "full-context model, which cannot be served chunk by chunk")
    return ModelConfig(input_dim=input_dim, output_dim=output_dim, output_size=d,
                       attention_heads=h, linear_units=values["linear_units"],
                       num_blocks=values["num_blocks"], input_layer=values["input_layer"],
                       cnn_module_kernel=values["cnn_module_kernel"],
                       cnn_module_norm=values["cnn_module_norm"], causal=True,
                       static_chunk_size=values["static_chunk_size"],
                       use_dynamic_chunk=values["use_dynamic_chunk"])


def decoder_config(train: dict, d: int):
    """(DecoderConfig, tie_word_embedding) from train.yaml's decoder /
    decoder_conf (defaults filled)."""
    kind = train.get("decoder", "bitransformer")
    if kind not in ("transformer", "bitransformer"):
        raise ConversionError(f"train.yaml: unsupported option decoder="
                              f"{_value_text(kind, 'decoder' not in train)} (supported: "
                              f"transformer, bitransformer){NO_DECODER_HINT}")
    conf = train.get("decoder_conf") or {}
    if not isinstance(conf, dict):
        raise ConversionError("train.yaml: decoder_conf is not a mapping")
    p = "decoder_conf."
    for key, value in conf.items():
        if key not in DECODER_DEFAULTS or (key == "r_num_blocks" and kind == "transformer"):
            raise ConversionError(f"train.yaml: unknown option {p}{key}={value} "
                                  f"(decoder={kind}){NO_DECODER_HINT}")
    values = {k: conf.get(k, v) for k, v in DECODER_DEFAULTS.items()}
    for key, limits in DECODER_INTS.items():
        _int_field(p, key, values[key], limits, key not in conf)
    for key, allowed in DECODER_VALUES.items():
        _check_value(p, key, values[key], allowed, key not in conf, hint=NO_DECODER_HINT)
    h = values["attention_heads"]
    if d % h != 0:
        raise ConversionError(f"train.yaml: decoder_conf.attention_heads={h} does not divide "
                              f"encoder_conf.output_size={d}{NO_DECODER_HINT}")
    for key, ok in (("n_kv_head", (None, h)), ("head_dim", (None, d // h))):
        if values[key] not in ok:
            raise ConversionError(f"train.yaml: unsupported option {p}{key}={values[key]} "
                                  f"(supported: {ok[0]} or {ok[1]}){NO_DECODER_HINT}")
    if kind == "bitransformer" and values["r_num_blocks"] < 1:
        raise ConversionError(
            f"train.yaml: decoder_conf.r_num_blocks="
            f"{_value_text(values['r_num_blocks'], 'r_num_blocks' not in conf)}: a "
            f"bitransformer needs right-to-left blocks{NO_DECODER_HINT}")
    return (DecoderConfig(kind, h, values["linear_units"], values["num_blocks"],
                          values["r_num_blocks"] if kind == "bitransformer" else 0),
            bool(values["tie_word_embedding"]))


@dataclass
class CmvnSpec:
    """What train.yaml says about the global CMVN."""

    stated: bool            # False: the yaml does not say (a v2 recipe conf)
    path: Optional[str]     # None with stated: trained without global CMVN
    is_json: bool = True
    field: str = ""         # the yaml field that names the path


@dataclass
class TrainConfig:
    layout: str                         # "v2" or "v3"
    model: ModelConfig                  # output_dim None when the yaml lacks it
    decoder: Optional[DecoderConfig]    # None when not asked for
    decoder_error: Optional[str]        # why the decoder cannot be converted
    decoder_tied: bool                  # decoder_conf.tie_word_embedding
    sos: Optional[int]                  # None: V - 1 (WeNet's default)
    eos: Optional[int]
    cmvn: CmvnSpec
    units: List[str] = field(default_factory=list)  # candidate units.txt paths
    units_field: str = ""
    bpe: List[str] = field(default_factory=list)  # candidate bpe model paths (yaml)
    tokenizer: str = "char"
    train_reverse_weight: float = 0.0   # model_conf.reverse_weight (a training weight)
    train_ctc_weight: float = 0.5       # model_conf.ctc_weight: 1 leaves the decoder untrained


def resolve_path(value: str, yaml_dir: str) -> List[str]:
    """Where a path written in train.yaml may be: as written when absolute,
    else relative to the yaml's folder, then its file name in that folder
    (WeNet writes paths relative to the recipe folder; its released models
    put the files beside train.yaml)."""
    if os.path.isabs(value):
        return [value, os.path.join(yaml_dir, os.path.basename(value))]
    return [os.path.join(yaml_dir, value), os.path.join(yaml_dir, os.path.basename(value))]


def first_existing(paths: List[str]) -> Optional[str]:
    for p in paths:
        if os.path.isfile(p):
            return p
    return None


def _layout(train: dict) -> str:
    v3 = [k for k in ("cmvn", "cmvn_conf", "tokenizer", "tokenizer_conf", "ctc", "ctc_conf",
                      "model", "dataset") if k in train]
    v2 = [k for k in ("cmvn_file", "is_json_cmvn") if k in train]
    if v3 and v2:
        raise ConversionError(f"train.yaml mixes the v2 layout ({', '.join(v2)}) and the v3 "
                              f"layout ({', '.join(v3)}); keep one")
    return "v3" if v3 else "v2"


def _input_dim(train: dict) -> int:
    fbank = (train.get("dataset_conf") or {}).get("fbank_conf") or {}
    dataset = train.get("dataset_conf") or {}
    for key in ("mfcc_conf", "log_mel_spectrogram_conf"):
        if key in dataset:
            raise ConversionError(f"train.yaml: unsupported option dataset_conf.{key} (the "
                                  "server's front end is an 80-bin Kaldi fbank)")
    for key, want in (("num_mel_bins", 80), ("frame_length", 25), ("frame_shift", 10)):
        if key in fbank and fbank[key] != want:
            raise ConversionError(f"train.yaml: unsupported option dataset_conf.fbank_conf."
                                  f"{key}={fbank[key]} (the server's front end uses {want})")
    rate = (dataset.get("resample_conf") or {}).get("resample_rate", 16000)
    if rate != 16000:
        raise ConversionError(f"train.yaml: unsupported option dataset_conf.resample_conf."
                              f"resample_rate={rate} (the server's front end runs at 16000)")
    if "input_dim" in train:
        value = train["input_dim"]
    elif "num_mel_bins" in fbank:
        value = fbank["num_mel_bins"]
    else:
        raise ConversionError("train.yaml: missing field 'input_dim' (and no "
                              "dataset_conf.fbank_conf.num_mel_bins)")
    if value != 80:
        raise ConversionError(f"train.yaml: unsupported option input_dim={value} (the front "
                              "end makes 80 mel bins)")
    return value


def read_train_config(train: dict, yaml_dir: str, want_decoder: bool = True) -> TrainConfig:
    """Checks a parsed train.yaml and returns what conversion needs. Raises
    ConversionError naming the field, its value and what is supported."""
    if not isinstance(train, dict):
        raise ConversionError("train.yaml: not a mapping")
    layout = _layout(train)
    input_dim = _input_dim(train)
    output_dim = train.get("output_dim")
    if output_dim is not None:
        _int_field("", "output_dim", output_dim, (2, 1 << 20), False)
    for key, what in (("predictor", "a transducer"), ("paraformer", "a paraformer"),
                      ("cif_predictor_conf", "a paraformer")):
        if key in train:
            raise ConversionError(f"train.yaml: unsupported option {key} ({what}; supported: "
                                  "the CTC/attention asr_model)")
    if train.get("model", "asr_model") != "asr_model":
        raise ConversionError(f"train.yaml: unsupported option model={train['model']} "
                              "(supported: asr_model)")
    if train.get("ctc", "ctc") != "ctc":
        raise ConversionError(f"train.yaml: unsupported option ctc={train['ctc']} "
                              "(supported: ctc)")
    blank = (train.get("ctc_conf") or {}).get("ctc_blank_id", 0)
    if blank != 0:
        raise ConversionError(f"train.yaml: unsupported option ctc_conf.ctc_blank_id={blank} "
                              "(supported: 0)")
    model = encoder_config(train, input_dim, output_dim)

    model_conf = train.get("model_conf") or {}
    reverse_weight = model_conf.get("reverse_weight", 0.0)
    decoder, decoder_error, tied = None, None, False
    if want_decoder:
        try:
            decoder, tied = decoder_config(train, model.output_size)
            if model_conf.get("apply_non_blank_embedding", False):
                raise ConversionError(
                    "train.yaml: unsupported option model_conf.apply_non_blank_embedding="
                    f"True (the decoder reads CTC-filtered frames){NO_DECODER_HINT}")
        except ConversionError as e:
            decoder_error = str(e)

    sos = eos = None
    tokenizer = "char"
    units, units_field, bpe = [], "", []
    if layout == "v3":
        tokenizer = train.get("tokenizer", "char")
        if tokenizer not in ("char", "bpe"):
            raise ConversionError(f"train.yaml: unsupported option tokenizer={tokenizer} "
                                  "(supported: char, bpe)")
        tconf = train.get("tokenizer_conf") or {}
        special = tconf.get("special_tokens") or {}
        sos, eos = special.get("<sos>"), special.get("<eos>")
        if tconf.get("symbol_table_path"):
            units = resolve_path(tconf["symbol_table_path"], yaml_dir)
            units_field = f"tokenizer_conf.symbol_table_path={tconf['symbol_table_path']}"
        if tconf.get("bpe_path"):
            bpe = resolve_path(tconf["bpe_path"], yaml_dir)
        cmvn_kind = train.get("cmvn")
        if cmvn_kind not in (None, "global_cmvn"):
            raise ConversionError(f"train.yaml: unsupported option cmvn={cmvn_kind} "
                                  "(supported: global_cmvn, or none)")
        if cmvn_kind == "global_cmvn":
            cconf = train.get("cmvn_conf") or {}
            if not cconf.get("cmvn_file"):
                raise ConversionError("train.yaml: cmvn=global_cmvn needs "
                                      "cmvn_conf.cmvn_file")
            cmvn = CmvnSpec(True, cconf["cmvn_file"], bool(cconf.get("is_json_cmvn", True)),
                            "cmvn_conf.cmvn_file")
        else:
            cmvn = CmvnSpec(True, None)
    else:
        if "cmvn_file" in train:
            cmvn = CmvnSpec(True, train["cmvn_file"], bool(train.get("is_json_cmvn", True)),
                            "cmvn_file")
        else:
            cmvn = CmvnSpec(False, None, bool(train.get("is_json_cmvn", True)))
    units.append(os.path.join(yaml_dir, "units.txt"))
    return TrainConfig(layout, model, decoder, decoder_error, tied, sos, eos, cmvn, units,
                       units_field, bpe, tokenizer, float(reverse_weight),
                       float(model_conf.get("ctc_weight", 0.5)))
