#!/usr/bin/env python3
"""An independent Python client for oasr-server (oasr.asr.v1.Speech).

Uses only grpcio, grpcio-tools and protobuf (Debian: python3-grpcio,
python3-grpc-tools). The stubs are generated from proto/ at start into
--stubs-dir (a temporary folder by default), so nothing generated is kept in
the repository.

    python3 tools/python_client/oasr_client.py --server 127.0.0.1:50051 models
    python3 tools/python_client/oasr_client.py stream audio.wav --words
    python3 tools/python_client/oasr_client.py stream audio.wav --json   # one JSON line per response
    python3 tools/python_client/oasr_client.py recognize audio.wav
    OASR_TOKEN=secret python3 tools/python_client/oasr_client.py --tls-ca ca.pem \
        --server asr.example.com:50051 stream audio.wav          # TLS and a bearer token

Exit status: 0 when the call ended with OK, 1 otherwise (the status is
printed on stderr, and in the summary line with --json).
"""

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
import wave

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(REPO, "proto")
PROTO_FILE = "oasr/asr/v1/asr.proto"


def load_stubs(stubs_dir):
    """Generates (if needed) and imports asr_pb2 and asr_pb2_grpc."""
    from grpc_tools import protoc  # pylint: disable=import-outside-toplevel

    os.makedirs(stubs_dir, exist_ok=True)
    target = os.path.join(stubs_dir, "oasr", "asr", "v1", "asr_pb2.py")
    source = os.path.join(PROTO_ROOT, PROTO_FILE)
    if not os.path.exists(target) or os.path.getmtime(target) < os.path.getmtime(source):
        code = protoc.main(["grpc_tools.protoc", "-I" + PROTO_ROOT,
                            "--python_out=" + stubs_dir, "--grpc_python_out=" + stubs_dir,
                            PROTO_FILE])
        if code != 0:
            raise RuntimeError("protoc failed on %s (exit %d)" % (source, code))
    sys.path.insert(0, stubs_dir)
    pb2 = importlib.import_module("oasr.asr.v1.asr_pb2")
    pb2_grpc = importlib.import_module("oasr.asr.v1.asr_pb2_grpc")
    return pb2, pb2_grpc


def read_audio(path, raw_rate):
    """(16-bit mono PCM bytes, sample rate) from a WAV file or raw PCM."""
    with open(path, "rb") as f:
        head = f.read(12)
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        with wave.open(path, "rb") as w:
            if w.getnchannels() != 1 or w.getsampwidth() != 2:
                raise ValueError("%s: only mono 16-bit WAV files are supported" % path)
            return w.readframes(w.getnframes()), w.getframerate()
    with open(path, "rb") as f:
        return f.read(), raw_rate


def make_config(pb2, args, rate):
    config = pb2.RecognitionConfig(
        encoding=pb2.LINEAR16, sample_rate_hertz=rate, model=args.model,
        max_alternatives=args.max_alternatives, enable_word_time_offsets=args.words)
    if args.phrase:
        config.speech_contexts.add(phrases=args.phrase, boost=args.boost)
    return config


def to_json(pb2_message):
    from google.protobuf import json_format  # pylint: disable=import-outside-toplevel
    return json_format.MessageToDict(pb2_message, preserving_proto_field_name=True)


def call_metadata(args):
    """The bearer token of --token / OASR_TOKEN as gRPC metadata."""
    return [("authorization", "Bearer " + args.token)] if args.token else None


def open_channel(grpc, args):
    """A plaintext channel, or TLS when any --tls option is given."""
    tls = args.tls or args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name
    if not tls:
        return grpc.insecure_channel(args.server)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise SystemExit("oasr_client: --tls-cert and --tls-key: give both (or neither)")

    def read(path):
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    credentials = grpc.ssl_channel_credentials(root_certificates=read(args.tls_ca),
                                               private_key=read(args.tls_key),
                                               certificate_chain=read(args.tls_cert))
    options = [("grpc.ssl_target_name_override", args.tls_server_name)] if args.tls_server_name else []
    return grpc.secure_channel(args.server, credentials, options=options)


