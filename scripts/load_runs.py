#!/usr/bin/env python3
"""Capacity runs and soaks of oasr-server, driven by `oasr-client load`.

  load_runs.py capacity --levels 4,8,16 --seconds 60 [--out FILE.json]
      Starts the server, runs real-time streams at each concurrency level
      in turn and stops at the first level where chunk latency p99 passes
      --latency-bound-ms or a stream fails; prints a table and the highest
      level that held.

  load_runs.py soak --concurrency N --seconds 1800 [--out FILE.json]
      Starts the server and keeps N streams open for the whole time (real-
      time streams of 5-60 s at random rates 8-48 kHz; 10 % cancelled mid-
      stream, 5 % clients that stop reading, 5 % that go silent without
      closing), sampling the server's RSS, open files and /metrics. Passes
      when RSS stays within 5 % after the warm-up, open files are back to
      their baseline and every pool is back to full at the end, every
      stream ended as its behaviour should (a final result or a status, and
      for "stop" all of its audio processed within one encoder frame).

Both bind only 127.0.0.1, start and stop only the server they started, and
exit non-zero when the run did not hold or pass. The server and client are
taken from --build (default: build), or from --bin (a folder holding both,
as a GPU bundle's bin/ does).

Each capacity level also records where the CPU went: the server's and the
load generator's threads grouped by name (the project names its threads
oasr-scheduler, oasr-frontend, oasr-pool, oasr-events, oasr-grpc, oasr-load; gRPC
names its own), the machine's busiest cores, and the GPU's utilisation and
memory when nvidia-smi is present. `capacity --clients N` runs N load
generator processes side by side (each polls gRPC on its own, as separate
machines would), sharing each level's streams.
"""
import argparse
import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDLE_GAUGES = ("oasr_grpc_streams_open", "oasr_streams_active", "oasr_streams_waiting",
               "oasr_kv_pool_blocks_used", "oasr_stream_slots_used", "oasr_decoder_states_in_use")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    """/metrics as {name{labels}: value}; {} when the server does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def proc_figures(pid):
    """RSS in MiB, open file descriptors, and CPU seconds of process `pid`."""
    with open(f"/proc/{pid}/status") as f:
        rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, fds, cpu


def engine_figures(m0, m1, wall):
    """The engine's own view of a span from two /metrics scrapes: its audio
    rate, ticks, mean cohort, chunk latency (bucket bounds), the scheduler
    thread's time by part (seconds per second), and the streaming calls'
    stages (mean time per operation)."""
    if not m0 or not m1:
        return None

    def d(name):
        return m1.get(name, 0.0) - m0.get(name, 0.0)

    out = {"audio_x_real_time": d("oasr_audio_seconds_processed_total") / wall,
           "ticks_per_s": d("oasr_engine_ticks_total") / wall,
           "chunks_per_s": d("oasr_chunks_processed_total") / wall}
    ticks = d("oasr_engine_ticks_total")
    out["mean_cohort"] = d("oasr_chunks_processed_total") / ticks if ticks else None
    out["scheduler_parts"] = {
        k[len('oasr_engine_seconds_total{part="'):-2]: round(d(k) / wall, 3)
        for k in m1 if k.startswith('oasr_engine_seconds_total{part="')}
    buckets = sorted(((float(k.split('le="')[1].split('"')[0]), d(k)) for k in m1
                      if k.startswith('oasr_chunk_latency_seconds_bucket{le="') and
                      "+Inf" not in k), key=lambda b: b[0])
    total = d("oasr_chunk_latency_seconds_count")
    for q in (0.5, 0.99):
        bound = None
        for upper, cumulative in buckets:
            if total and cumulative >= q * total:
                bound = upper
                break
        out[f"chunk_p{int(q * 100)}_s_at_most"] = bound
    out["grpc_streams_open"] = m1.get("oasr_grpc_streams_open")
    # The streaming calls' stages: mean microseconds per operation, and the
    # operations a second.
    stages = {}
    for k in m1:
        if k.startswith('oasr_grpc_stage_total{stage="'):
            stage = k[len('oasr_grpc_stage_total{stage="'):-2]
            n = d(k)
            t = d(f'oasr_grpc_stage_seconds_total{{stage="{stage}"}}')
            stages[stage] = {"mean_us": round(1e6 * t / n, 1) if n else None,
                             "per_s": round(n / wall, 1)}
    if stages:
        out["grpc_stages"] = stages
    return out


def thread_cpu(pid):
    """CPU seconds of each thread of `pid`, grouped by thread name (digits dropped)."""
    out = collections.Counter()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        group = re.sub(r"[0-9]+$", "", name).rstrip("-_ ") or name
        out[group] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def core_times():
    """(busy, total) jiffies of every core from /proc/stat."""
    cores = []
    with open("/proc/stat") as f:
        for line in f:
            if re.match(r"cpu[0-9]+ ", line):
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + v[4]
                cores.append((sum(v) - idle, sum(v)))
    return cores


class GpuSampler:
    """nvidia-smi's utilisation and memory every second, when it is there."""

    def __init__(self):
        self.samples, self.proc = [], None
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits",
                 "-lms", "1000"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                util, mem = (float(x) for x in line.split(","))
                self.samples.append((time.time(), util, mem))
            except ValueError:
                pass

    def between(self, t0, t1):
        rows = [s for s in self.samples if t0 <= s[0] <= t1]
        if not rows:
            return None
        return {"util_mean_pct": sum(r[1] for r in rows) / len(rows),
                "util_max_pct": max(r[1] for r in rows),
                "memory_used_mib_max": max(r[2] for r in rows)}

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


