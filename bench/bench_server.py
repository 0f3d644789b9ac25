#!/usr/bin/env python3
"""Benchmark of `diskformer serve`: requests/s, aggregate generated tok/s and time to first
token (p50/p99) at several concurrency levels, with streaming completions (greedy, fixed
length through ignore_eos). Prints one JSON object.

  python3 bench/bench_server.py --bin build/diskformer [--model M] [--levels 1,8,32]
      [--requests-per-client 4] [--max-tokens 64] [--threads 0] [--parallel 32] [--rounds 1]

Aggregate decode tok/s is measured twice: by the clients (generated tokens / wall time of
the level) and by the server (/metrics: generated tokens / time inside decode steps).
On a busy machine, --rounds R runs the levels R times interleaved (1, 8, 32, 1, 8, 32, ...)
and reports each figure's median over the rounds, and the 8-vs-1 ratio of each round.
Server-side decode tok/s counts the tokens of decode steps (a request's first token comes
from its prefill), so that a speculative cycle's several tokens count as tokens.

--spec-compare runs two servers side by side, `--spec none` and the default (MTP drafts for
greedy requests when the model has a head), the rounds interleaved between them, and adds
the speculative / plain ratio of generated tok/s at each level, per round and median.
"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time

PROMPTS = [
    "def fibonacci(n):\n",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    def __init__(self):\n",
    "def read_json(path):\n    \"\"\"Read a JSON file.\"\"\"\n",
    "for i in range(10):\n",
    "# Sort a list of numbers\ndef sort_numbers(xs):\n",
    "def is_prime(n):\n    if n < 2:\n",
    "from typing import List\n\n\ndef flatten(xs: List[list]) -> list:\n",
]


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one_request(port, prompt, max_tokens):
    """Streams one completion; returns (ttft_s, total_s, completion_tokens)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    ttft = None
    tokens = 0
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("error"):
            raise RuntimeError(chunk["error"]["message"])
        if chunk["choices"] and chunk["choices"][0]["text"] and ttft is None:
            ttft = time.perf_counter() - t0
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    total = time.perf_counter() - t0
    conn.close()
    return ttft if ttft is not None else total, total, tokens


def server_metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for name in ("generated_tokens_total", "decode_seconds_total", "decode_steps_total", "decode_step_rows_total"):
        m = re.search(rf"^diskformer_{name} (\S+)$", text, re.M)
        out[name] = float(m.group(1))
    return out


def run_level(port, clients, per_client, max_tokens):
    results, errors = [], []
    lock = threading.Lock()

    def client(i):
        for k in range(per_client):
            prompt = PROMPTS[(i * per_client + k) % len(PROMPTS)] + f"# request {i}.{k}\n"
            try:
                r = one_request(port, prompt, max_tokens)
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - reported in the JSON
                with lock:
                    errors.append(str(e))

    m0 = server_metrics(port)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    m1 = server_metrics(port)
    ttfts = [r[0] for r in results]
    gen = sum(r[2] for r in results)
    d_tokens = m1["generated_tokens_total"] - m0["generated_tokens_total"]
    d_secs = m1["decode_seconds_total"] - m0["decode_seconds_total"]
    d_steps = m1["decode_steps_total"] - m0["decode_steps_total"]
    d_rows = m1["decode_step_rows_total"] - m0["decode_step_rows_total"]
    return {
        "concurrency": clients,
        "requests": len(results),
        "errors": errors[:5],
        "n_errors": len(errors),
        "wall_s": round(wall, 6),  # us: requests_per_s x wall_s must give the requests even for a wall of a few ms
        "requests_per_s": round(len(results) / wall, 3),
        "generated_tokens": gen,
        "generated_tok_per_s": round(gen / wall, 1),
        "ttft_p50_ms": round(1000 * percentile(ttfts, 50), 1) if ttfts else None,
        "ttft_p99_ms": round(1000 * percentile(ttfts, 99), 1) if ttfts else None,
        "server_decode_tok_per_s": round((d_tokens - len(results)) / d_secs, 1) if d_secs > 0 else None,
        "server_mean_rows_per_step": round(d_rows / d_steps, 2) if d_steps > 0 else None,
        "server_generated_tokens": int(d_tokens),
    }


def start_server(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.terminate()
        raise SystemExit(f"the server did not start: {line}{proc.stderr.read()}")
    port = int(m.group(1))
    one_request(port, PROMPTS[0], 8)  # warm up
    return proc, port


def medians(conc, rounds):
    levels = []
    for i, c in enumerate(conc):
        runs = [r[i] for r in rounds]
        med = dict(runs[0])
        for k, v in runs[0].items():
            if isinstance(v, (int, float)) and k != "concurrency":
                med[k] = statistics.median(r[k] for r in runs)
        med["errors"] = sum((r["errors"] for r in runs), [])[:5]
        levels.append(med)
    return levels


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--requests-per-client", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--spec-compare", action="store_true")
    a = ap.parse_args()
    cmd = [a.bin, "serve", "--port", "0", "-q", "-P", str(a.parallel), "-c", str(a.ctx), "-t", str(a.threads)]
    if a.model:
        cmd += ["-m", a.model]
    setups = {"plain": cmd + ["--spec", "none"], "spec": cmd} if a.spec_compare else {"server": cmd}
    procs = {}
    try:
        ports = {}
        for name, c in setups.items():
            procs[name], ports[name] = start_server(c)
        conc = [int(c) for c in a.levels.split(",")]
        rounds = {name: [] for name in setups}
        for _ in range(a.rounds):
            for name in setups:
                rounds[name].append([run_level(ports[name], c, a.requests_per_client, a.max_tokens) for c in conc])
        out = {"benchmark": "server", "max_tokens": a.max_tokens, "requests_per_client": a.requests_per_client,
               "rounds": a.rounds}
        for name in setups:
            rs = rounds[name]
            res = {"command": " ".join(setups[name]), "levels": medians(conc, rs)}
            if 1 in conc and 8 in conc:
                i1, i8 = conc.index(1), conc.index(8)
                client = [r[i8]["generated_tok_per_s"] / r[i1]["generated_tok_per_s"] for r in rs]
                server = [r[i8]["server_decode_tok_per_s"] / r[i1]["server_decode_tok_per_s"] for r in rs
                          if r[i1]["server_decode_tok_per_s"] and r[i8]["server_decode_tok_per_s"]]
                res["decode_speedup_8_vs_1_client_side_per_round"] = [round(x, 2) for x in client]
                res["decode_speedup_8_vs_1_client_side"] = round(statistics.median(client), 2)
                if server:
                    res["decode_speedup_8_vs_1_server_side_per_round"] = [round(x, 2) for x in server]
                    res["decode_speedup_8_vs_1_server_side"] = round(statistics.median(server), 2)
            if a.spec_compare:
                out.setdefault("servers", {})[name] = res
            else:
                out.update(res)
        if a.spec_compare:
            ratios = {}
            for i, c in enumerate(conc):
                per = [s[i]["generated_tok_per_s"] / p[i]["generated_tok_per_s"]
                       for s, p in zip(rounds["spec"], rounds["plain"])]
                ratios[str(c)] = {"per_round": [round(x, 3) for x in per], "median": round(statistics.median(per), 3)}
            out["spec_vs_plain_generated_tok_per_s"] = ratios
        print(json.dumps(out, indent=1))
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
