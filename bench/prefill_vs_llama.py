#!/usr/bin/env python3
"""Prefill (ppP) and decode (tgN) of diskformer beside llama.cpp, in alternating rounds.

Each round runs every (model, threads) case once per engine, the engines one after the
other, so that a load change on a shared machine hits all of them alike; the report gives
per-case medians over the rounds and the median of the per-round ratios to llama.cpp.

  bench/prefill_vs_llama.py --engine new=build/diskformer --engine base=OLD/diskformer \
      --llama build/llama_ref -m A.gguf -m B.gguf -t 1 -t 2 --rounds 3 -o results.json

diskformer runs `bench -m M -p P -n N -r R -t T --output json`, llama_ref (tools/llama_ref,
llama.cpp's C API; pp: one batch of P tokens, logits of the last; tg: N tokens one at a
time) runs `bench -m M -p P -n N -r R -t T`. The load average is recorded per run. Both
report tokens per wall second (pp, tg) and per process CPU second (pp_cpu, tg_cpu: all
threads; robust to a loaded machine at one thread, not a measure of thread scaling).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def run_json(cmd):
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
    return json.loads(p.stdout), time.time() - t0


def ours(binary, model, a, t):
    j, wall = run_json([binary, "bench", "-m", model, "-p", str(a.p), "-n", str(a.n), "-r", str(a.reps),
                        "-t", str(t), "--output", "json"] + a.extra)
    return {"pp": j["prefill_tokens_per_second"], "tg": j["decode_tokens_per_second"],
            "pp_cpu": j["prefill_cpu_tokens_per_second"], "tg_cpu": j["decode_cpu_tokens_per_second"], "wall_s": wall}


def llama(binary, model, a, t):
    j, wall = run_json([binary, "bench", "-m", model, "-p", str(a.p), "-n", str(a.n), "-r", str(a.reps),
                        "-t", str(t)])
    return {"pp": j["pp"]["avg_ts"], "tg": j["tg"]["avg_ts"], "pp_cpu": j["pp_cpu"]["avg_ts"],
            "tg_cpu": j["tg_cpu"]["avg_ts"], "wall_s": wall}


def summarize(runs, engines):
    summary = []
    cases = []
    for r in runs:
        if (r["model"], r["threads"]) not in cases:
            cases.append((r["model"], r["threads"]))
    for model, t in cases:
        rows = [r for r in runs if r["model"] == model and r["threads"] == t]
        s = {"model": model, "threads": t, "rounds": len(rows),
             "load_median": statistics.median([r["load_before"] for r in rows])}
        for name in engines + ["llama.cpp"]:
            for k in ("pp", "tg", "pp_cpu", "tg_cpu"):
                s["%s_%s_median" % (name, k)] = statistics.median([r[name][k] for r in rows])
        for name in engines:
            for k in ("pp", "tg", "pp_cpu", "tg_cpu"):
                s["%s_%s_ratio_median" % (name, k)] = statistics.median(
                    [r[name][k] / r["llama.cpp"][k] for r in rows])
        summary.append(s)
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", action="append", required=True, help="NAME=path of a diskformer binary")
    ap.add_argument("--llama", required=True, help="path of llama_ref")
    ap.add_argument("-m", "--model", action="append", required=True)
    ap.add_argument("-t", "--threads", action="append", type=int, required=True)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-r", "--reps", type=int, default=2, help="repetitions inside one run (each engine)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--extra", action="append", default=[], help="extra argument for diskformer bench")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--from-log", help="summarise the per-run lines an interrupted run printed instead of running")
    a = ap.parse_args()
    if a.from_log:
        with open(a.from_log) as f:
            runs = [json.loads(l) for l in f if l.startswith('{"round"')]
        out = {"command": " ".join(sys.argv), "runs": runs, "summary": summarize(runs, [e.split("=", 1)[0] for e in a.engine])}
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
        for s in out["summary"]:
            print(json.dumps(s))
        return
    engines = [e.split("=", 1) for e in a.engine]
    runs = []
    for rnd in range(a.rounds):
        for model in a.model:
            for t in a.threads:
                row = {"round": rnd, "model": os.path.basename(model), "threads": t,
                       "load_before": os.getloadavg()[0]}
                for name, binary in engines:
                    row[name] = ours(binary, model, a, t)
                row["llama.cpp"] = llama(a.llama, model, a, t)
                row["load_after"] = os.getloadavg()[0]
                runs.append(row)
                print(json.dumps(row), flush=True)
    summary = summarize(runs, [e[0] for e in engines])
    out = {"command": " ".join(sys.argv), "p": a.p, "n": a.n, "reps": a.reps, "runs": runs, "summary": summary}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    for s in summary:
        print(json.dumps(s))


if __name__ == "__main__":
    main()
