"""Runs every grpcurl and ghz example of README.md and docs/ as written
against a live oasr-server serving the bundled model (issue 20).

Each fenced `sh` block that calls grpcurl or ghz runs in bash -euo pipefail
in one scratch folder (docs/api.md's blocks first: they make messages.json,
which README.md's ghz block uses), with only these substitutions:
127.0.0.1:50051 becomes the test server's address, and audio.wav is a copy
of samples/01_espeak_en-us.wav (112 KB, above the ~96 KB at which a file's
base64 no longer fits in one command-line argument). Then each command's
output is checked: health SERVING, the transcripts, ghz's calls all OK.

Exit 77 (ctest: skipped), saying why, when grpcurl or ghz is not found on
PATH, in $GRPC_TOOLS_DIR, or in the archive $GRPC_TOOLS_ARCHIVE.
usage: doc_examples_test.py SERVER_BINARY SOURCE_DIR WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

import bundled_server

SKIP = 77
DOCS_ORDER = ["docs/api.md", "README.md"]  # Then any other docs/*.md.
GHZ_TOTAL_MAX = 40  # ghz's --total above this is lowered (2 CPU cores).


def find_tools(work):
    """Returns {name: path} of grpcurl and ghz found (maybe not both)."""
    extracted = os.path.join(work, "grpc-tools")
    archive = os.environ.get("GRPC_TOOLS_ARCHIVE", "")

    def search():
        found = {}
        for name in ("grpcurl", "ghz"):
            for folder in (os.environ.get("GRPC_TOOLS_DIR", ""), extracted):
                if folder and os.access(os.path.join(folder, name), os.X_OK):
                    found[name] = os.path.join(folder, name)
                    break
            else:
                if shutil.which(name):
                    found[name] = shutil.which(name)
        return found

    found = search()
    if len(found) < 2 and archive and os.path.isfile(archive):
        with tarfile.open(archive) as tar:
            tar.extractall(extracted)
        found = search()
    return found


def blocks(source_dir):
    """Yields (file, first line, text) of each sh block that calls grpcurl or ghz."""
    docs = [os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(source_dir, "docs")))]
    files = DOCS_ORDER + [d for d in docs if d.endswith(".md") and d not in DOCS_ORDER]
    for rel in files:
        text = open(os.path.join(source_dir, rel), encoding="utf-8").read()
        for m in re.finditer(r"^```sh\n(.*?)^```", text, re.S | re.M):
            body = m.group(1)
            if re.search(r"^\s*(grpcurl|ghz) ", body, re.M):
                yield rel, text[: m.start()].count("\n") + 2, body


def check(rel, line, body, out):
    """Returns what is wrong with a block's output, or ''."""
    problems = []
    if "grpc.health.v1.Health/Check" in body and '"status": "SERVING"' not in out:
        problems.append("health is not SERVING")
    if re.search(r"^grpcurl .* list$", body, re.M):
        for service in ("oasr.asr.v1.Speech", "grpc.health.v1.Health"):
            if service not in out:
                problems.append(f"list lacks {service}")
    if "describe grpc.health.v1.Health" in body and "rpc Check" not in out:
        problems.append("describe grpc.health.v1.Health shows no rpc Check")
    for rpc in ("StreamingRecognize", "Recognize"):
        if re.search(rf"^\s*(\S.*)?grpcurl .*Speech/{rpc}\b", body, re.M) and \
                "painful" not in out:
            problems.append(f"{rpc}: no transcript of audio.wav in the output")
    if re.search(r"^\s*ghz ", body, re.M):
        codes = re.findall(r"\[(\w+)\]\s+(\d+) responses", out)
        if not codes or any(code != "OK" for code, _ in codes):
            problems.append(f"ghz: status codes {codes or 'missing'}")
    return "; ".join(problems)


def main():
    binary, source_dir, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tools = find_tools(work)
    if len(tools) < 2:
        print(f"SKIPPED: grpcurl and ghz needed, found: {', '.join(sorted(tools)) or 'none'} "
              "(searched PATH, GRPC_TOOLS_DIR, GRPC_TOOLS_ARCHIVE)")
        return SKIP
    if not os.path.isfile(os.path.join(source_dir, "models/en-conformer-ctc/config.json")):
        print("SKIPPED: the bundled model models/en-conformer-ctc is not there")
        return SKIP
    scratch = os.path.join(work, "scratch")
    os.makedirs(scratch)
    shutil.copy(os.path.join(source_dir, "samples", "01_espeak_en-us.wav"),
                os.path.join(scratch, "audio.wav"))
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        sorted({os.path.dirname(p) for p in tools.values()}) + [env.get("PATH", "")])
    proc, port = bundled_server.start(binary, source_dir, work)
    failures, ran = [], 0
    try:
        for rel, line, body in blocks(source_dir):
            script = body.replace("127.0.0.1:50051", f"127.0.0.1:{port}")
            total = re.search(r"--total (\d+)", script)
            if total and int(total.group(1)) > GHZ_TOTAL_MAX:
                script = script.replace(total.group(0), f"--total {GHZ_TOTAL_MAX}")
            started = time.time()
            result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=scratch,
                                    env=env, capture_output=True, text=True, timeout=240)
            out = result.stdout + result.stderr
            ran += 1
            print(f"== {rel}:{line} (exit {result.returncode}, {time.time() - started:.1f} s)")
            print("\n".join(out.splitlines()[:40]))
            problem = f"exit {result.returncode}" if result.returncode else check(
                rel, line, body, out)
            if problem:
                failures.append(f"{rel}:{line}: {problem}")
    finally:
        bundled_server.stop(proc)
    if ran == 0:
        failures.append("no grpcurl or ghz example found in README.md and docs/")
    for f in failures:
        print("FAILED:", f)
    print(f"{ran - len(failures) if ran else 0} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
