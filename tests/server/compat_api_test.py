"""The Riva (nvidia.riva.asr.RivaSpeechRecognition) and Google Cloud Speech v1
(google.cloud.speech.v1.Speech) APIs of a live oasr-server serving the
bundled model, through Python stubs generated at test time from the
project's protos (proto/nvidia/riva/, proto/google/cloud/speech/v1/), as
Riva's and Google's own generated clients would call them: streaming with
interim results whose finals match the native API's (oasr.asr.v1) transcript
of the same sample, Recognize, word time offsets, max_alternatives,
single_utterance's END_OF_SINGLE_UTTERANCE, GetRivaSpeechRecognitionConfig,
health, and each refusal with its exact status code and message.

Exit 77 (ctest: skipped), saying why, when grpcio or grpc_tools is missing.
usage: compat_api_test.py SERVER_BINARY SOURCE_DIR WORK_DIR
"""
import importlib
import os
import shutil
import sys
import time
import traceback
import wave

import bundled_server

SKIP = 77
SAMPLE = "01_espeak_en-us.wav"  # 3.5 s, 16 kHz mono 16-bit.
CHUNK_MS = 100
MAX_MESSAGE_BYTES = 1 << 20  # The server's --max-message-bytes here.
DEADLINE_S = 120
PROTOS = ["oasr/asr/v1/asr.proto", "nvidia/riva/common.proto", "nvidia/riva/asr/asr.proto",
          "google/cloud/speech/v1/speech.proto"]


def load_stubs(source_dir, work):
    """Generates the stubs into work/stubs; returns {name: module}."""
    from grpc_tools import protoc  # pylint: disable=import-outside-toplevel
    out = os.path.join(work, "stubs")
    os.makedirs(out)
    args = ["grpc_tools.protoc", "-I" + os.path.join(source_dir, "proto"),
            "--python_out=" + out, "--grpc_python_out=" + out] + PROTOS
    if protoc.main(args) != 0:
        sys.exit("protoc failed on " + " ".join(PROTOS))
    names = {"oasr": "oasr.asr.v1.asr", "riva": "nvidia.riva.asr.asr",
             "riva_common": "nvidia.riva.common", "google": "google.cloud.speech.v1.speech"}
    sys.path.insert(0, out)
    stubs = {}
    for key, module in names.items():
        stubs[key] = importlib.import_module(module + "_pb2")
        stubs[key + "_grpc"] = importlib.import_module(module + "_pb2_grpc")
    return stubs


