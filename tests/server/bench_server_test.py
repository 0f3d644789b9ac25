#!/usr/bin/env python3
"""README: "python3 bench/bench_server.py --bin build/diskformer measures requests/s, generated
tok/s and time to first token at 1, 8 and 32 concurrent clients (JSON)". A short run (levels 1
and 2, 2 requests of 8 tokens per client) must print that JSON with every figure present and
consistent: every request answered, each with its 8 tokens, rates and times positive.

  python3 tests/server/bench_server_test.py --bin build/diskformer
"""
import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
a = ap.parse_args()
bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "bench_server.py")
out = subprocess.run([sys.executable, bench, "--bin", a.bin, "--levels", "1,2", "--requests-per-client", "2",
                      "--max-tokens", "8", "--parallel", "2", "--threads", "1"],
                     capture_output=True, text=True, timeout=300)
if out.returncode != 0:
    sys.exit(f"bench_server.py exited {out.returncode}:\n{out.stderr}")
j = json.loads(out.stdout)
assert j["benchmark"] == "server" and j["max_tokens"] == 8, j
assert [lv["concurrency"] for lv in j["levels"]] == [1, 2], j["levels"]
for lv in j["levels"]:
    c = lv["concurrency"]
    assert lv["n_errors"] == 0, lv
    assert lv["requests"] == 2 * c, lv
    assert lv["generated_tokens"] == 8 * lv["requests"], lv
    for k in ("requests_per_s", "generated_tok_per_s", "ttft_p50_ms", "ttft_p99_ms", "server_decode_tok_per_s"):
        assert isinstance(lv[k], (int, float)) and lv[k] > 0, (k, lv)
    assert lv["ttft_p50_ms"] <= lv["ttft_p99_ms"], lv
    assert abs(lv["requests_per_s"] * lv["wall_s"] - lv["requests"]) < 0.01 * lv["requests"] + 0.01, lv
    assert 1 <= lv["server_mean_rows_per_step"] <= c, lv
print(f"bench_server_test: levels {[lv['concurrency'] for lv in j['levels']]} measured")
