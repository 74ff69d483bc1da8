"""Speech codec round trips for training audio: GSM 06.10 and Opus.

A telephone or VoIP call reaches a recogniser through a codec: GSM full
rate (2G mobile networks, many voicemail and PBX recordings) at 13 kbit/s
on 8 kHz audio, or Opus (VoIP, WebRTC) at 6-24 kbit/s with packets lost on
the way. synth.py passes a share of its training utterances through one of
them, once, when they are made (a codec costs too much CPU per utterance to
run at every training step the way augment.py's G.711 does).

The codecs are Debian's own libraries (libgsm1, libopus0), loaded with
ctypes; `available()` names those this machine has (tools/train/
fetch_debs.sh carries them to a GPU machine, unpack_debs.sh puts them on
LD_LIBRARY_PATH).

    y = round_trip(x, {"codec": "gsm"})                             # 16 kHz in and out
    y = round_trip(x, {"codec": "opus", "bitrate": 8000, "loss": 0.02, "seed": 7})
"""

import ctypes
import random

import torch

from tools.train import augment

SAMPLE_RATE = 16000
GSM_RATE = 8000
GSM_FRAME = 160  # samples of 8 kHz audio in a 33-byte frame
GSM_BYTES = 33
OPUS_FRAME_MS = 20
OPUS_APPLICATION_VOIP = 2048
OPUS_SET_BITRATE_REQUEST = 4002
OPUS_GET_LOOKAHEAD_REQUEST = 4027
OPUS_BITRATES = (6000, 8000, 12000, 16000, 24000)
OPUS_MAX_PACKET = 1500

_LIBS = {}


def _load(codec: str):
    """The codec's library, or None when this machine does not have it."""
    if codec not in _LIBS:
        name = {"gsm": "libgsm.so.1", "opus": "libopus.so.0"}[codec]
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            lib = None
        if lib is not None and codec == "gsm":
            lib.gsm_create.restype = ctypes.c_void_p
            lib.gsm_destroy.argtypes = [ctypes.c_void_p]
            lib.gsm_encode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            lib.gsm_decode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        if lib is not None and codec == "opus":
            lib.opus_encoder_create.restype = ctypes.c_void_p
            lib.opus_encoder_create.argtypes = [ctypes.c_int32, ctypes.c_int, ctypes.c_int,
                                                ctypes.POINTER(ctypes.c_int)]
            lib.opus_decoder_create.restype = ctypes.c_void_p
            lib.opus_decoder_create.argtypes = [ctypes.c_int32, ctypes.c_int,
                                                ctypes.POINTER(ctypes.c_int)]
            lib.opus_encode.restype = ctypes.c_int32
            lib.opus_encode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                        ctypes.c_void_p, ctypes.c_int32]
            lib.opus_decode.restype = ctypes.c_int
            lib.opus_decode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                        ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
            lib.opus_encoder_destroy.argtypes = [ctypes.c_void_p]
            lib.opus_decoder_destroy.argtypes = [ctypes.c_void_p]
        _LIBS[codec] = lib
    return _LIBS[codec]


def available() -> list:
    """The codecs whose library loads here, of "gsm" and "opus"."""
    return [c for c in ("gsm", "opus") if _load(c) is not None]


def _fit(y: torch.Tensor, n: int) -> torch.Tensor:
    """y cut or zero-padded to n samples."""
    return y[:n] if y.numel() >= n else torch.cat([y, y.new_zeros(n - y.numel())])


