"""Speech codec round trips for training audio: GSM 06.10, Opus and G.722.

A telephone or VoIP call reaches a recogniser through a codec: GSM full
rate (2G mobile networks, many voicemail and PBX recordings) at 13 kbit/s
on 8 kHz audio, Opus (VoIP, WebRTC) at 6-24 kbit/s with packets lost on
the way, or G.722 (wideband VoIP desk phones, DECT/CAT-iq handsets) at
48-64 kbit/s on 16 kHz audio. synth.py passes a share of its training
utterances through one of them, once, when they are made (a codec costs too
much CPU per utterance to run at every training step the way augment.py's
G.711 does).

The codecs are Debian's own libraries (libgsm1, libopus0, libspandsp2 for
G.722), loaded with ctypes; `available()` names those this machine has
(tools/train/fetch_debs.sh carries them to a GPU machine, unpack_debs.sh
puts them on LD_LIBRARY_PATH).

    y = round_trip(x, {"codec": "gsm"})                             # 16 kHz in and out
    y = round_trip(x, {"codec": "opus", "bitrate": 8000, "loss": 0.02, "seed": 7})
    y = round_trip(x, {"codec": "g722", "bitrate": 64000})
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
G722_BITRATES = (64000, 56000, 48000)  # the standard's three modes
# spandsp's QMF band split (encoder) and merge (decoder), 24 taps each,
# delay the decoded audio by this many 16 kHz samples; measured with an
# impulse and by cross-correlation (test_train.G722Test).
G722_DELAY = 22
# 16 samples make 8 codes, a whole number of bytes on the line at 6, 7 or 8
# bits a code.
G722_BLOCK = 16

# Each codec's Debian library and package.
LIBRARIES = {"gsm": "libgsm.so.1", "opus": "libopus.so.0", "g722": "libspandsp.so.2"}
PACKAGES = {"gsm": "libgsm1", "opus": "libopus0", "g722": "libspandsp2"}
# How often draw() picks each codec, relative to the others. G.722 at 48-64
# kbit/s keeps the 16 kHz band and changes the waveform far less than GSM or
# Opus (24-32 dB SNR on a speech-like signal, against about 1 dB for GSM and
# 5-12 dB for Opus), so it gets half their share: its band edge at 7 kHz
# and its high band's coarse noise are worth learning, but not a third of
# the coded utterances.
WEIGHTS = {"gsm": 2, "opus": 2, "g722": 1}

_LIBS = {}


def _load(codec: str):
    """The codec's library, or None when this machine does not have it."""
    if codec not in _LIBS:
        try:
            lib = ctypes.CDLL(LIBRARIES[codec])
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
        if lib is not None and codec == "g722":
            for side in ("encode", "decode"):
                init = getattr(lib, f"g722_{side}_init")
                init.restype = ctypes.c_void_p
                init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
                getattr(lib, f"g722_{side}_free").argtypes = [ctypes.c_void_p]
                # (state, out, in, len): g722_encode returns the codes (one a
                # byte) it made of len samples, g722_decode the samples it
                # made of len codes.
                run = getattr(lib, f"g722_{side}")
                run.restype = ctypes.c_int
                run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        _LIBS[codec] = lib
    return _LIBS[codec]


def available() -> list:
    """The codecs whose library loads here, of "gsm", "opus" and "g722"."""
    return [c for c in LIBRARIES if _load(c) is not None]


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


def g722(x: torch.Tensor, bitrate: int = 64000) -> tuple:
    """G.722 at `bitrate` bit/s (64000, 56000 or 48000) on 16 kHz audio ->
    (16 kHz float of the same length and time-aligned with x, bytes of the
    coded stream). The codec works sample by sample (sub-band ADPCM, no
    frames), so the whole utterance goes through in one call."""
    lib = _load("g722")
    if lib is None:
        raise RuntimeError("libspandsp.so.2 is not installed (Debian package libspandsp2)")
    if bitrate not in G722_BITRATES:
        raise ValueError(f"G.722 has no {bitrate} bit/s mode (only {G722_BITRATES})")
    n = x.numel()
    # The QMF filters delay the output: feed that much more, in whole bytes
    # of the coded stream.
    total = -(-(n + G722_DELAY) // G722_BLOCK) * G722_BLOCK
    pcm = _fit(augment.to_int16(x.float()), total).numpy().copy()
    out = torch.zeros(total, dtype=torch.int16).numpy()
    codes = (ctypes.c_ubyte * (total // 2))()
    # One code (a pair of samples) a byte: spandsp's packed form
    # (G722_PACKED) loses the last code at 56 and 48 kbit/s in its decoder.
    enc = lib.g722_encode_init(None, int(bitrate), 0)
    if not enc:
        raise RuntimeError("g722_encode_init failed")
    dec = lib.g722_decode_init(None, int(bitrate), 0)
    if not dec:
        lib.g722_encode_free(enc)
        raise RuntimeError("g722_decode_init failed")
    try:
        made = lib.g722_encode(enc, codes, pcm.ctypes.data, total)
        if made != total // 2:
            raise RuntimeError(f"g722_encode gave {made} codes for {total} samples")
        got = lib.g722_decode(dec, out.ctypes.data, codes, made)
        if got != total:
            raise RuntimeError(f"g722_decode gave {got} samples, not {total}")
    finally:
        lib.g722_encode_free(enc)
        lib.g722_decode_free(dec)
    sent = made * bitrate // 64000  # 8, 7 or 6 bits a code on the line
    y = torch.from_numpy(out).float() / 32768.0
    return y[G722_DELAY:G722_DELAY + n], sent


def round_trip(x: torch.Tensor, params: dict) -> torch.Tensor:
    """x (16 kHz float) through the codec `params` names (draw()'s dict)."""
    if params["codec"] == "gsm":
        return gsm(x)[0]
    if params["codec"] == "opus":
        return opus(x, params["bitrate"], params.get("loss", 0.0), params.get("seed", 0))[0]
    if params["codec"] == "g722":
        return g722(x, params.get("bitrate", 64000))[0]
    raise ValueError(f"unknown codec {params['codec']!r}")


def draw(rng: random.Random, codecs: list) -> dict:
    """Random settings of one of `codecs` (available()'s names), picked in
    proportion to WEIGHTS."""
    codec = rng.choices(codecs, weights=[WEIGHTS[c] for c in codecs])[0]
    if codec == "gsm":
        return {"codec": "gsm"}
    if codec == "g722":
        # RTP carries G.722 at 64 kbit/s; 56 and 48 (room for a data channel
        # on ISDN and DECT links) are rarer: half the calls at 64.
        return {"codec": "g722", "bitrate": rng.choice((64000, 64000, 56000, 48000))}
    return {"codec": "opus", "bitrate": rng.choice(OPUS_BITRATES),
            "loss": round(rng.choice([0.0, 0.0, rng.uniform(0.0, 0.05)]), 3),
            "seed": rng.randrange(1 << 30)}
