"""scripts/load_runs.py's merge of load generators run side by side: counts,
audio and CPU add up, means are weighted, each latency percentile is the
worst client's, codes add up and warnings keep their client."""
import importlib.util
import os
import sys
import unittest

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
spec = importlib.util.spec_from_file_location("load_runs", os.path.join(ROOT, "scripts", "load_runs.py"))
load_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(load_runs)


def report(streams, failed, p99, cpu, codes, warnings, busiest):
    return {"streams": streams, "failed_streams": failed, "cpu_s": cpu, "wall_s": 30.0 + streams,
            "audio_sent_s": 10.0 * streams, "audio_processed_s": 10.0 * streams - failed,
            "audio_lost_streams": failed, "busiest_thread": busiest,
            "chunk_latency": {"p50_ms": p99 / 2, "p99_ms": p99, "mean_ms": p99 / 3,
                              "count": streams},
            "final_latency": {"p50_ms": p99, "p99_ms": 2 * p99, "count": streams},
            "send_lag": {"p50_ms": 1.0, "p99_ms": p99 / 10, "count": streams},
            "codes": codes, "warnings": warnings}


class MergeReportsTest(unittest.TestCase):
    def test_one_report_is_itself(self):
        r = report(3, 0, 40, 1.5, {"OK": 3}, [], 0.2)
        self.assertIs(load_runs.merge_reports([r]), r)

    def test_side_by_side_clients(self):
        a = report(10, 0, 40.0, 2.0, {"OK": 10}, [], 0.3)
        b = report(12, 1, 250.0, 3.0, {"OK": 11, "CANCELLED": 1}, ["behind"], 0.6)
        m = load_runs.merge_reports([a, b])
        self.assertEqual(m["streams"], 22)
        self.assertEqual(m["failed_streams"], 1)
        self.assertEqual(m["cpu_s"], 5.0)
        self.assertEqual(m["audio_sent_s"], 220.0)
        self.assertEqual(m["audio_lost_streams"], 1)
        self.assertEqual(m["wall_s"], 42.0)
        self.assertEqual(m["busiest_thread"], 0.6)
        self.assertEqual(m["chunk_latency"]["p99_ms"], 250.0)
        self.assertEqual(m["chunk_latency"]["p50_ms"], 125.0)
        self.assertEqual(m["chunk_latency"]["count"], 22)
        self.assertAlmostEqual(m["chunk_latency"]["mean_ms"], (10 * 40 / 3 + 12 * 250 / 3) / 22)
        self.assertEqual(m["final_latency"]["p99_ms"], 500.0)
        self.assertEqual(m["send_lag"]["p99_ms"], 25.0)
        self.assertEqual(m["codes"], {"OK": 21, "CANCELLED": 1})
        self.assertEqual(m["warnings"], ["client 1: behind"])
        self.assertEqual(m["clients"], 2)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