def gsm(x: torch.Tensor) -> tuple:
    """GSM 06.10 full rate: 16 kHz float in [-1, 1) -> (16 kHz float of the
    same length, bytes of the coded stream)."""
    lib = _load("gsm")
    if lib is None:
        raise RuntimeError("libgsm.so.1 is not installed (Debian package libgsm1)")
    n = x.numel()
    low = augment.to_int16(augment.resample(x.float(), SAMPLE_RATE, GSM_RATE))
    frames = -(-low.numel() // GSM_FRAME)
    pcm = _fit(low, frames * GSM_FRAME).numpy().copy()
    out = torch.zeros(frames * GSM_FRAME, dtype=torch.int16).numpy()
    frame = (ctypes.c_ubyte * GSM_BYTES)()
    handle = lib.gsm_create()
    try:
        for i in range(frames):
            src = pcm[i * GSM_FRAME:(i + 1) * GSM_FRAME]
            dst = out[i * GSM_FRAME:(i + 1) * GSM_FRAME]
            lib.gsm_encode(handle, src.ctypes.data, frame)
            if lib.gsm_decode(handle, frame, dst.ctypes.data) != 0:
                raise RuntimeError("gsm_decode failed")
    finally:
        lib.gsm_destroy(handle)
    y = torch.from_numpy(out).float() / 32768.0
    return _fit(augment.resample(y, GSM_RATE, SAMPLE_RATE), n), frames * GSM_BYTES


def opus(x: torch.Tensor, bitrate: int, loss: float = 0.0, seed: int = 0) -> tuple:
    """Opus (VoIP mode) at `bitrate` bit/s on 16 kHz audio, 20 ms packets, a
    share `loss` of them lost (the decoder conceals them) -> (16 kHz float of
    the same length and time-aligned with x, bytes of the packets sent)."""
    lib = _load("opus")
    if lib is None:
        raise RuntimeError("libopus.so.0 is not installed (Debian package libopus0)")
    n = x.numel()
    frame = SAMPLE_RATE * OPUS_FRAME_MS // 1000
    err = ctypes.c_int(0)
    enc = lib.opus_encoder_create(SAMPLE_RATE, 1, OPUS_APPLICATION_VOIP, ctypes.byref(err))
    if not enc or err.value != 0:
        raise RuntimeError(f"opus_encoder_create failed ({err.value})")
    dec = lib.opus_decoder_create(SAMPLE_RATE, 1, ctypes.byref(err))
    if not dec or err.value != 0:
        lib.opus_encoder_destroy(enc)
        raise RuntimeError(f"opus_decoder_create failed ({err.value})")
    try:
        # opus_encoder_ctl is variadic: the request's argument is passed as
        # one more int (or int pointer).
        lib.opus_encoder_ctl(ctypes.c_void_p(enc), ctypes.c_int(OPUS_SET_BITRATE_REQUEST),
                             ctypes.c_int32(int(bitrate)))
        lookahead = ctypes.c_int32(0)
        lib.opus_encoder_ctl(ctypes.c_void_p(enc), ctypes.c_int(OPUS_GET_LOOKAHEAD_REQUEST),
                             ctypes.byref(lookahead))
        delay = lookahead.value
        # The encoder's lookahead delays the output: feed that much more.
        frames = -(-(n + delay) // frame)
        pcm = _fit(augment.to_int16(x.float()), frames * frame).numpy().copy()
        out = torch.zeros(frames * frame, dtype=torch.int16).numpy()
        packet = (ctypes.c_ubyte * OPUS_MAX_PACKET)()
        lost = random.Random(seed)
        sent = 0
        for i in range(frames):
            size = lib.opus_encode(enc, pcm[i * frame:].ctypes.data, frame, packet, OPUS_MAX_PACKET)
            if size < 0:
                raise RuntimeError(f"opus_encode failed ({size})")
            sent += size
            dst = out[i * frame:].ctypes.data
            if lost.random() < loss:
                got = lib.opus_decode(dec, None, 0, dst, frame, 0)  # concealment
            else:
                got = lib.opus_decode(dec, packet, size, dst, frame, 0)
            if got != frame:
                raise RuntimeError(f"opus_decode gave {got} samples, not {frame}")
    finally:
        lib.opus_encoder_destroy(enc)
        lib.opus_decoder_destroy(dec)
    y = torch.from_numpy(out).float() / 32768.0
    return y[delay:delay + n], sent


def round_trip(x: torch.Tensor, params: dict) -> torch.Tensor:
    """x (16 kHz float) through the codec `params` names (draw()'s dict)."""
    if params["codec"] == "gsm":
        return gsm(x)[0]
    if params["codec"] == "opus":
        return opus(x, params["bitrate"], params.get("loss", 0.0), params.get("seed", 0))[0]
    raise ValueError(f"unknown codec {params['codec']!r}")


def draw(rng: random.Random, codecs: list) -> dict:
    """Random settings of one of `codecs` (available()'s names)."""
    codec = rng.choice(codecs)
    if codec == "gsm":
        return {"codec": "gsm"}
    return {"codec": "opus", "bitrate": rng.choice(OPUS_BITRATES),
            "loss": round(rng.choice([0.0, 0.0, rng.uniform(0.0, 0.05)]), 3),
            "seed": rng.randrange(1 << 30)}
