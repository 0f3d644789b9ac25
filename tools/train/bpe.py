"""Byte-level BPE tokenizer (HuggingFace `tokenizers`), Qwen2 pre-tokenizer, GGUF vocab export.

The pre-tokenizer is Qwen2's regex (llama.cpp: tokenizer.ggml.pre = "qwen2") followed by the
GPT-2 byte-to-unicode mapping, no normaliser, so llama.cpp's "gpt2" BPE tokenizer with the
qwen2 pre-tokenizer splits and merges text exactly as this one does.
Special tokens come last: <|endoftext|>, <|im_start|>, <|im_end|> (control), <think>, </think>
(user-defined, as in Qwen3's vocabularies).
"""
from __future__ import annotations

import json

from layout import Vocab

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
USER_DEFINED = ["<think>", "</think>"]


def train_tokenizer(texts, vocab_size: int):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    n_special = len(CONTROL) + len(USER_DEFINED)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - n_special, min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() != vocab_size - n_special:
        raise RuntimeError(f"BPE training reached {tok.get_vocab_size()} tokens, wanted {vocab_size - n_special}")
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in CONTROL])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in USER_DEFINED])
    if tok.get_vocab_size() != vocab_size:
        raise RuntimeError(f"vocabulary has {tok.get_vocab_size()} tokens, wanted {vocab_size}")
    return tok


def gguf_vocab(tok) -> Vocab:
    v = tok.get_vocab(with_added_tokens=True)
    tokens = [None] * len(v)
    for text, i in v.items():
        tokens[i] = text
    if any(t is None for t in tokens):
        raise RuntimeError("token ids are not contiguous")
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in model["merges"]]
    specials = {s: v[s] for s in CONTROL + USER_DEFINED}
    return Vocab(tokens=tokens, merges=merges, specials=specials)


def encode_many(tok, texts, batch: int = 512):
    """Lists of ids, one per text (no special tokens added)."""
    enc = getattr(tok, "encode_batch_fast", tok.encode_batch)
    out = []
    for i in range(0, len(texts), batch):
        out.extend(e.ids for e in enc(texts[i:i + batch], add_special_tokens=False))
    return out
