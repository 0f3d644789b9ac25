"""The model's hyper-parameters and its GGUF layout (llama.cpp's qwen35 names, keys, shapes).

Torch-free, so the layout and the writer can be tested on a machine without PyTorch.
Every tensor is stored exactly as llama.cpp's qwen35 graph consumes it (src/models/qwen35.cpp);
the PyTorch model (model.py) holds its parameters in these very forms, so export is a dump:
  - RMS norm weights are plain multipliers (no "+1" offset);
  - blk.N.ssm_a holds A = -exp(A_log) (the model keeps A_log and exports -exp of it);
  - blk.N.attn_q rows are per head [query (head_dim), gate (head_dim)];
  - recurrent layers have k heads == v heads, so no V-head reordering question arises.
"""
from __future__ import annotations

import dataclasses
import json
import math

from gguf_writer import (GGML_F32, GGML_Q8_0, QK8_0, T_INT32, T_STRING, GGUFWriter)

ARCH = "qwen35"


@dataclasses.dataclass
class Config:
    vocab: int = 8192
    n_embd: int = 384
    n_layer: int = 8               # trunk layers (the MTP block comes after them)
    full_attn_interval: int = 4    # layer il is full attention iff (il + 1) % interval == 0
    n_head: int = 6                # full attention query heads
    n_head_kv: int = 2
    head_dim: int = 64
    n_rot: int = 32                # rotary dims per head (the rest pass through)
    rope_base: float = 10000.0
    n_ff: int = 1152
    ssm_heads: int = 6             # gated DeltaNet heads (k heads == v heads)
    ssm_state: int = 64            # DeltaNet head dim (k and v)
    conv_kernel: int = 4
    rms_eps: float = 1e-6
    n_ctx: int = 1024              # training context
    n_mtp: int = 1

    def is_recurrent(self, il: int) -> bool:
        return il < self.n_layer and (il + 1) % self.full_attn_interval != 0

    @property
    def rope_sections(self) -> list[int]:
        """Interleaved M-RoPE sections that give every rotary pair the text position.

        llama.cpp feeds text positions as (p, p, p, 0); with IMROPE, pair k uses section
        k % 3 (t, h, w) while k < 3 * sections[k % 3], else the 4th (zero) position. These
        sections cover all n_rot/2 pairs with t/h/w, so the rotation is plain NeoX RoPE.
        """
        p = self.n_rot // 2
        return [math.ceil(p / 3), math.ceil((p - 1) / 3), math.ceil((p - 2) / 3), 0]

    @property
    def key_dim(self) -> int:
        return self.ssm_heads * self.ssm_state

    @property
    def value_dim(self) -> int:
        return self.ssm_heads * self.ssm_state

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @staticmethod
    def from_dict(d: dict) -> "Config":
        return Config(**d)


def tensor_layout(c: Config) -> list[tuple[str, list[int]]]:
    """(GGUF name, PyTorch-order shape) for every tensor, in file order."""
    C, V, F = c.n_embd, c.vocab, c.n_ff
    t: list[tuple[str, list[int]]] = [("token_embd.weight", [V, C]), ("output_norm.weight", [C])]

    def attn(p: str) -> None:
        t.extend([
            (p + "attn_q.weight", [2 * c.n_head * c.head_dim, C]),
            (p + "attn_k.weight", [c.n_head_kv * c.head_dim, C]),
            (p + "attn_v.weight", [c.n_head_kv * c.head_dim, C]),
            (p + "attn_output.weight", [C, c.n_head * c.head_dim]),
            (p + "attn_q_norm.weight", [c.head_dim]),
            (p + "attn_k_norm.weight", [c.head_dim]),
        ])

    def ffn(p: str) -> None:
        t.extend([(p + "ffn_gate.weight", [F, C]), (p + "ffn_up.weight", [F, C]),
                  (p + "ffn_down.weight", [C, F])])

    for il in range(c.n_layer + c.n_mtp):
        p = f"blk.{il}."
        t.extend([(p + "attn_norm.weight", [C]), (p + "post_attention_norm.weight", [C])])
        if c.is_recurrent(il):
            t.extend([
                (p + "attn_qkv.weight", [c.conv_dim, C]),
                (p + "attn_gate.weight", [c.value_dim, C]),
                (p + "ssm_conv1d.weight", [c.conv_dim, c.conv_kernel]),
                (p + "ssm_dt.bias", [c.ssm_heads]),
                (p + "ssm_a", [c.ssm_heads]),
                (p + "ssm_beta.weight", [c.ssm_heads, C]),
                (p + "ssm_alpha.weight", [c.ssm_heads, C]),
                (p + "ssm_norm.weight", [c.ssm_state]),
                (p + "ssm_out.weight", [C, c.value_dim]),
            ])
        else:
            attn(p)
        ffn(p)
        if il >= c.n_layer:
            t.extend([
                (p + "nextn.eh_proj.weight", [C, 2 * C]),
                (p + "nextn.enorm.weight", [C]),
                (p + "nextn.hnorm.weight", [C]),
                (p + "nextn.shared_head_norm.weight", [C]),
            ])
    return t