def read_sample(source_dir):
    """(WAV file bytes, PCM bytes, duration in ms) of the sample."""
    path = os.path.join(source_dir, "samples", SAMPLE)
    with wave.open(path, "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        pcm = w.readframes(w.getnframes())
    return open(path, "rb").read(), pcm, len(pcm) // 2 * 1000 // 16000


def mulaw(pcm):
    """G.711 mu-law bytes of 16-bit little-endian PCM."""
    out = bytearray()
    for i in range(0, len(pcm), 2):
        sample = int.from_bytes(pcm[i:i + 2], "little", signed=True)
        sign = 0x80 if sample < 0 else 0
        magnitude = min(abs(sample), 32635) + 0x84
        exponent = max(magnitude.bit_length() - 8, 0)
        mantissa = (magnitude >> (exponent + 3)) & 0x0F
        out.append(~(sign | (exponent << 4) | mantissa) & 0xFF)
    return bytes(out)


def chunks(audio, bytes_per_ms=32):
    step = CHUNK_MS * bytes_per_ms
    return [audio[i:i + step] for i in range(0, len(audio), step)]


def call_stream(method, requests):
    """(status code, responses) of a streaming call."""
    import grpc  # pylint: disable=import-outside-toplevel
    responses = []
    try:
        for response in method(iter(requests), timeout=DEADLINE_S):
            responses.append(response)
    except grpc.RpcError as error:
        return error.code(), responses, error.details()
    return grpc.StatusCode.OK, responses, ""


def call_unary(method, request):
    """(status code, response or None, details) of a unary call."""
    import grpc  # pylint: disable=import-outside-toplevel
    try:
        return grpc.StatusCode.OK, method(request, timeout=DEADLINE_S), ""
    except grpc.RpcError as error:
        return error.code(), None, error.details()


def joined(results):
    return " ".join(r.alternatives[0].transcript for r in results if r.alternatives).strip()


def seconds(duration):
    return duration.seconds + duration.nanos / 1e9


class Suite:
    def __init__(self, stubs, channel, sample):
        import grpc  # pylint: disable=import-outside-toplevel
        self.grpc = grpc
        self.s = stubs
        self.channel = channel
        self.wav, self.pcm, self.duration_ms = sample
        self.native = stubs["oasr_grpc"].SpeechStub(channel)
        self.riva = stubs["riva_grpc"].RivaSpeechRecognitionStub(channel)
        self.google = stubs["google_grpc"].SpeechStub(channel)
        self.failures = []
        self.checks = 0

    def expect(self, condition, what):
        self.checks += 1
        if not condition:
            self.failures.append(what)
            print("  FAILED:", what)

    def expect_code(self, got, want, what):
        code, details = got[0], got[-1]
        self.expect(code == want, f"{what}: {code} ({details!r}), want {want}")
        return details

    def native_transcript(self, audio=None, encoding=None):
        pb = self.s["oasr"]
        config = pb.RecognitionConfig(encoding=encoding or pb.LINEAR16, sample_rate_hertz=16000)
        bytes_per_ms = 8 if encoding == pb.MULAW else 32
        requests = [pb.StreamingRecognizeRequest(
            streaming_config=pb.StreamingRecognitionConfig(config=config))]
        requests += [pb.StreamingRecognizeRequest(audio_content=c)
                     for c in chunks(audio or self.pcm, bytes_per_ms)]
        code, responses, details = call_stream(self.native.StreamingRecognize, requests)
        assert code == self.grpc.StatusCode.OK, details
        finals = [r for resp in responses for r in resp.results if r.is_final]
        return joined(finals)

    def check_words(self, words, start, end, what):
        """Words have times, in order, within the audio; returns how many."""
        self.expect(len(words) > 0, f"{what}: no words")
        last = 0.0
        for w in words:
            s, e = start(w), end(w)
            self.expect(last <= s <= e <= self.duration_ms / 1000.0,
                        f"{what}: word {w.word!r} at [{s}, {e}] after {last}, audio "
                        f"{self.duration_ms} ms")
            last = s
        return len(words)

    def stream_refusals(self, pb, make_config, field_cases):
        """The streaming refusals every API shares, then one per (field, value, message
        prefix) of `field_cases` (a dotted field sets a nested one):
        [(what, requests, code, message prefix)]."""
        invalid = self.grpc.StatusCode.INVALID_ARGUMENT

        def first(config):
            return pb.StreamingRecognizeRequest(
                streaming_config=pb.StreamingRecognitionConfig(config=config))
        audio = pb.StreamingRecognizeRequest(audio_content=self.pcm[:3200])
        config = first(make_config())
        cases = [
            ("audio before config", [audio, config], invalid, "streaming_config: the first"),
            ("no RecognitionConfig", [pb.StreamingRecognizeRequest(
                streaming_config=pb.StreamingRecognitionConfig(interim_results=True))],
             invalid, "streaming_config.config: missing"),
            ("config twice", [config, audio, config], invalid, "streaming_config: sent again"),
            ("odd 16-bit PCM bytes", [config, pb.StreamingRecognizeRequest(
                audio_content=b"\x00\x01\x02")], invalid, "audio_content: 3 bytes"),
            ("oversized message", [config, pb.StreamingRecognizeRequest(
                audio_content=bytes(MAX_MESSAGE_BYTES + 1024))],
             self.grpc.StatusCode.RESOURCE_EXHAUSTED, ""),
        ]
        for field, value, prefix in field_cases:
            bad = make_config()
            *path, last = field.split(".")
            message = bad
            for name in path:
                message = getattr(message, name)
            setattr(message, last, value)
            cases.append((f"{field} {value!r}", [first(bad), audio], invalid, prefix))
        return cases

    def expect_refusals(self, what, call, method, cases):
        """Each (what, request(s), code, message prefix) of `cases` through `call`."""
        for case, requests, want, prefix in cases:
            details = self.expect_code(call(method, requests), want, f"{what}, {case}")
            self.expect(details.startswith(prefix), f"{what}, {case}: {details!r}")

    # ---- Riva ----------------------------------------------------------

    def riva_config(self, **fields):
        pb, common = self.s["riva"], self.s["riva_common"]
        fields.setdefault("encoding", common.LINEAR_PCM)
        fields.setdefault("sample_rate_hertz", 16000)
        fields.setdefault("language_code", "en-US")
        return pb.RecognitionConfig(**fields)

    def riva_stream(self, config, audio, interim=True, request_id=None, bytes_per_ms=32):
        pb, common = self.s["riva"], self.s["riva_common"]
        first = pb.StreamingRecognizeRequest(
            streaming_config=pb.StreamingRecognitionConfig(config=config,
                                                           interim_results=interim))
        if request_id:
            first.id.CopyFrom(common.RequestId(value=request_id))
        requests = [first] + [pb.StreamingRecognizeRequest(audio_content=c)
                              for c in chunks(audio, bytes_per_ms)]
        return call_stream(self.riva.StreamingRecognize, requests)

    def test_riva_streaming(self, want):
        code, responses, details = self.riva_stream(
            self.riva_config(enable_word_time_offsets=True), self.pcm, request_id="riva-7")
        self.expect_code((code, details), self.grpc.StatusCode.OK, "riva stream")
        results = [r for resp in responses for r in resp.results]
        finals = [r for r in results if r.is_final]
        interims = [i for i, r in enumerate(results) if not r.is_final]
        self.expect(interims and interims[0] < results.index(finals[0]) if finals else False,
                    f"riva stream: no interim result before the final ({len(results)} results)")
        self.expect(joined(finals) == want,
                    f"riva stream: final {joined(finals)!r}, native {want!r}")
        self.expect(all(len(resp.results) == 1 for resp in responses),
                    "riva stream: a response without exactly one result")
        self.expect(all(resp.id.value == "riva-7" for resp in responses),
                    "riva stream: a response without the request's id")
        self.expect(all(r.channel_tag == 1 for r in results), "riva stream: channel_tag not 1")
        processed = [r.audio_processed for r in results]
        self.expect(processed == sorted(processed) and processed[-1] > 0,
                    f"riva stream: audio_processed {processed}")
        self.expect(all(r.stability == 1.0 for r in finals), "riva stream: final stability")
        for final in finals:
            top = final.alternatives[0]
            n = self.check_words(top.words, lambda w: w.start_time / 1000.0,
                                 lambda w: w.end_time / 1000.0, "riva stream")
            self.expect(n == len(top.transcript.split()),
                        f"riva stream: {n} words for {top.transcript!r}")
            self.expect(0.0 < top.confidence <= 1.0, f"riva stream: confidence {top.confidence}")

    def test_riva_stream_without_interim_or_audio(self, want):
        code, responses, details = self.riva_stream(self.riva_config(), self.pcm, interim=False)
        self.expect_code((code, details), self.grpc.StatusCode.OK, "riva stream, no interim")
        results = [r for resp in responses for r in resp.results]
        self.expect(results and all(r.is_final for r in results),
                    "riva stream without interim_results: an interim result")
        self.expect(joined(results) == want, f"riva stream, no interim: {joined(results)!r}")
        self.expect(not any(resp.HasField("id") for resp in responses),
                    "riva stream: an id the request did not have")
        code, responses, details = self.riva_stream(self.riva_config(), b"")
        self.expect_code((code, details), self.grpc.StatusCode.OK, "riva stream without audio")
        self.expect(responses == [], f"riva stream without audio: {len(responses)} responses")

    def test_riva_mulaw(self, _want):
        audio = mulaw(self.pcm)
        common = self.s["riva_common"]
        code, responses, details = self.riva_stream(
            self.riva_config(encoding=common.MULAW), audio, interim=False, bytes_per_ms=8)
        self.expect_code((code, details), self.grpc.StatusCode.OK, "riva mu-law stream")
        got = joined([r for resp in responses for r in resp.results])
        native = self.native_transcript(audio, self.s["oasr"].MULAW)
        self.expect(got == native and got, f"riva mu-law: {got!r}, native {native!r}")

    def test_riva_recognize(self, want):
        pb, common = self.s["riva"], self.s["riva_common"]
        # A WAV file, as Riva's clients send one, with the fields that have no effect.
        request = pb.RecognizeRequest(
            config=self.riva_config(enable_word_time_offsets=True, profanity_filter=True,
                                    enable_automatic_punctuation=True,
                                    verbatim_transcripts=True, max_alternatives=1),
            audio=self.wav, id=common.RequestId(value="offline-1"))
        code, response, details = call_unary(self.riva.Recognize, request)
        self.expect_code((code, details), self.grpc.StatusCode.OK, "riva Recognize (WAV)")
        if response is None:
            return
        self.expect(joined(response.results) == want,
                    f"riva Recognize: {joined(response.results)!r}, native {want!r}")
        self.expect(response.id.value == "offline-1", "riva Recognize: id not returned")
        for result in response.results:
            self.expect(result.channel_tag == 1, "riva Recognize: channel_tag")
            self.expect(abs(result.audio_processed - self.duration_ms / 1000.0) < 0.1,
                        f"riva Recognize: audio_processed {result.audio_processed}")
            self.expect(len(result.alternatives) == 1, "riva Recognize: max_alternatives 1")
            self.check_words(result.alternatives[0].words, lambda w: w.start_time / 1000.0,
                             lambda w: w.end_time / 1000.0, "riva Recognize")
        # Raw samples, several alternatives.
        request = pb.RecognizeRequest(config=self.riva_config(max_alternatives=3), audio=self.pcm)
        code, response, details = call_unary(self.riva.Recognize, request)
        self.expect_code((code, details), self.grpc.StatusCode.OK, "riva Recognize (raw)")
        if response is not None:
            self.expect(joined(response.results) == want, "riva Recognize (raw): transcript")
            counts = [len(r.alternatives) for r in response.results]
            self.expect(all(2 <= c <= 3 for c in counts), f"riva max_alternatives 3: {counts}")
            for r in response.results:
                texts = [a.transcript for a in r.alternatives]
                self.expect(len(set(texts)) == len(texts), f"riva alternatives repeat: {texts}")

    def test_riva_get_config(self, _want):
        pb = self.s["riva"]
        models = self.native.ListModels(self.s["oasr"].ListModelsRequest(), timeout=DEADLINE_S)
        name = models.models[0].name
        response = self.riva.GetRivaSpeechRecognitionConfig(
            pb.RivaSpeechRecognitionConfigRequest(), timeout=DEADLINE_S)
        types = sorted(c.parameters["type"] for c in response.model_config)
        self.expect(types == ["offline", "online"], f"riva config: types {types}")
        for c in response.model_config:
            self.expect(c.model_name == name, f"riva config: model {c.model_name!r}, {name!r}")
            self.expect(c.parameters["language_code"] == "en-US", "riva config: language_code")
            self.expect(c.parameters["sample_rate"] == "16000", "riva config: sample_rate")
        response = self.riva.GetRivaSpeechRecognitionConfig(
            pb.RivaSpeechRecognitionConfigRequest(model_name=name), timeout=DEADLINE_S)
        self.expect(len(response.model_config) == 2, "riva config: by model_name")
        response = self.riva.GetRivaSpeechRecognitionConfig(
            pb.RivaSpeechRecognitionConfigRequest(model_name="not-served"), timeout=DEADLINE_S)
        self.expect(len(response.model_config) == 0, "riva config: another model_name listed")
        # The model by name works; another is refused.
        code, _, details = call_unary(self.riva.Recognize, pb.RecognizeRequest(
            config=self.riva_config(model=name), audio=self.pcm))
        self.expect_code((code, details), self.grpc.StatusCode.OK, "riva Recognize, model by name")

    def test_riva_errors(self, _want):
        pb, common = self.s["riva"], self.s["riva_common"]
        invalid, exhausted = self.grpc.StatusCode.INVALID_ARGUMENT, \
            self.grpc.StatusCode.RESOURCE_EXHAUSTED
        self.expect_refusals("riva stream", call_stream, self.riva.StreamingRecognize,
                             self.stream_refusals(pb, self.riva_config, [
            ("encoding", common.FLAC, "encoding: FLAC is not supported"),
            ("encoding", common.OGGOPUS, "encoding: OGGOPUS is not supported"),
            ("sample_rate_hertz", 4000, "sample_rate_hertz: 4000 is outside"),
            ("sample_rate_hertz", 96000, "sample_rate_hertz: 96000 is outside"),
            ("language_code", "de-DE", "language_code: 'de-DE' is not served"),
            ("model", "other", "model: 'other' is not served"),
            ("audio_channel_count", 2, "audio_channel_count: 2 channels"),
            ("max_alternatives", -1, "max_alternatives: -1 is outside"),
            ("diarization_config.enable_speaker_diarization", True,
             "diarization_config.enable_speaker_diarization"),
            ("endpointing_config.stop_history", -5, "endpointing_config.stop_history: -5")]))
        wav_8k = self.wav[:24] + (8000).to_bytes(4, "little") + self.wav[28:]
        self.expect_refusals("riva Recognize", call_unary, self.riva.Recognize, [
                ("empty audio", pb.RecognizeRequest(config=self.riva_config()), invalid,
                 "audio: empty"),
                ("WAV header against sample_rate_hertz", pb.RecognizeRequest(
                    config=self.riva_config(), audio=wav_8k), invalid,
                 "sample_rate_hertz: 16000 does not match the WAV header's 8000"),
                ("WAV header against encoding", pb.RecognizeRequest(
                    config=self.riva_config(encoding=common.MULAW), audio=self.wav), invalid,
                 "encoding: the config's mu-law does not match"),
                ("language", pb.RecognizeRequest(
                    config=self.riva_config(language_code="fr-FR"), audio=self.pcm), invalid,
                 "language_code: 'fr-FR' is not served"),
                ("oversized message", pb.RecognizeRequest(
                    config=self.riva_config(), audio=bytes(MAX_MESSAGE_BYTES + 1024)), exhausted,
                 "")])

    # ---- Google --------------------------------------------------------

    def google_config(self, **fields):
        pb = self.s["google"]
        fields.setdefault("encoding", pb.RecognitionConfig.LINEAR16)
        fields.setdefault("sample_rate_hertz", 16000)
        fields.setdefault("language_code", "en-US")
        return pb.RecognitionConfig(**fields)

    def google_stream(self, config, audio, interim=True, single_utterance=False):
        pb = self.s["google"]
        requests = [pb.StreamingRecognizeRequest(streaming_config=pb.StreamingRecognitionConfig(
            config=config, interim_results=interim, single_utterance=single_utterance))]
        requests += [pb.StreamingRecognizeRequest(audio_content=c) for c in chunks(audio)]
        return call_stream(self.google.StreamingRecognize, requests)

    def test_google_streaming(self, want):
        code, responses, details = self.google_stream(
            self.google_config(enable_word_time_offsets=True, enable_word_confidence=True,
                               enable_automatic_punctuation=True, profanity_filter=True),
            self.pcm)
        self.expect_code((code, details), self.grpc.StatusCode.OK, "google stream")
        results = [r for resp in responses for r in resp.results]
        finals = [r for r in results if r.is_final]
        first_final = results.index(finals[0]) if finals else -1
        self.expect(any(not r.is_final for r in results[:max(first_final, 0)]),
                    f"google stream: no interim result before the final ({len(results)})")
        self.expect(joined(finals) == want, f"google stream: {joined(finals)!r}, native {want!r}")
        self.expect(all(len(resp.results) == 1 and resp.speech_event_type == 0
                        for resp in responses), "google stream: a response not of one result")
        ends = [seconds(r.result_end_time) for r in results]
        self.expect(ends == sorted(ends) and 0 < ends[-1] <= self.duration_ms / 1000.0 + 0.7,
                    f"google stream: result_end_time {ends}")
        self.expect(all(r.language_code == "en-US" for r in results), "google: language_code")
        for final in finals:
            top = final.alternatives[0]
            self.check_words(top.words, lambda w: seconds(w.start_time),
                             lambda w: seconds(w.end_time), "google stream")
            self.expect(all(0.0 < w.confidence <= 1.0 for w in top.words),
                        "google stream: word confidence")

    def test_google_single_utterance(self, want):
        # The sample, 2 s of silence (an endpoint after 1 s), the sample again.
        audio = self.pcm + bytes(2 * 32000) + self.pcm
        code, responses, details = self.google_stream(self.google_config(), audio,
                                                      single_utterance=True)
        self.expect_code((code, details), self.grpc.StatusCode.OK, "google single_utterance")
        kinds = ["event" if resp.speech_event_type else
                 ("final" if resp.results[0].is_final else "interim") for resp in responses]
        self.expect(kinds.count("event") == 1 and kinds.count("final") == 1,
                    f"google single_utterance: responses {kinds}")
        event = next((r for r in responses if r.speech_event_type), None)
        if event is not None:
            pb = self.s["google"]
            self.expect(event.speech_event_type ==
                        pb.StreamingRecognizeResponse.END_OF_SINGLE_UTTERANCE and
                        not event.results, "google single_utterance: the event response")
            self.expect(0 < seconds(event.speech_event_time) < len(audio) / 32000.0,
                        f"google single_utterance: event time {event.speech_event_time}")
        finals = [r for resp in responses for r in resp.results if r.is_final]
        self.expect(joined(finals) == want,
                    f"google single_utterance: {joined(finals)!r}, native {want!r}")

    def test_google_recognize(self, want):
        pb = self.s["google"]
        # A WAV file: its header gives the rate and the encoding.
        request = pb.RecognizeRequest(
            config=pb.RecognitionConfig(language_code="en-us", enable_word_time_offsets=True,
                                        model="default"),
            audio=pb.RecognitionAudio(content=self.wav))
        code, response, details = call_unary(self.google.Recognize, request)
        self.expect_code((code, details), self.grpc.StatusCode.OK, "google Recognize (WAV)")
        if response is not None:
            self.expect(joined(response.results) == want,
                        f"google Recognize: {joined(response.results)!r}, native {want!r}")
            for result in response.results:
                self.expect(result.language_code == "en-us", "google Recognize: language_code")
                self.expect(seconds(result.result_end_time) > 0, "google: result_end_time")
                top = result.alternatives[0]
                self.check_words(top.words, lambda w: seconds(w.start_time),
                                 lambda w: seconds(w.end_time), "google Recognize")
                self.expect(all(w.confidence == 0.0 for w in top.words),
                            "google Recognize: word confidence without enable_word_confidence")
        request = pb.RecognizeRequest(config=self.google_config(max_alternatives=3),
                                      audio=pb.RecognitionAudio(content=self.pcm))
        code, response, details = call_unary(self.google.Recognize, request)
        self.expect_code((code, details), self.grpc.StatusCode.OK, "google Recognize (raw)")
        if response is not None:
            self.expect(joined(response.results) == want, "google Recognize (raw): transcript")
            counts = [len(r.alternatives) for r in response.results]
            self.expect(all(2 <= c <= 3 for c in counts), f"google max_alternatives 3: {counts}")
            self.expect(all(not a.words for r in response.results for a in r.alternatives),
                        "google Recognize: words without asking for them")

    def test_google_errors(self, _want):
        pb = self.s["google"]
        enc = pb.RecognitionConfig
        invalid, exhausted = self.grpc.StatusCode.INVALID_ARGUMENT, \
            self.grpc.StatusCode.RESOURCE_EXHAUSTED
        self.expect_refusals("google stream", call_stream, self.google.StreamingRecognize,
                             self.stream_refusals(pb, self.google_config, [
            ("encoding", enc.FLAC, "encoding: FLAC is not supported"),
            ("encoding", enc.OGG_OPUS, "encoding: OGG_OPUS is not supported"),
            ("encoding", enc.MP3, "encoding: MP3 is not supported"),
            ("sample_rate_hertz", 4000, "sample_rate_hertz: 4000 is outside"),
            ("language_code", "", "language_code: required"),
            ("language_code", "fr-FR", "language_code: 'fr-FR' is not served"),
            ("model", "phone_call", "model: 'phone_call' is not served"),
            ("max_alternatives", 31, "max_alternatives: 31 is outside [0, 30]"),
            ("audio_channel_count", 2, "audio_channel_count: 2 channels"),
            ("diarization_config.enable_speaker_diarization", True,
             "diarization_config.enable_speaker_diarization")]))
        code, responses, details = self.google_stream(self.google_config(), b"")
        self.expect_code((code, details), self.grpc.StatusCode.OK, "google stream without audio")
        self.expect(responses == [], "google stream without audio: responses")
        self.expect_refusals("google Recognize", call_unary, self.google.Recognize, [
                ("no audio", pb.RecognizeRequest(config=self.google_config()), invalid,
                 "audio: neither content nor uri"),
                ("empty content", pb.RecognizeRequest(
                    config=self.google_config(), audio=pb.RecognitionAudio(content=b"")),
                 invalid, "audio.content: empty"),
                ("uri", pb.RecognizeRequest(config=self.google_config(), audio=pb.RecognitionAudio(
                    uri="gs://bucket/audio.raw")), invalid, "audio.uri: not supported"),
                ("WAV header against sample_rate_hertz", pb.RecognizeRequest(
                    config=self.google_config(sample_rate_hertz=8000),
                    audio=pb.RecognitionAudio(content=self.wav)), invalid,
                 "sample_rate_hertz: 8000 does not match the WAV header's 16000"),
                ("oversized message", pb.RecognizeRequest(
                    config=self.google_config(),
                    audio=pb.RecognitionAudio(content=bytes(MAX_MESSAGE_BYTES + 1024))),
                 exhausted, "")])
        # Declared by Google, not served: a stub built from Google's proto gets UNIMPLEMENTED.
        long_running = self.channel.unary_unary(
            "/google.cloud.speech.v1.Speech/LongRunningRecognize",
            request_serializer=lambda m: m.SerializeToString(), response_deserializer=bytes)
        code, _, details = call_unary(long_running, pb.RecognizeRequest(
            config=self.google_config(), audio=pb.RecognitionAudio(content=self.pcm)))
        self.expect_code((code, details), self.grpc.StatusCode.UNIMPLEMENTED,
                         "google LongRunningRecognize")

    def test_health(self, _want):
        # grpc.health.v1.Health/Check by hand: HealthCheckRequest is {1: service}, and
        # HealthCheckResponse {1: status} with SERVING = 1.
        check = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda name: b"\x0a" + bytes([len(name)]) + name.encode(),
            response_deserializer=bytes)
        for service in ("nvidia.riva.asr.RivaSpeechRecognition", "google.cloud.speech.v1.Speech"):
            response = check(service, timeout=DEADLINE_S)
            self.expect(response == b"\x08\x01", f"health of {service}: {response!r}")


