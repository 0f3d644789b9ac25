#!/usr/bin/env python3
"""Train diskformer's default model and export it as GGUF. One command, on a GPU machine:

    python3 tools/train/train.py --out DIR

Steps: corpus (this machine's site-packages, corpus.py) -> BPE tokenizer (bpe.py) -> qwen35
hybrid + one MTP block (model.py), trained jointly for a fixed time budget -> evaluation
(held-out perplexity, MTP top-1) -> GGUF (Q8_0 matrices, F32 vectors; layout.py).
DIR receives default.gguf, heldout.txt, heldout.SOURCES, train_log.csv, metrics.json,
tokenizer.json, samples.txt and ref.json/ref_logits.bin (reference logits for llama.cpp checks).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bpe  # noqa: E402
import corpus  # noqa: E402
from gguf_writer import GGML_Q8_0, quantize_q8_0_np, quantize_q8_0_py  # noqa: E402
from layout import Config, ggml_type_for, write_gguf  # noqa: E402
from model import Qwen35  # noqa: E402
from deltanet import chunk_gated_delta_rule, recurrent_gated_delta_rule  # noqa: E402

PROMPTS = [
    "def fibonacci(n):",
    "import os\n",
    "class LinkedList:\n",
    "def read_json(path):\n",
    'if __name__ == "__main__":\n',
]

PRESETS = {
    # the shipped model
    "full": dict(cfg=Config(), seq=1024, batch=32, lr=2e-3, max_bytes=300_000_000, tok_bytes=40_000_000,
                 deadline=545, reserve=70, heldout_bytes=150_000, eval_tokens=1_000_000),
    # a 1-minute end-to-end check of the whole pipeline
    "smoke": dict(cfg=Config(n_embd=128, n_layer=4, n_head=2, n_head_kv=1, n_ff=384, ssm_heads=2, n_ctx=256),
                  seq=256, batch=16, lr=3e-3, max_bytes=8_000_000, tok_bytes=4_000_000,
                  deadline=75, reserve=25, heldout_bytes=40_000, eval_tokens=100_000),
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- checks run on the device
def selftest(dev) -> dict:
    """Chunked vs recurrent delta rule (values and gradients), numpy vs Python Q8_0."""
    res = {}
    g = torch.Generator().manual_seed(0)
    B, T, H, D = 2, 150, 3, 16
    q = F.normalize(torch.randn(B, T, H, D, generator=g, dtype=torch.float64), dim=-1).to(dev)
    k = F.normalize(torch.randn(B, T, H, D, generator=g, dtype=torch.float64), dim=-1).to(dev)
    v = torch.randn(B, T, H, D, generator=g, dtype=torch.float64).to(dev)
    gg = (-torch.rand(B, T, H, generator=g, dtype=torch.float64) * 2).to(dev)
    beta = torch.rand(B, T, H, generator=g, dtype=torch.float64).to(dev)
    for t in (q, k, v, gg, beta):
        t.requires_grad_(True)
    o1 = recurrent_gated_delta_rule(q, k, v, gg, beta)
    w = torch.randn_like(o1)
    gr1 = torch.autograd.grad((o1 * w).sum(), (q, k, v, gg, beta))
    o2 = chunk_gated_delta_rule(q, k, v, gg, beta, chunk=64)
    gr2 = torch.autograd.grad((o2 * w).sum(), (q, k, v, gg, beta))
    res["deltanet_chunk_vs_recurrent_rel"] = float((o1 - o2).norm() / o1.norm())
    res["deltanet_grad_rel_max"] = max(float((a - b).norm() / a.norm()) for a, b in zip(gr1, gr2))
    o3 = chunk_gated_delta_rule(q.float(), k.float(), v.float(), gg.float(), beta.float())
    res["deltanet_chunk_f32_rel"] = float((o1 - o3.double()).norm() / o1.norm())
    # whole model: chunked vs recurrent in float64
    c = Config(vocab=300, n_embd=64, n_layer=4, n_head=2, n_head_kv=1, n_ff=96, ssm_heads=2, ssm_state=32,
               head_dim=32, n_rot=16)
    m = Qwen35(c).double().to(dev)
    idx = torch.randint(0, 300, (2, 100), generator=g).to(dev)
    with torch.no_grad():
        a = m.trunk(idx)
        b = m.trunk(idx, reference=True)
    res["model_chunk_vs_recurrent_rel"] = float((a - b).norm() / a.norm())
    # Q8_0 implementations agree bit for bit (incl. zeros, ties, tiny and large values)
    rs = np.random.RandomState(0)
    x = (rs.randn(32 * 2000) * rs.choice([1e-4, 0.02, 1.0, 300.0], 32 * 2000)).astype(np.float32)
    x[:32] = 0
    x[32:64] = np.arange(32, dtype=np.float32) - 15.5
    res["q8_0_numpy_equals_python"] = quantize_q8_0_np(x) == quantize_q8_0_py(x.tolist())
    return res


# ---------------------------------------------------------------- data
def build_data(args, p, out_dir):
    t0 = time.time()
    sel = corpus.select(corpus.default_roots(), max_bytes=p["max_bytes"], heldout_percent=2,
                        max_heldout_bytes=4_000_000)
    n_tr = sum(len(f.text) for f in sel.train)
    n_he = sum(len(f.text) for f in sel.heldout)
    log(f"corpus: roots {sel.roots}, {sel.n_candidates} candidate files ({sel.candidate_bytes / 1e6:.0f} MB); train {len(sel.train)} files "
        f"{n_tr / 1e6:.1f} MB, held-out {len(sel.heldout)} files {n_he / 1e6:.2f} MB ({time.time() - t0:.0f}s)")
    heldout_txt, sources = corpus.heldout_sample(sel, p["heldout_bytes"])
    with open(os.path.join(out_dir, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(heldout_txt)
    with open(os.path.join(out_dir, "heldout.SOURCES"), "w", encoding="utf-8") as f:
        f.write("# Held-out files (never trained on) joined by blank lines into heldout.txt.\n"
                "# package\tlicence\tpath in site-packages\tsha1 of text\n" + "\n".join(sources) + "\n")

    t1 = time.time()
    tok_texts, n = [], 0
    for f in sel.train:
        tok_texts.append(f.text)
        n += len(f.text)
        if n >= p["tok_bytes"]:
            break
    tok = bpe.train_tokenizer(tok_texts, p["cfg"].vocab)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    vocab = bpe.gguf_vocab(tok)
    eot = vocab.specials["<|endoftext|>"]
    log(f"tokenizer: {len(vocab.tokens)} tokens, {len(vocab.merges)} merges, trained on {n / 1e6:.1f} MB "
        f"({time.time() - t1:.0f}s)")

    t2 = time.time()

    def stream(files):
        ids = bpe.encode_many(tok, [f.text for f in files])
        total = sum(len(x) + 1 for x in ids)
        arr = np.empty(total, dtype=np.int32)
        pos = 0
        for x in ids:
            arr[pos:pos + len(x)] = x
            arr[pos + len(x)] = eot
            pos += len(x) + 1
        return arr

    train_ids = stream(sel.train)
    held_ids = stream(sel.heldout)
    heldout_txt_ids = np.array(tok.encode(heldout_txt, add_special_tokens=False).ids, dtype=np.int32)
    log(f"tokens: train {len(train_ids) / 1e6:.1f} M ({n_tr / len(train_ids):.2f} bytes/token), held-out "
        f"{len(held_ids) / 1e6:.2f} M, heldout.txt {len(heldout_txt_ids)} ({time.time() - t2:.0f}s)")
    info = dict(corpus_roots=sel.roots, corpus_candidates=sel.n_candidates, corpus_candidate_bytes=sel.candidate_bytes, train_files=len(sel.train),
                train_bytes=n_tr, heldout_files=len(sel.heldout), heldout_bytes=n_he,
                train_tokens=int(len(train_ids)), heldout_tokens=int(len(held_ids)),
                heldout_txt_bytes=len(heldout_txt.encode()), heldout_txt_tokens=int(len(heldout_txt_ids)),
                heldout_txt_files=len(sources), tokenizer_train_bytes=n)
    return tok, vocab, train_ids, held_ids, heldout_txt_ids, info


# ---------------------------------------------------------------- evaluation
@torch.no_grad()
def eval_split(model, ids: np.ndarray, seq: int, max_tokens: int, dev, batch: int = 16) -> dict:
    """Non-overlapping windows of seq+1 tokens; every position scored (trunk), MTP on T-1."""
    n_win = min(len(ids) // (seq + 1), max(1, max_tokens // seq))
    wins = torch.from_numpy(ids[:n_win * (seq + 1)].astype(np.int64)).view(n_win, seq + 1)
    nll = cnt = acc = 0.0
    mtp_nll = mtp_acc = mtp_cnt = agree = 0.0
    for i in range(0, n_win, batch):
        b = wins[i:i + batch].to(dev)
        lt, lm = model(b)
        tgt = b[:, 1:]
        nll += F.cross_entropy(lt.flatten(0, 1).float(), tgt.flatten(), reduction="sum").item()
        pt = lt.argmax(-1)
        acc += (pt == tgt).sum().item()
        cnt += tgt.numel()
        tm = b[:, 2:]
        mtp_nll += F.cross_entropy(lm.flatten(0, 1).float(), tm.flatten(), reduction="sum").item()
        pm = lm.argmax(-1)
        mtp_acc += (pm == tm).sum().item()
        agree += (pm == pt[:, 1:]).sum().item()   # draft == what greedy trunk says at t+1
        mtp_cnt += tm.numel()
    return dict(ppl=math.exp(nll / cnt), top1=acc / cnt, mtp_ppl=math.exp(mtp_nll / mtp_cnt),
                mtp_top1=mtp_acc / mtp_cnt, mtp_agrees_with_trunk_greedy=agree / mtp_cnt,
                scored_tokens=int(cnt), windows=int(n_win))


@torch.no_grad()
def llama_style_ppl(model, ids: np.ndarray, n_ctx: int, dev, batch: int = 16) -> dict:
    """llama.cpp's perplexity method: windows of n_ctx tokens (no BOS: the vocab adds none),
    score the predictions of the second half of each window."""
    n_chunk = len(ids) // n_ctx
    wins = torch.from_numpy(ids[:n_chunk * n_ctx].astype(np.int64)).view(n_chunk, n_ctx)
    first = n_ctx // 2
    nll = cnt = 0.0
    for i in range(0, n_chunk, batch):
        b = wins[i:i + batch].to(dev)
        lt = model.logits(model.trunk(b)).float()
        lp = torch.log_softmax(lt[:, first:n_ctx - 1], -1)
        tgt = b[:, first + 1:]
        nll -= lp.gather(-1, tgt[..., None]).sum().item()
        cnt += tgt.numel()
    return dict(ppl=math.exp(nll / cnt), n_ctx=n_ctx, n_chunks=n_chunk, scored=int(cnt), tokens=len(ids))


@torch.no_grad()
def greedy(model, ids: list, n: int, dev) -> list:
    ids = list(ids)
    for _ in range(n):
        hn = model.trunk(torch.tensor([ids], device=dev))
        lg = model.logits(hn[:, -1]).float()[0]
        ids.append(int(torch.nonzero(lg == lg.max())[0]))     # lowest id on ties, like llama_ref
    return ids


def q8_roundtrip(tensors: dict, quant: str) -> dict:
    """The weights exactly as llama.cpp will see them (Q8_0 matrices dequantised)."""
    out = {}
    for name, t in tensors.items():
        shape = list(t.shape)
        if ggml_type_for(name, shape, quant) == GGML_Q8_0:
            raw = np.frombuffer(quantize_q8_0_np(t.numpy().reshape(-1)),
                                dtype=[("d", "<f2"), ("qs", "i1", (32,))])
            deq = raw["d"].astype(np.float32)[:, None] * raw["qs"].astype(np.float32)
            out[name] = torch.from_numpy(deq.reshape(shape))
        else:
            out[name] = t
    return out


# ---------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="full")
    ap.add_argument("--deadline", type=float, help="seconds for the whole run (training gets what is left)")
    ap.add_argument("--quant", choices=["q8_0", "f32"], default="q8_0")
    ap.add_argument("--also-f32", action="store_true", help="also write default-f32.gguf")
    ap.add_argument("--mtp-weight", type=float, default=0.5, help="loss = CE(next) + w * CE(token after next)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--selftest", action="store_true", help="run the numerical self-checks first")
    ap.add_argument("--bench-full", type=int, default=0, help="time N training steps of the full preset")
    args = ap.parse_args()

    t_start = time.time()
    p = dict(PRESETS[args.preset])
    if args.deadline:
        p["deadline"] = args.deadline
    cfg: Config = p["cfg"]
    os.makedirs(args.out, exist_ok=True)
    assert torch.cuda.is_available(), "a CUDA GPU is needed"
    dev = torch.device("cuda")
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    metrics = dict(preset=args.preset, config=dataclasses.asdict(cfg), seq=p["seq"], batch=p["batch"], lr=p["lr"],
                   mtp_weight=args.mtp_weight, torch=torch.__version__, gpu=torch.cuda.get_device_name(0))
    log(f"torch {torch.__version__}, {metrics['gpu']}, preset {args.preset}")

    if args.selftest:
        metrics["selftest"] = selftest(dev)
        log(f"selftest: {metrics['selftest']}")

    if args.bench_full:
        fc = PRESETS["full"]["cfg"]
        m = Qwen35(fc).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=True)
        B, T = PRESETS["full"]["batch"], PRESETS["full"]["seq"]
        x = torch.randint(0, fc.vocab, (B, T + 1), device=dev)
        times = []
        for i in range(args.bench_full):
            torch.cuda.synchronize()
            t0 = time.time()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                lt, lm = m(x)
                loss = F.cross_entropy(lt.flatten(0, 1).float(), x[:, 1:].flatten()) + \
                    0.5 * F.cross_entropy(lm.flatten(0, 1).float(), x[:, 2:].flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.time() - t0)
        st = sorted(times[2:])[len(times[2:]) // 2]
        metrics["bench_full"] = dict(step_s_median=st, tokens_per_s=B * T / st,
                                     max_mem_gb=torch.cuda.max_memory_allocated() / 1e9,
                                     params=sum(q.numel() for q in m.parameters()))
        log(f"bench full: {metrics['bench_full']}")
        del m, opt

    t_start = time.time()   # the deadline counts from here (self-checks and benchmarks excluded)
    tok, vocab, train_ids, held_ids, htxt_ids, info = build_data(args, p, args.out)
    metrics["data"] = info

    # ---- model
    torch.manual_seed(args.seed)
    model = Qwen35(cfg).to(dev)
    n_params = sum(q.numel() for q in model.parameters())
    n_mtp = sum(q.numel() for q in model.mtp.parameters())
    metrics["params_total"] = n_params
    metrics["params_mtp"] = n_mtp
    log(f"model: {n_params / 1e6:.2f} M parameters ({n_mtp / 1e6:.2f} M in the MTP block), "
        f"{sum(not l.recurrent for l in model.layers)} full-attention of {cfg.n_layer} trunk layers")
    decay, no_decay = [], []
    for name, q in model.named_parameters():
        (decay if q.dim() == 2 and "ssm_conv1d" not in name else no_decay).append(q)
    opt = torch.optim.AdamW([dict(params=decay, weight_decay=0.1), dict(params=no_decay, weight_decay=0.0)],
                            lr=p["lr"], betas=(0.9, 0.95), eps=1e-8, fused=True)

    B, T = p["batch"], p["seq"]
    # TF32 for the float32 parts (delta rule) while training; evaluation turns it off again
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    train_gpu = torch.from_numpy(train_ids.astype(np.int64)).to(dev)
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    ar = torch.arange(T + 1, device=dev)
    val_ids = held_ids[: 8 * (T + 1)]
    warm = 100
    budget = max(20.0, p["deadline"] - (time.time() - t_start) - p["reserve"])
    log(f"training budget {budget:.0f}s")
    total_steps = None
    rows = []
    t_train = time.time()
    step = 0
    tokens_seen = 0
    while True:
        if total_steps is None and step == 20:
            torch.cuda.synchronize()
            per = (time.time() - t_fixed) / 15
            total_steps = 20 + int((budget - (time.time() - t_train)) / per)
            log(f"{per * 1000:.0f} ms/step -> {total_steps} steps, {total_steps * B * T / 1e6:.0f} M tokens")
        if step == 5:
            torch.cuda.synchronize()
            t_fixed = time.time()
        if total_steps is not None and step >= total_steps:
            break
        if step < warm:
            lr = p["lr"] * (step + 1) / warm
        else:
            frac = (step - warm) / max(1, (total_steps or 10 ** 9) - warm)
            lr = p["lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
        for gp in opt.param_groups:
            gp["lr"] = lr
        off = torch.randint(0, len(train_ids) - T - 1, (B,), generator=gen).to(dev)
        batch = train_gpu[off[:, None] + ar]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            lt, lm = model(batch)
        loss_t = F.cross_entropy(lt.flatten(0, 1).float(), batch[:, 1:].flatten())
        loss_m = F.cross_entropy(lm.flatten(0, 1).float(), batch[:, 2:].flatten())
        loss = loss_t + args.mtp_weight * loss_m
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tokens_seen += B * T
        last = total_steps is not None and step >= total_steps
        if step % 25 == 0 or step == 1 or last:
            row = dict(step=step, tokens=tokens_seen, seconds=round(time.time() - t_train, 2), lr=lr,
                       loss=loss_t.item(), mtp_loss=loss_m.item(), grad_norm=float(gnorm))
            if step % 250 == 0 or last:
                model.eval()
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    ev = eval_split(model, val_ids, T, 8 * T, dev, batch=8)
                model.train()
                row.update(val_loss=math.log(ev["ppl"]), val_mtp_top1=ev["mtp_top1"])
                log(f"step {step}: loss {row['loss']:.3f} mtp {row['mtp_loss']:.3f} val {row['val_loss']:.3f} "
                    f"mtp_top1 {ev['mtp_top1']:.3f} lr {lr:.2e} {row['seconds']:.0f}s")
            rows.append(row)
    train_seconds = time.time() - t_train
    metrics.update(train_seconds=round(train_seconds, 1), train_steps=step, train_tokens=tokens_seen,
                   epochs=tokens_seen / len(train_ids))
    log(f"trained {step} steps, {tokens_seen / 1e6:.0f} M tokens in {train_seconds:.0f}s")
    with open(os.path.join(args.out, "train_log.csv"), "w", newline="") as f:
        keys = ["step", "tokens", "seconds", "lr", "loss", "mtp_loss", "grad_norm", "val_loss", "val_mtp_top1"]
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)

    # ---- export first (so a run cut short still leaves the model)
    t_ex = time.time()
    tensors = model.gguf_tensors()
    flat = {k: (list(v.shape), v.numpy().reshape(-1)) for k, v in tensors.items()}
    extra = {"general.description": "diskformer's default model: qwen35 hybrid (gated DeltaNet + gated "
             "attention) with one MTP layer, trained on Python source by tools/train/train.py"}
    size = write_gguf(os.path.join(args.out, "default.gguf"), cfg, vocab, flat, quant=args.quant, extra=extra)
    if args.also_f32:
        write_gguf(os.path.join(args.out, "default-f32.gguf"), cfg, vocab, flat, quant="f32", extra=extra)
    metrics["gguf_bytes"] = size
    metrics["export_seconds"] = round(time.time() - t_ex, 1)
    log(f"wrote default.gguf ({size / 1e6:.1f} MB) in {metrics['export_seconds']}s")
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)

    # ---- evaluation in float32 (no autocast, no TF32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t_ev = time.time()
    model.eval()
    del train_gpu
    torch.cuda.empty_cache()
    metrics["heldout_split"] = eval_split(model, held_ids, T, p["eval_tokens"], dev)
    log(f"held-out split: {metrics['heldout_split']}")
    qmodel = Qwen35(cfg).to(dev).eval()
    qmodel.load_gguf_tensors(q8_roundtrip(tensors, args.quant))
    for c_ in sorted({512, T}):
        if len(htxt_ids) >= 2 * c_:
            metrics[f"heldout_txt_ppl_c{c_}_f32"] = llama_style_ppl(model, htxt_ids, c_, dev)
            metrics[f"heldout_txt_ppl_c{c_}_{args.quant}"] = llama_style_ppl(qmodel, htxt_ids, c_, dev)
    metrics["heldout_split_" + args.quant] = eval_split(qmodel, held_ids, T, p["eval_tokens"] // 4, dev)
    log("heldout.txt: " + ", ".join(f"{k} {v['ppl']:.4f}" for k, v in metrics.items() if k.startswith("heldout_txt")))

    # greedy samples and reference logits from the weights as exported
    ref = dict(prompts=[], greedy=[], n_vocab=cfg.vocab, heldout_txt_ids=htxt_ids.tolist())
    logit_rows, f32_rows = [], []
    samples = []
    for text in PROMPTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        outp = greedy(qmodel, ids, 48, dev)
        ref["prompts"].append(ids)
        ref["greedy"].append(outp[len(ids):])
        with torch.no_grad():
            lg = qmodel.logits(qmodel.trunk(torch.tensor([outp[:len(ids) + 16]], device=dev))).float()[0]
        logit_rows.append(lg.cpu().numpy())
        if args.also_f32:   # the same positions through the unquantised weights (default-f32.gguf)
            with torch.no_grad():
                lg32 = model.logits(model.trunk(torch.tensor([outp[:len(ids) + 16]], device=dev))).float()[0]
            f32_rows.append(lg32.cpu().numpy())
        ref.setdefault("logit_prompts", []).append(outp[:len(ids) + 16])
        samples.append(f"=== {text!r}\n{tok.decode(outp)}\n")
    np.concatenate(logit_rows).astype("<f4").tofile(os.path.join(args.out, "ref_logits.bin"))
    if f32_rows:
        np.concatenate(f32_rows).astype("<f4").tofile(os.path.join(args.out, "ref_logits_f32.bin"))
    with open(os.path.join(args.out, "ref.json"), "w") as f:
        json.dump(ref, f)
    with open(os.path.join(args.out, "samples.txt"), "w") as f:
        f.write("\n".join(samples))
    log("samples:\n" + "\n".join(samples[:2]))
    metrics["eval_seconds"] = round(time.time() - t_ev, 1)

    metrics["total_seconds"] = round(time.time() - t_start, 1)
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    log(f"total {metrics['total_seconds']:.0f}s")
    log("summary: " + json.dumps({k: metrics[k] for k in ("params_total", "train_seconds", "train_tokens")}) +
        f" heldout ppl {metrics['heldout_split']['ppl']:.3f} mtp_top1 {metrics['heldout_split']['mtp_top1']:.3f}")


if __name__ == "__main__":
    main()
