"""Checks a training run's output against llama.cpp (CPU machine, no torch/numpy needed):

  python3 tools/train/verify_llama.py --llama-ref build/llama_ref --run DIR [--model M.gguf] [--ppl-ctx 512]

DIR is train.py's --out directory (default.gguf, heldout.txt, ref.json, ref_logits.bin,
metrics.json). Prints and writes DIR/llama_cpp_check.json:
  - llama.cpp's tokenization of heldout.txt equals the training tokenizer's;
  - llama.cpp's logits vs PyTorch's (same Q8_0-rounded weights): relative error, argmax agreement;
  - llama.cpp's greedy continuation of the 5 prompts vs PyTorch's (common prefix, margin where
    they part: a genuine near-tie shows as a tiny margin);
  - llama.cpp's perplexity on heldout.txt vs the training-side number (same method).
"""
from __future__ import annotations

import argparse
import array
import json
import math
import os
import subprocess
import tempfile


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr.strip()[-500:]}")
    return r.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-ref", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--ppl-ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    lr = a.llama_ref
    model = a.model or os.path.join(a.run, "default.gguf")
    ref = json.load(open(os.path.join(a.run, "ref.json")))
    metrics = json.load(open(os.path.join(a.run, "metrics.json")))
    V = ref["n_vocab"]
    out = {"model": os.path.basename(model)}
    tmp = tempfile.mkdtemp()

    def p(name):
        return os.path.join(tmp, name)

    # tokenization of heldout.txt
    text = open(os.path.join(a.run, "heldout.txt"), "rb").read()
    json.dump([text.hex()], open(p("t.json"), "w"))
    run([lr, "tokenize", "-m", model, "--in", p("t.json"), "--out", p("t_out.json"), "--no-special"])
    ids = json.load(open(p("t_out.json")))[0]
    if "heldout_txt_ids" in ref:
        out["heldout_tokenization_equal"] = ids == ref["heldout_txt_ids"]
    out["heldout_tokens"] = len(ids)

    # logits
    json.dump(ref["logit_prompts"], open(p("lp.json"), "w"))
    run([lr, "logits", "-m", model, "--in", p("lp.json"), "--out", p("l.bin"), "-t", str(a.threads)])
    x = array.array("f", open(p("l.bin"), "rb").read())
    y = array.array("f", open(os.path.join(a.run, "ref_logits.bin"), "rb").read())
    assert len(x) == len(y), "logit counts differ"
    num = sum((u - v) ** 2 for u, v in zip(x, y))
    den = sum(v * v for v in y)
    n = len(x) // V
    agree = sum(max(range(V), key=x[i * V:(i + 1) * V].__getitem__) ==
                max(range(V), key=y[i * V:(i + 1) * V].__getitem__) for i in range(n))
    out["logits_rel_err"] = math.sqrt(num / den)
    out["logits_argmax_agree"] = f"{agree}/{n}"

    # greedy
    json.dump(ref["prompts"], open(p("p.json"), "w"))
    n_gen = len(ref["greedy"][0])
    run([lr, "generate", "-m", model, "--in", p("p.json"), "-n", str(n_gen), "--out", p("g.json"),
         "-t", str(a.threads)])
    g = json.load(open(p("g.json")))
    greedy = []
    for lt, tt, m in zip(g["tokens"], ref["greedy"], g["margins"]):
        k = next((i for i, (u, v) in enumerate(zip(lt, tt)) if u != v), len(lt))
        greedy.append(dict(common_prefix=k, of=len(lt), margin_at_split=m[k] if k < len(lt) else None))
    out["greedy_vs_torch"] = greedy
    out["llama_greedy_tokens"] = g["tokens"]

    # perplexity
    r = json.loads(run([lr, "perplexity", "-m", model, "-f", os.path.join(a.run, "heldout.txt"),
                        "-c", str(a.ppl_ctx), "-t", str(a.threads)]))
    out["llama_ppl"] = dict(ppl=r["ppl"], n_ctx=r["n_ctx"], n_scored=r["n_scored"])
    for k, v in metrics.items():
        if k.startswith(f"heldout_txt_ppl_c{a.ppl_ctx}_"):
            out["train_side_" + k] = v["ppl"]
            out["rel_diff_vs_" + k] = r["ppl"] / v["ppl"] - 1
    json.dump(out, open(os.path.join(a.run, "llama_cpp_check.json"), "w"), indent=1)
    print(json.dumps({k: v for k, v in out.items() if k != "llama_greedy_tokens"}, indent=1))


if __name__ == "__main__":
    main()