def main():
    binary, source_dir, work = sys.argv[1:4]
    try:
        import grpc  # pylint: disable=import-outside-toplevel,unused-import
        import grpc_tools  # pylint: disable=import-outside-toplevel,unused-import
    except ImportError as error:
        print(f"SKIPPED: grpcio and grpc_tools are needed ({error}); Debian: python3-grpcio "
              "python3-grpc-tools")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    stubs = load_stubs(source_dir, work)
    proc, port = bundled_server.start(
        binary, source_dir, work,
        ["--max-message-bytes", str(MAX_MESSAGE_BYTES), "--shutdown-grace", "1"])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    suite = Suite(stubs, channel, read_sample(source_dir))
    tests = [name for name in dir(Suite) if name.startswith("test_")]
    try:
        grpc.channel_ready_future(channel).result(timeout=30)
        want = suite.native_transcript()
        print(f"native transcript of {SAMPLE}: {want!r}")
        if not want:
            suite.failures.append("the native API transcribed nothing")
        for name in tests:
            started, before = time.time(), len(suite.failures)
            print(f"== {name}")
            try:
                getattr(suite, name)(want)
            except Exception:  # pylint: disable=broad-except
                suite.failures.append(f"{name}: {traceback.format_exc()}")
                print(traceback.format_exc())
            print(f"   {'ok' if len(suite.failures) == before else 'FAILED'} "
                  f"({time.time() - started:.1f} s)")
    finally:
        channel.close()
        bundled_server.stop(proc)
    for failure in suite.failures:
        print("FAILED:", failure)
    print(f"{len(tests)} tests, {suite.checks} checks, {len(suite.failures)} failed")
    if suite.failures:
        print("server log:", os.path.join(work, "server.log"))
    return 1 if suite.failures else 0


if __name__ == "__main__":
    sys.exit(main())
