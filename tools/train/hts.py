"""One HTS voice, many speakers: festvox-us-slt-hts through Debian's
libHTSEngine (package libhtsengine1), with the engine's own speaker controls.

Festival's built-in HTS module honours only the speed of the parameters it
is given (measured: its all-pass constant and half-tone settings change no
sample), so training speech of this voice is made in two steps:
  1. festival writes each sentence's full-context labels (text analysis,
     the voice's lexicon and prosody models; `LABELS_SCHEME` defines the
     Scheme function a batch script calls) without synthesizing them;
  2. libHTSEngine synthesizes the labels from the voice's .htsvoice with
     per-utterance settings: the all-pass constant alpha of the mel-cepstral
     synthesis filter (the frequency warping the voice was trained with:
     another alpha moves every formant, as a longer or shorter vocal tract
     would), a pitch shift in half tones (independent of the formants) and
     the speaking rate. (The postfilter is left off: at 0.4 it made the
     engine ~4x slower, which would halve the synthesis' throughput.)

    voice = HtsVoice(find_voice())
    x, rate = voice.synthesize("u0.lab", alpha=0.42, half_tone=-3.0, speed=1.1)

The label durations are ignored (the engine's duration model decides, as
in festival's own synthesis); `speed` scales them.
"""

import ctypes
import os
import tempfile

import torch

LIBRARY = "libHTSEngine.so.1"
VOICE = "cmu_us_slt_arctic_hts"
# Far more than sizeof(HTS_Engine) in any 1.x build (a few hundred bytes of
# pointers and sizes): the struct is allocated by the caller.
ENGINE_BYTES = 1 << 16
# Speaker ranges for training (uniform). The voice's own alpha is 0.45 at
# 32 kHz; +-0.05 moves its formants by about 13 % either way.
ALPHA_RANGE = (0.40, 0.50)
HALF_TONE_RANGE = (-6.0, 4.0)  # the voice is female (~180 Hz): down to ~125 Hz

# Defines (hts_labels TEXT PATH): the Text utterance type's modules up to
# the intonation targets, then the voice's label features, as festival's
# HTS synthesis would hand them to its engine.
LABELS_SCHEME = """(define (hts_labels text path)
  (let ((utt (eval (list 'Utterance 'Text text))))
    (Initialize utt) (Text utt) (Token_POS utt) (Token utt) (POS utt) (Phrasify utt)
    (Word utt) (Pauses utt) (Intonation utt) (PostLex utt) (Duration utt) (Int_Targets utt)
    (hts_dump_feats utt hts_feats_list path)))
"""

_lib = None


def _load():
    global _lib
    if _lib is None:
        try:
            lib = ctypes.CDLL(LIBRARY)
        except OSError:
            lib = False
        if lib:
            v, sz, d = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_double
            for name, res, args in (
                    ("HTS_Engine_initialize", None, [v]),
                    ("HTS_Engine_load", ctypes.c_char, [v, ctypes.POINTER(ctypes.c_char_p), sz]),
                    ("HTS_Engine_get_alpha", d, [v]),
                    ("HTS_Engine_get_sampling_frequency", sz, [v]),
                    ("HTS_Engine_set_alpha", None, [v, d]),
                    ("HTS_Engine_set_speed", None, [v, d]),
                    ("HTS_Engine_add_half_tone", None, [v, d]),
                    ("HTS_Engine_synthesize_from_fn", ctypes.c_char, [v, ctypes.c_char_p]),
                    ("HTS_Engine_save_generated_speech", None, [v, v]),
                    ("HTS_Engine_refresh", None, [v]),
                    ("HTS_Engine_clear", None, [v])):
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            libc = ctypes.CDLL(None)
            libc.fopen.restype, libc.fopen.argtypes = v, [ctypes.c_char_p, ctypes.c_char_p]
            libc.fclose.argtypes = [v]
            lib.libc = libc
        _lib = lib
    return _lib or None


def available() -> bool:
    """Whether libHTSEngine loads here."""
    return _load() is not None


def find_voice(datadir: str = None):
    """The .htsvoice file of festvox-us-slt-hts under festival's data folder
    (`datadir`, else $OASR_FESTIVAL_LIBDIR, else /usr/share/festival), or None."""
    for root in (datadir, os.environ.get("OASR_FESTIVAL_LIBDIR"), "/usr/share/festival"):
        if root:
            path = os.path.join(root, "voices", "us", VOICE, "hts", VOICE + ".htsvoice")
            if os.path.exists(path):
                return path
    return None


class HtsVoice:
    """An engine with the voice loaded; synthesize() may be called again and
    again (each call sets every control it uses)."""

    def __init__(self, voice_path: str):
        lib = _load()
        if lib is None:
            raise RuntimeError(f"{LIBRARY} is not installed (Debian package libhtsengine1)")
        self.lib = lib
        self.engine = ctypes.create_string_buffer(ENGINE_BYTES)
        lib.HTS_Engine_initialize(self.engine)
        voices = (ctypes.c_char_p * 1)(voice_path.encode())
        if lib.HTS_Engine_load(self.engine, voices, 1) != b"\x01":
            lib.HTS_Engine_clear(self.engine)
            raise RuntimeError(f"libHTSEngine cannot load {voice_path}")
        self.alpha = lib.HTS_Engine_get_alpha(self.engine)
        self.rate = lib.HTS_Engine_get_sampling_frequency(self.engine)

    def synthesize(self, label_path: str, alpha: float = None, half_tone: float = 0.0,
                   speed: float = 1.0):
        """(float32 waveform in [-1, 1), sample rate) of a label file; None
        if the engine fails on it. alpha None: the voice's own."""
        lib, e = self.lib, self.engine
        lib.HTS_Engine_set_alpha(e, self.alpha if alpha is None else alpha)
        lib.HTS_Engine_set_speed(e, speed)
        lib.HTS_Engine_add_half_tone(e, half_tone)  # sets the shift (it does not accumulate)
        try:
            if lib.HTS_Engine_synthesize_from_fn(e, label_path.encode()) != b"\x01":
                return None
            with tempfile.NamedTemporaryFile(suffix=".raw") as f:
                fp = lib.libc.fopen(f.name.encode(), b"wb")
                if not fp:
                    return None
                lib.HTS_Engine_save_generated_speech(e, fp)  # 16-bit little-endian
                lib.libc.fclose(fp)
                data = f.read()
        finally:
            lib.HTS_Engine_refresh(e)
        if not data:
            return None
        x = torch.frombuffer(bytearray(data), dtype=torch.int16).to(torch.float32) / 32768.0
        return x, self.rate

    def close(self):
        if self.engine is not None:
            self.lib.HTS_Engine_clear(self.engine)
            self.engine = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def draw(rng) -> dict:
    """Random speaker settings (a random.Random): alpha and half tone."""
    return {"alpha": round(rng.uniform(*ALPHA_RANGE), 3),
            "half_tone": round(rng.uniform(*HALF_TONE_RANGE), 2)}