def run_stream(stub, pb2, args):
    pcm, rate = read_audio(args.file, args.rate)
    step = max(2, int(rate * args.chunk_ms / 1000) * 2)

    def requests():
        yield pb2.StreamingRecognizeRequest(streaming_config=pb2.StreamingRecognitionConfig(
            config=make_config(pb2, args, rate), interim_results=not args.no_interim,
            single_utterance=args.single_utterance))
        start = time.monotonic()
        for n, at in enumerate(range(0, len(pcm), step)):
            if args.realtime:
                delay = start + n * (step / 2) / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            yield pb2.StreamingRecognizeRequest(audio_content=pcm[at:at + step])

    finals, interim, finish_reason, words = [], 0, "", []
    status = "OK"
    message = ""
    try:
        for response in stub.StreamingRecognize(requests(), timeout=args.timeout,
                                                metadata=call_metadata(args)):
            if args.json:
                print(json.dumps({"response": to_json(response)}), flush=True)
            for result in response.results:
                best = result.alternatives[0] if result.alternatives else None
                if result.is_final:
                    if best is not None:
                        finals.append(best.transcript)
                        words.extend({"word": w.word, "start_ms": w.start_offset_ms,
                                      "end_ms": w.end_offset_ms} for w in best.words)
                else:
                    interim += 1
                if result.finish_reason:
                    finish_reason = result.finish_reason
                if not args.json:
                    kind = "final" if result.is_final else "partial"
                    text = best.transcript if best is not None else ""
                    extra = " (finish_reason: %s)" % result.finish_reason if result.finish_reason else ""
                    print("[%s %.2fs] %s%s" % (kind, result.audio_processed, text, extra), flush=True)
    except Exception as error:  # grpc.RpcError; imported lazily with the stubs
        status = error.code().name if hasattr(error, "code") else "UNKNOWN"
        message = error.details() if hasattr(error, "details") else str(error)
        print("StreamingRecognize failed: %s: %s" % (status, message), file=sys.stderr)
    if args.json:
        print(json.dumps({"summary": {"status": status, "message": message, "finals": finals,
                                      "interim_results": interim, "finish_reason": finish_reason,
                                      "words": words}}), flush=True)
    return 0 if status == "OK" else 1


def run_recognize(stub, pb2, args):
    with open(args.file, "rb") as f:
        audio = f.read()
    config = make_config(pb2, args, args.rate)
    if audio[:4] == b"RIFF":
        config.encoding = pb2.WAV
    try:
        response = stub.Recognize(pb2.RecognizeRequest(config=config, audio=audio),
                                  timeout=args.timeout, metadata=call_metadata(args))
    except Exception as error:  # grpc.RpcError
        print("Recognize failed: %s: %s" % (error.code().name, error.details()), file=sys.stderr)
        return 1
    print(json.dumps(to_json(response), indent=None if args.json else 2))
    return 0


def run_models(stub, pb2, args):
    try:
        response = stub.ListModels(pb2.ListModelsRequest(), timeout=args.timeout,
                                   metadata=call_metadata(args))
    except Exception as error:  # grpc.RpcError
        status = error.code().name if hasattr(error, "code") else "UNKNOWN"
        message = error.details() if hasattr(error, "details") else str(error)
        print("ListModels failed: %s: %s" % (status, message), file=sys.stderr)
        return 1
    print(json.dumps(to_json(response), indent=None if args.json else 2))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="127.0.0.1:50051", help="HOST:PORT")
    parser.add_argument("--stubs-dir", default=None,
                        help="where to generate the stubs (default: a temporary folder)")
    parser.add_argument("--timeout", type=float, default=600.0, help="deadline per call, seconds")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--tls", action="store_true",
                        help="connect with TLS (implied by the other --tls options)")
    parser.add_argument("--tls-ca", default="",
                        help="PEM CA bundle the server's certificate must chain to "
                             "(default: the system's)")
    parser.add_argument("--tls-cert", default="", help="PEM client certificate for mutual TLS")
    parser.add_argument("--tls-key", default="", help="PEM private key of --tls-cert")
    parser.add_argument("--tls-server-name", default="",
                        help="name to check the server's certificate against")
    parser.add_argument("--token", default=os.environ.get("OASR_TOKEN", ""),
                        help="bearer token (default: $OASR_TOKEN, which keeps it out of ps)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("stream", "recognize"):
        p = sub.add_parser(name)
        p.add_argument("file", help="WAV (mono, 16-bit) or raw 16-bit PCM")
        p.add_argument("--rate", type=int, default=16000, help="sample rate of raw PCM")
        p.add_argument("--model", default="")
        p.add_argument("--max-alternatives", type=int, default=1)
        p.add_argument("--words", action="store_true", help="word time offsets")
        p.add_argument("--phrase", action="append", default=[], help="phrase to boost")
        p.add_argument("--boost", type=float, default=0.0)
        if name == "stream":
            p.add_argument("--chunk-ms", type=int, default=100)
            p.add_argument("--realtime", action="store_true", help="pace at the audio's rate")
            p.add_argument("--no-interim", action="store_true")
            p.add_argument("--single-utterance", action="store_true")
    sub.add_parser("models")
    args = parser.parse_args(argv)

    stubs_dir = args.stubs_dir or tempfile.mkdtemp(prefix="oasr-stubs-")
    pb2, pb2_grpc = load_stubs(stubs_dir)
    import grpc  # pylint: disable=import-outside-toplevel
    with open_channel(grpc, args) as channel:
        stub = pb2_grpc.SpeechStub(channel)
        if args.command == "stream":
            return run_stream(stub, pb2, args)
        if args.command == "recognize":
            return run_recognize(stub, pb2, args)
        return run_models(stub, pb2, args)


if __name__ == "__main__":
    sys.exit(main())