def ggml_type_for(name: str, shape: list[int], quant: str) -> int:
    """Q8_0 for matrices whose rows split into 32-blocks; F32 for 1-D tensors and the conv kernel."""
    if quant == "f32" or len(shape) < 2 or shape[-1] % QK8_0:
        return GGML_F32
    return GGML_Q8_0


CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4


@dataclasses.dataclass
class Vocab:
    tokens: list[str]            # byte-level (GPT-2 alphabet) token strings, by id
    merges: list[str]            # "left right", by rank
    specials: dict[str, int]     # special token text -> id

    def token_types(self) -> list[int]:
        types = [TOKEN_NORMAL] * len(self.tokens)
        for text, tid in self.specials.items():
            types[tid] = TOKEN_USER_DEFINED if text in ("<think>", "</think>") else TOKEN_CONTROL
        return types


def write_gguf(path: str, c: Config, vocab: Vocab, tensors: dict, quant: str = "q8_0",
               name: str = "diskformer-default", extra: dict | None = None) -> int:
    """tensors: GGUF name -> (torch shape, flat float32 values). Returns the file size."""
    if len(vocab.tokens) != c.vocab:
        raise ValueError(f"vocab has {len(vocab.tokens)} tokens, config says {c.vocab}")
    w = GGUFWriter()
    a = ARCH
    w.add_string("general.architecture", a)
    w.add_string("general.name", name)
    w.add_uint32("general.file_type", 0 if quant == "f32" else 7)  # ALL_F32 / MOSTLY_Q8_0
    w.add_uint32("general.quantization_version", 2)
    for k, v in (extra or {}).items():
        w.add_string(k, v)
    w.add_uint32(f"{a}.context_length", c.n_ctx)
    w.add_uint32(f"{a}.embedding_length", c.n_embd)
    w.add_uint32(f"{a}.block_count", c.n_layer + c.n_mtp)
    w.add_uint32(f"{a}.nextn_predict_layers", c.n_mtp)
    w.add_uint32(f"{a}.feed_forward_length", c.n_ff)
    w.add_uint32(f"{a}.attention.head_count", c.n_head)
    w.add_uint32(f"{a}.attention.head_count_kv", c.n_head_kv)
    w.add_uint32(f"{a}.attention.key_length", c.head_dim)
    w.add_uint32(f"{a}.attention.value_length", c.head_dim)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", c.rms_eps)
    w.add_float32(f"{a}.rope.freq_base", c.rope_base)
    w.add_uint32(f"{a}.rope.dimension_count", c.n_rot)
    w.add_array(f"{a}.rope.dimension_sections", T_INT32, c.rope_sections)
    w.add_uint32(f"{a}.ssm.conv_kernel", c.conv_kernel)
    w.add_uint32(f"{a}.ssm.state_size", c.ssm_state)
    w.add_uint32(f"{a}.ssm.group_count", c.ssm_heads)
    w.add_uint32(f"{a}.ssm.time_step_rank", c.ssm_heads)
    w.add_uint32(f"{a}.ssm.inner_size", c.value_dim)
    w.add_uint32(f"{a}.full_attention_interval", c.full_attn_interval)

    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "qwen2")
    w.add_array("tokenizer.ggml.tokens", T_STRING, vocab.tokens)
    w.add_array("tokenizer.ggml.token_type", T_INT32, vocab.token_types())
    w.add_array("tokenizer.ggml.merges", T_STRING, vocab.merges)
    eot = vocab.specials["<|endoftext|>"]
    w.add_uint32("tokenizer.ggml.eos_token_id", eot)
    w.add_uint32("tokenizer.ggml.bos_token_id", eot)
    w.add_uint32("tokenizer.ggml.padding_token_id", eot)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_string("tokenizer.chat_template", CHATML_TEMPLATE)

    layout = tensor_layout(c)
    expected = {n for n, _ in layout}
    if set(tensors) != expected:
        missing = sorted(expected - set(tensors))
        extra_t = sorted(set(tensors) - expected)
        raise ValueError(f"tensor set differs from the qwen35 layout: missing {missing[:5]}, extra {extra_t[:5]}")
    for tname, shape in layout:
        tshape, values = tensors[tname]
        if list(tshape) != list(shape):
            raise ValueError(f"tensor '{tname}' has shape {list(tshape)}, layout says {shape}")
        w.add_tensor(tname, shape, values, ggml_type_for(tname, shape, quant))
    return w.write(path)
