"""oasr-server for the Python server tests (doc_examples_test.py,
compat_api_test.py): on 127.0.0.1, on ports the server picks (--port 0,
--metrics-port 0, read back from --port-file), serving the bundled model on
the CPU, its output in WORK/server.log.
"""
import json
import os
import signal
import subprocess
import sys
import time


def start(binary, source_dir, work, extra_args=(), model_dir=None):
    """Starts the server (the bundled model unless model_dir names another) and
    waits (at most 60 s) for its port; returns (process, gRPC port). Exits
    the test, with the server's log, when it does not come up."""
    port_file = os.path.join(work, "ports.json")
    if os.path.exists(port_file):  # an earlier run's, naming its ports
        os.remove(port_file)
    log = open(os.path.join(work, "server.log"), "w")
    proc = subprocess.Popen(
        [binary, "--address", "127.0.0.1", "--port", "0", "--metrics-port", "0",
         "--port-file", port_file, "--model-dir",
         model_dir or os.path.join(source_dir, "models", "en-conformer-ctc"), "--device", "cpu",
         *extra_args],
        stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        if os.path.exists(port_file):
            with open(port_file, encoding="utf-8") as f:
                return proc, json.load(f)["grpc_port"]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    sys.exit("server did not come up:\n" + open(log.name).read())


def stop(proc):
    """SIGTERM, then at most 30 s for the exit (killed after that)."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