class Profile:
    """Thread-group CPU of the server and the client, and per-core load, over a span."""

    def __init__(self, server_pid):
        self.server_pid = server_pid
        self.t0, self.cores0, self.server0 = time.time(), core_times(), thread_cpu(server_pid)
        self.client0, self.client_pids = collections.Counter(), []

    def watch_clients(self, pids):
        self.client_pids = list(pids)
        self.client_last = {pid: thread_cpu(pid) for pid in self.client_pids}
        self.client0 = sum(self.client_last.values(), collections.Counter())

    def sample_clients(self):
        # A client's threads go with it: keep what was read while it ran.
        for pid in self.client_pids:
            now = thread_cpu(pid)
            if now:
                self.client_last[pid] = now
        self.client1 = sum(self.client_last.values(), collections.Counter())

    def finish(self):
        wall = time.time() - self.t0
        server1, cores1 = thread_cpu(self.server_pid), core_times()
        client1 = getattr(self, "client1", collections.Counter())

        def per_core(a, b):
            return {k: round((b[k] - a.get(k, 0)) / wall, 3) for k in b
                    if (b[k] - a.get(k, 0)) / wall >= 0.005}

        loads = sorted(((b1 - b0) / max(1, t1 - t0) for (b0, t0), (b1, t1) in
                        zip(self.cores0, cores1)), reverse=True)
        return {"wall_s": wall,
                "server_threads_cores": dict(sorted(per_core(self.server0, server1).items(),
                                                    key=lambda kv: -kv[1])),
                "client_threads_cores": dict(sorted(per_core(self.client0, client1).items(),
                                                    key=lambda kv: -kv[1])),
                "machine_cores_busy": round(sum(loads), 2),
                "busiest_cores": [round(x, 2) for x in loads[:4]],
                "cores": len(loads)}


