"""CPU-only checks of the torch-free parts (no numpy, no torch needed):

  python3 tools/train/test_cpu.py [--llama-ref build/llama_ref]

1. Q8_0: the pure-Python quantiser against hand-worked cases (ties, zero block, sign).
2. GGUF writer/reader round trip.
3. A random tiny qwen35 model with the full tensor layout, written as GGUF (F32 and Q8_0);
   with --llama-ref, llama.cpp must load it and generate.
4. Corpus selection on this machine's site-packages is deterministic and split by file.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import corpus  # noqa: E402
from gguf_writer import (GGML_F32, GGML_Q8_0, GGUFFile, GGUFWriter, T_INT32, T_STRING,  # noqa: E402
                         dequantize_q8_0, quantize_q8_0_py)
from layout import Config, Vocab, tensor_layout, write_gguf  # noqa: E402


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (the byte-level BPE alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok: {what}")


def test_q8_0() -> None:
    # Block 1: amax 127 -> d = 1, id = 1; 0.5 -> 1 and -0.5 -> -1 (half away from zero), 2.5 -> 3.
    blk = [127.0, 0.5, -0.5, 2.5, -2.5, 1.49, -126.6] + [0.0] * 25
    q = quantize_q8_0_py(blk)
    d = struct.unpack_from("<e", q, 0)[0]
    qs = struct.unpack_from("<32b", q, 2)
    check(d == 1.0 and qs[:7] == (127, 1, -1, 3, -3, 1, -127), "q8_0 rounding half away from zero")
    # Zero block: d = 0, all q = 0.
    z = quantize_q8_0_py([0.0] * 32)
    check(z == b"\0" * 34, "q8_0 zero block")
    # Random data: |x - d*q| <= d/2 (+ fp16 rounding of d) and the sign survives.
    rng = random.Random(1)
    vals = [rng.gauss(0, 0.05) for _ in range(32 * 64)]
    deq = dequantize_q8_0(quantize_q8_0_py(vals))
    worst = max(abs(a - b) / (max(abs(x) for x in vals[i // 32 * 32:i // 32 * 32 + 32]) / 127)
                for i, (a, b) in enumerate(zip(vals, deq)))
    check(worst < 0.52, f"q8_0 error within half a step (worst {worst:.3f} steps)")


def test_roundtrip(tmp: str) -> None:
    w = GGUFWriter()
    w.add_string("general.architecture", "test")
    w.add_uint32("a.u", 7)
    w.add_float32("a.f", 0.25)
    w.add_bool("a.b", True)
    w.add_array("a.i", T_INT32, [1, -2, 3])
    w.add_array("a.s", T_STRING, ["x", "ÿ z"])
    w.add_tensor("t.f32", [3, 2], [1, 2, 3, 4, 5, 6], GGML_F32)
    w.add_tensor("t.q8", [2, 32], [i / 10 for i in range(64)], GGML_Q8_0)
    p = os.path.join(tmp, "rt.gguf")
    w.write(p)
    f = GGUFFile(p)
    check(f.kv["a.u"] == 7 and f.kv["a.f"] == 0.25 and f.kv["a.b"] is True, "gguf scalar kv round trip")
    check(f.kv["a.i"] == [1, -2, 3] and f.kv["a.s"] == ["x", "ÿ z"], "gguf array kv round trip")
    check(f.tensors["t.f32"][0] == [2, 3] and f.tensor_values("t.f32") == [1, 2, 3, 4, 5, 6],
          "gguf f32 tensor round trip (ne reversed)")
    deq = f.tensor_values("t.q8")
    check(max(abs(a - i / 10) for i, a in enumerate(deq)) < 0.03, "gguf q8_0 tensor round trip")
    check(os.path.getsize(p) % 32 == 0, "gguf data padded to the alignment")


def tiny_model(tmp: str, quant: str) -> tuple[str, Vocab]:
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    merges = []
    # a few merges so the BPE path is exercised: "de", "def", "  " (two spaces)
    for left, right in (("d", "e"), ("de", "f"), ("Ġ", "Ġ")):
        merges.append(f"{left} {right}")
        tokens.append(left + right)
    specials = {}
    for s in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"):
        specials[s] = len(tokens)
        tokens.append(s)
    vocab = Vocab(tokens=tokens, merges=merges, specials=specials)
    c = Config(vocab=len(tokens), n_embd=64, n_layer=4, n_head=2, n_head_kv=1, head_dim=32, n_rot=16,
               n_ff=96, ssm_heads=2, ssm_state=32, n_ctx=256)
    rng = random.Random(0)
    tensors = {}
    for name, shape in tensor_layout(c):
        n = 1
        for d in shape:
            n *= d
        if name.endswith("norm.weight"):
            vals = [1.0 + rng.uniform(-0.1, 0.1) for _ in range(n)]
        elif name.endswith("ssm_a"):
            vals = [-rng.uniform(1, 16) for _ in range(n)]
        elif name.endswith("ssm_dt.bias"):
            vals = [1.0] * n
        else:
            vals = [rng.gauss(0, 0.2) for _ in range(n)]
        tensors[name] = (shape, vals)
    p = os.path.join(tmp, f"tiny-{quant}.gguf")
    write_gguf(p, c, vocab, tensors, quant=quant)
    f = GGUFFile(p)
    check(f.kv["qwen35.block_count"] == 5 and f.kv["qwen35.nextn_predict_layers"] == 1,
          f"tiny {quant}: block_count = trunk + 1 MTP block")
    check(f.kv["qwen35.rope.dimension_sections"] == [3, 3, 2, 0], f"tiny {quant}: rope sections cover 8 pairs")
    types = {n: t[1] for n, t in f.tensors.items()}
    check(types["blk.0.ssm_conv1d.weight"] == GGML_F32 and types["blk.0.ssm_a"] == GGML_F32,
          f"tiny {quant}: conv kernel and 1-D tensors are F32")
    if quant == "q8_0":
        check(types["blk.0.attn_qkv.weight"] == GGML_Q8_0 and types["token_embd.weight"] == GGML_Q8_0,
              "tiny q8_0: matrices are Q8_0")
    return p, vocab


def test_llama(llama_ref: str, model: str, tmp: str) -> None:
    prompts = [[256, 257, 3, 4], [10, 20, 30]]
    inp = os.path.join(tmp, "p.json")
    out = os.path.join(tmp, "g.json")
    with open(inp, "w") as f:
        json.dump(prompts, f)
    r = subprocess.run([llama_ref, "generate", "-m", model, "--in", inp, "-n", "8", "--out", out],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"llama.cpp loads and generates from {os.path.basename(model)}: {r.stderr.strip()[-400:]}")
    with open(out) as f:
        g = json.load(f)
    check(len(g["tokens"]) == 2 and all(len(t) == 8 for t in g["tokens"]), "llama.cpp generated 8 tokens per prompt")
    tin = os.path.join(tmp, "t.json")
    tout = os.path.join(tmp, "t_out.json")
    with open(tin, "w") as f:
        json.dump(["def f(x):\n    return x".encode().hex()], f)
    r = subprocess.run([llama_ref, "tokenize", "-m", model, "--in", tin, "--out", tout], capture_output=True, text=True)
    check(r.returncode == 0, "llama.cpp tokenizes with the gpt2/qwen2 vocab")
    with open(tout) as f:
        ids = json.load(f)[0]
    check(ids[0] == 257, f"merges applied ('def' is one token): {ids[:6]}")


def test_corpus() -> None:
    roots = corpus.default_roots()
    a = corpus.select(roots, max_bytes=3_000_000, heldout_percent=5)
    b = corpus.select(roots, max_bytes=3_000_000, heldout_percent=5)
    check([x.rel for x in a.train] == [x.rel for x in b.train] and [x.rel for x in a.heldout] == [x.rel for x in b.heldout],
          f"corpus selection deterministic ({len(a.train)} train, {len(a.heldout)} held-out files)")
    tr = {x.sha for x in a.train}
    check(all(x.sha not in tr for x in a.heldout), "held-out files disjoint from training files")
    check(sum(len(x.text) for x in a.train) <= 3_000_000, "training bytes capped")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-ref", default="")
    ap.add_argument("--keep", default="", help="directory to keep the tiny GGUFs in")
    args = ap.parse_args()
    test_q8_0()
    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or tmp
        os.makedirs(d, exist_ok=True)
        test_roundtrip(d)
        for quant in ("f32", "q8_0"):
            p, _ = tiny_model(d, quant)
            if args.llama_ref:
                test_llama(args.llama_ref, p, d)
    test_corpus()
    print("all CPU checks passed")


if __name__ == "__main__":
    main()