class Server:
    """oasr-server on loopback with the given extra flags."""

    def __init__(self, args, extra):
        self.port, self.metrics_port = free_port(), free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="oasr-load-server-", suffix=".log",
                                               delete=False)
        bin_dir = args.bin or os.path.join(args.build, "server")
        cmd = [os.path.join(bin_dir, "oasr-server"), "--address", "127.0.0.1",
               "--port", str(self.port), "--metrics-address", "127.0.0.1", "--metrics-port",
               str(self.metrics_port), "--model-dir", args.model_dir, "--log-level", "warn"]
        self.proc = subprocess.Popen(cmd + extra, stdout=self.log, stderr=subprocess.STDOUT)
        self.client = os.path.join(bin_dir, "oasr-client")
        deadline = time.time() + args.start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}); log: "
                                   + open(self.log.name).read()[-2000:])
            ok = subprocess.run([self.client, "--server", f"127.0.0.1:{self.port}", "health"],
                                capture_output=True).returncode == 0
            if ok:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the server did not report SERVING within {args.start_timeout} s")

    def wait_idle(self, seconds=60):
        """The last scrape once every idle gauge is 0 (or the last one at the deadline)."""
        deadline = time.time() + seconds
        while True:
            m = scrape(self.metrics_port)
            if m and all(m.get(g, -1) == 0 for g in IDLE_GAUGES):
                return m, True
            if time.time() > deadline:
                return m, False
            time.sleep(0.5)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def run_load(server, args, flags, tag, profile=None, clients=1, concurrency=None):
    """oasr-client load with `flags`; (report dict, records list, its stdout).

    With `clients` > 1, that many load generator processes run side by side
    (each with its own gRPC polling, as separate machines would), sharing
    `concurrency` streams (passed as --concurrency) and seeded apart; their
    reports merge (merge_reports)."""
    out_dir = tempfile.mkdtemp(prefix="oasr-load-")
    samples = sorted(os.path.join(args.samples, f) for f in os.listdir(args.samples)
                     if f.endswith(".wav"))
    procs = []
    for i in range(clients):
        report_path = os.path.join(out_dir, f"{tag}.{i}.json")
        records_path = os.path.join(out_dir, f"{tag}.{i}.records.jsonl")
        extra = []
        if concurrency is not None:
            share = concurrency // clients + (1 if i < concurrency % clients else 0)
            extra = ["--concurrency", str(share)]
        if clients > 1:
            extra += ["--seed", str(1 + i)]
        cmd = [server.client, "--server", f"127.0.0.1:{server.port}", "load", *samples,
               "--report-json", report_path, "--records-json", records_path,
               "--latency-bound-ms", str(args.latency_bound_ms)] + flags + extra + args.client_flag
        procs.append((cmd, report_path, records_path,
                      subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)))
    if profile is not None:
        profile.watch_clients([p.pid for _, _, _, p in procs])
        # Sample the clients' threads until they exit (they are gone after).
        while any(p.poll() is None for _, _, _, p in procs):
            profile.sample_clients()
            time.sleep(1)
    reports, records, stdouts = [], [], []
    for cmd, report_path, records_path, proc in procs:
        stdout, stderr = proc.communicate()
        sys.stdout.write(stdout)
        if proc.returncode not in (0, 1) or not os.path.exists(report_path):
            raise RuntimeError(f"oasr-client load failed ({proc.returncode}): {stderr}")
        with open(report_path) as f:
            reports.append(json.load(f))
        with open(records_path) as f:
            records += [json.loads(line) for line in f]
        stdouts.append(stdout)
    return merge_reports(reports), records, "".join(stdouts)


def merge_reports(reports):
    """One report for load generators that ran side by side: counts, audio
    and CPU add up, means are weighted by count, and each latency percentile
    and maximum is the worst client's (an upper bound of the pooled
    percentile, so a merged run holds only if every client's streams did)."""
    if len(reports) == 1:
        return reports[0]
    out = dict(reports[0])
    for key in ("streams", "failed_streams", "cpu_s", "audio_sent_s", "audio_processed_s",
                "audio_lost_streams"):
        if all(key in r for r in reports):
            out[key] = sum(r[key] for r in reports)
    out["wall_s"] = max(r["wall_s"] for r in reports)
    out["busiest_thread"] = max(r.get("busiest_thread", 0) for r in reports)
    for key in ("chunk_latency", "final_latency", "send_lag"):
        merged = {k: max(r[key][k] for r in reports) for k in reports[0][key]
                  if k.endswith("_ms")}
        count = sum(r[key].get("count", 0) for r in reports)
        merged["count"] = count
        if all("mean_ms" in r[key] for r in reports):
            merged["mean_ms"] = (sum(r[key]["mean_ms"] * r[key].get("count", 0) for r in reports) /
                                 max(1, count))
        out[key] = merged
    codes = collections.Counter()
    for r in reports:
        codes.update(r.get("codes") or {})
    out["codes"] = dict(codes)
    out["warnings"] = [f"client {i}: {w}" for i, r in enumerate(reports) for w in r["warnings"]]
    out["clients"] = len(reports)
    return out


def capacity(args):
    server = Server(args, args.server_flag)
    gpu = GpuSampler()
    rows, held = [], None
    try:
        for level in [int(x) for x in args.levels.split(",")]:
            cpu0 = proc_figures(server.proc.pid)[2]
            t0 = time.time()
            ramp = args.ramp if args.ramp is not None else min(args.seconds / 4, 10)
            profile = Profile(server.proc.pid)
            metrics0 = scrape(server.metrics_port)
            mid = {}

            def scrape_mid(at=t0 + ramp + args.seconds / 2):
                # The engine's view in the level's steady part (the ramp done).
                while time.time() < at and server.proc.poll() is None:
                    time.sleep(0.2)
                mid["t"], mid["m"] = time.time(), scrape(server.metrics_port)
            mid_thread = threading.Thread(target=scrape_mid, daemon=True)
            mid_thread.start()
            report, _, _ = run_load(server, args, [
                "--duration", str(args.seconds), "--ramp", str(ramp), "--max-seconds", "20",
                "--min-seconds", "5"], f"level{level}", profile, clients=args.clients,
                concurrency=level)
            wall = time.time() - t0
            rss, fds, cpu1 = proc_figures(server.proc.pid)
            prof = profile.finish()
            prof["gpu"] = gpu.between(t0, time.time())
            mid_thread.join(timeout=1)
            if mid.get("m"):
                prof["engine_first_half"] = engine_figures(metrics0, mid["m"], mid["t"] - t0)
            prof["engine"] = engine_figures(metrics0, scrape(server.metrics_port), wall)
            server.wait_idle()
            row = {
                "concurrency": level,
                "streams": report["streams"],
                "failed": report["failed_streams"],
                "chunk_p50_ms": report["chunk_latency"]["p50_ms"],
                "chunk_p99_ms": report["chunk_latency"]["p99_ms"],
                "final_p99_ms": report["final_latency"]["p99_ms"],
                "send_lag_p99_ms": report["send_lag"]["p99_ms"],
                "client_cpu_cores": report["cpu_s"] / report["wall_s"],
                "server_cpu_cores": (cpu1 - cpu0) / wall,
                "server_rss_mib": rss,
                "warnings": report["warnings"],
                "codes": report.get("codes"),
                "audio_lost_streams": report.get("audio_lost_streams"),
                "client_busiest_thread": report.get("busiest_thread"),
                "audio_sent_s": report.get("audio_sent_s"),
                "audio_processed_s": report.get("audio_processed_s"),
                "profile": prof,
            }
            rows.append(row)
            ok = (report["failed_streams"] == 0 and
                  report["chunk_latency"]["p99_ms"] <= args.latency_bound_ms)
            print(f"== {level} streams: {'held' if ok else 'did not hold'}", flush=True)
            print("   profile: " + json.dumps(prof), flush=True)
            if not ok:
                break
            held = level
    finally:
        gpu.stop()
        server.stop()
    print("\n| streams | chunk p50 ms | chunk p99 ms | final p99 ms | failed | server cores "
          "| client cores | server RSS MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['chunk_p50_ms']:.0f} | {r['chunk_p99_ms']:.0f} | "
              f"{r['final_p99_ms']:.0f} | {r['failed']} | {r['server_cpu_cores']:.2f} | "
              f"{r['client_cpu_cores']:.2f} | {r['server_rss_mib']:.0f} |")
    print(f"\nhighest level that held: {held}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "held": held, "argv": sys.argv[1:]}, f, indent=2)
    return 0 if held is not None else 1


def soak(args):
    server = Server(args, ["--stream-idle-timeout", str(args.idle_timeout)] + args.server_flag)
    samples, failures = [], []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            try:
                rss, fds, cpu = proc_figures(server.proc.pid)
            except (OSError, AttributeError):
                return
            m = scrape(server.metrics_port)
            samples.append({"t": time.time() - t0, "rss_mib": rss, "fds": fds, "cpu_s": cpu,
                            "streams_open": m.get("oasr_grpc_streams_open")})
            stop.wait(args.sample_every)

    try:
        server.wait_idle()
        base_rss, base_fds, _ = proc_figures(server.proc.pid)
        t0 = time.time()
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        report, records, _ = run_load(server, args, [
            "--duration", str(args.seconds), "--ramp", str(min(30, args.seconds / 6)),
            "--min-seconds", str(args.min_seconds), "--max-seconds", str(args.max_seconds),
            "--rates", "8000,11025,16000,22050,32000,44100,48000",
            "--cancel-fraction", "0.10", "--stall-fraction", "0.05",
            "--vanish-fraction", "0.05", "--stall-seconds", str(args.stall_seconds),
            "--seed", str(args.seed)], "soak", concurrency=args.concurrency)
        stop.set()
        thread.join()
        last, idle = server.wait_idle(args.idle_timeout * 3 + 30)
        end_rss, end_fds, _ = proc_figures(server.proc.pid)
    finally:
        stop.set()
        code = server.stop()

    # Figures and checks.
    warm = args.warmup
    steady = [s["rss_mib"] for s in samples if s["t"] >= warm] or [end_rss]
    rss_spread = (max(steady) - min(steady)) / min(steady)
    if rss_spread > 0.05:
        failures.append(f"RSS moved {100 * rss_spread:.1f} % after the warm-up "
                        f"({min(steady):.0f}-{max(steady):.0f} MiB)")
    if end_fds > base_fds:
        failures.append(f"open files {end_fds} at the end against {base_fds} before")
    if not idle:
        failures.append("pools not back to full: " +
                        ", ".join(f"{g} {last.get(g)}" for g in IDLE_GAUGES))
    if report["failed_streams"]:
        failures.append(f"{report['failed_streams']} streams did not end as they should")
    unended = [r for r in records if r["code"] == "OK" and not r["final_result"]]
    if unended:
        failures.append(f"{len(unended)} streams ended OK without a final result")
    if code != 0:
        failures.append(f"the server exited {code} on SIGTERM")
    by_behaviour = {}
    for r in records:
        b = by_behaviour.setdefault(r["behaviour"], {})
        b[r["code"]] = b.get(r["code"], 0) + 1
    stops = [r for r in records if r["finish_reason"] == "stop"]
    worst_gap = max((r["audio_sent_s"] - r["audio_processed_s"] for r in stops), default=0)
    summary = {
        "seconds": args.seconds, "concurrency": args.concurrency, "streams": len(records),
        "statuses_by_behaviour": by_behaviour, "streams_stop": len(stops),
        "worst_unprocessed_s_of_stop_streams": worst_gap,
        "audio_sent_s": report["audio_sent_s"], "audio_processed_s": report["audio_processed_s"],
        "chunk_latency": report["chunk_latency"], "final_latency": report["final_latency"],
        "rss_mib_baseline": base_rss, "rss_mib_after_warmup_min": min(steady),
        "rss_mib_after_warmup_max": max(steady), "rss_mib_end": end_rss,
        "fds_baseline": base_fds, "fds_end": end_fds, "pools_idle_at_end": idle,
        "server_exit": code, "failures": failures, "argv": sys.argv[1:],
    }
    print(json.dumps(summary, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"summary": summary, "samples": samples}, f, indent=2)
    print("soak: " + ("PASSED" if not failures else "FAILED: " + "; ".join(failures)))
    return 0 if not failures else 1


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--bin", help="folder with oasr-server and oasr-client (default: BUILD/server)")
    p.add_argument("--start-timeout", type=float, default=120,
                   help="seconds the server may take to report SERVING")
    p.add_argument("--model-dir", default=os.path.join(ROOT, "models", "en-conformer-ctc"))
    p.add_argument("--samples", default=os.path.join(ROOT, "samples"))
    p.add_argument("--latency-bound-ms", type=float, default=200)
    p.add_argument("--server-flag", action="append", default=[],
                   help="an extra server flag (repeat; e.g. --server-flag=--decode-threads=2)")
    p.add_argument("--client-flag", action="append", default=[],
                   help="an extra oasr-client load flag (repeat; e.g. --client-flag=--threads=8)")
    p.add_argument("--out", help="write the figures as JSON here")
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("capacity")
    c.add_argument("--levels", default="4,8,12,16,24,32")
    c.add_argument("--seconds", type=float, default=60)
    c.add_argument("--clients", type=int, default=1,
                   help="load generator processes side by side, sharing each level's streams "
                        "(latency percentiles: the worst client's)")
    c.add_argument("--ramp", type=float, default=None,
                   help="seconds over which a level's streams start (default: a quarter of "
                        "--seconds, at most 10)")
    s = sub.add_parser("soak")
    s.add_argument("--concurrency", type=int, required=True)
    s.add_argument("--seconds", type=float, default=1800)
    s.add_argument("--warmup", type=float, default=None,
                   help="seconds before RSS must stay flat (default: a fifth of the run, "
                        "at least 60 s)")
    s.add_argument("--min-seconds", type=float, default=5)
    s.add_argument("--max-seconds", type=float, default=60)
    s.add_argument("--stall-seconds", type=float, default=10)
    s.add_argument("--idle-timeout", type=float, default=10)
    s.add_argument("--sample-every", type=float, default=5)
    s.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.mode == "capacity":
        return capacity(args)
    if args.warmup is None:
        args.warmup = max(60.0, args.seconds / 5)
    return soak(args)


if __name__ == "__main__":
    sys.exit(main())
