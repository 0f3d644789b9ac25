"""The qwen35 model in PyTorch, parameterised exactly as llama.cpp computes it from GGUF
(src/models/qwen35.cpp): every parameter is the GGUF tensor itself (see layout.py), except
ssm_a, kept as A_log and exported as -exp(A_log).

Trunk layer il (x: [B, T, C] residual stream):
    h   = x + mixer(rms(x) * attn_norm)             mixer = gated DeltaNet or gated attention
    out = h + ffn(rms(h) * post_attention_norm)     ffn = down(silu(gate(.)) * up(.))
Final: hn = rms(x) * output_norm; logits = hn @ token_embd^T (tied output).
MTP block (predicts x_{t+2} at position t), as graph_mtp:
    u = eh_proj(concat(rms(embed(x_{t+1})) * enorm, rms(hn_t) * hnorm))
    u = full-attention decoder block(u);  logits = (rms(u) * shared_head_norm) @ token_embd^T
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from deltanet import chunk_gated_delta_rule, recurrent_gated_delta_rule
from layout import Config


def wide(x: torch.Tensor) -> torch.Tensor:
    """float32, or float64 when the input already is (self-checks run the model in float64)."""
    return x if x.dtype == torch.float64 else x.float()


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """ggml_rms_norm: x / sqrt(mean(x^2) + eps), computed in float32 (or float64)."""
    xf = wide(x)
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms(x, self.eps) * self.weight


def rope_tables(c: Config, T: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin [T, n_rot/2]: theta_i = p * base^(-2i/n_rot) (NeoX pairs (i, i + n_rot/2))."""
    half = c.n_rot // 2
    inv = c.rope_base ** (-torch.arange(half, dtype=torch.float64, device=device) * 2.0 / c.n_rot)
    ang = torch.arange(T, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin, n_rot: int):
    """x: [B, T, H, D]; rotates the first n_rot dims in NeoX pairs, passes the rest."""
    half = n_rot // 2
    x1, x2, rest = x[..., :half], x[..., half:n_rot], x[..., n_rot:]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c, rest], -1)


class GatedAttention(nn.Module):
    """Full attention with a per-head output gate (attn_q rows: [q (D), gate (D)] per head)."""

    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        C, D = c.n_embd, c.head_dim
        self.attn_q = nn.Linear(C, 2 * c.n_head * D, bias=False)
        self.attn_k = nn.Linear(C, c.n_head_kv * D, bias=False)
        self.attn_v = nn.Linear(C, c.n_head_kv * D, bias=False)
        self.attn_output = nn.Linear(c.n_head * D, C, bias=False)
        self.attn_q_norm = RMSNorm(D, c.rms_eps)
        self.attn_k_norm = RMSNorm(D, c.rms_eps)

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        D = c.head_dim
        qg = self.attn_q(x).view(B, T, c.n_head, 2 * D)
        q, gate = qg[..., :D], qg[..., D:]
        q = self.attn_q_norm(q)
        k = self.attn_k_norm(self.attn_k(x).view(B, T, c.n_head_kv, D))
        v = self.attn_v(x).view(B, T, c.n_head_kv, D)
        q = apply_rope(q, cos, sin, c.n_rot)
        k = apply_rope(k, cos, sin, c.n_rot)
        rep = c.n_head // c.n_head_kv          # query head h uses kv head h // rep (ggml broadcast)
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        # bf16 under autocast (training), float32 otherwise (evaluation, reference logits)
        dt = torch.bfloat16 if torch.is_autocast_enabled(x.device.type) else wide(v).dtype
        o = F.scaled_dot_product_attention(q.transpose(1, 2).to(dt), k.transpose(1, 2).to(dt),
                                           v.transpose(1, 2).to(dt), is_causal=True, scale=1.0 / math.sqrt(D))
        o = o.transpose(1, 2).reshape(B, T, c.n_head * D)
        o = o * torch.sigmoid(gate.reshape(B, T, c.n_head * D))
        return self.attn_output(o)


class GatedDeltaNet(nn.Module):
    """Qwen3.5 linear attention: qkv projection, causal depthwise conv + SiLU, l2-normalised
    q/k, gated delta rule, per-head RMS norm gated by SiLU(z), output projection."""

    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        C, H = c.n_embd, c.ssm_heads
        self.attn_qkv = nn.Linear(C, c.conv_dim, bias=False)
        self.attn_gate = nn.Linear(C, c.value_dim, bias=False)
        self.ssm_beta = nn.Linear(C, H, bias=False)
        self.ssm_alpha = nn.Linear(C, H, bias=False)
        self.ssm_conv1d = nn.Parameter(torch.empty(c.conv_dim, c.conv_kernel))
        self.ssm_dt_bias = nn.Parameter(torch.ones(H))
        self.A_log = nn.Parameter(torch.empty(H))
        self.ssm_norm = nn.Parameter(torch.ones(c.ssm_state))
        self.ssm_out = nn.Linear(c.value_dim, C, bias=False)
        with torch.no_grad():
            nn.init.uniform_(self.ssm_conv1d, -1 / math.sqrt(c.conv_kernel), 1 / math.sqrt(c.conv_kernel))
            self.A_log.copy_(torch.empty(H).uniform_(1, 16).log())
            # Mamba-2 style time steps, log-uniform in [0.001, 0.1]: dt_bias = softplus^-1(dt),
            # so the initial decay exp(-A dt) keeps a memory of tens to hundreds of tokens.
            dt = torch.exp(torch.empty(H).uniform_(math.log(1e-3), math.log(1e-1)))
            self.ssm_dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def forward(self, x, recurrent: bool = False):
        c = self.c
        B, T, _ = x.shape
        H, D, K = c.ssm_heads, c.ssm_state, c.conv_kernel
        qkv = self.attn_qkv(x)                                        # [B, T, conv_dim]
        # ggml_ssm_conv: y[t] = sum_j w[j] * x[t - (K-1) + j]  (w[K-1] on the current token)
        w = self.ssm_conv1d.to(qkv.dtype)[:, None, :]
        qkv = F.conv1d(F.pad(qkv.transpose(1, 2), (K - 1, 0)), w, groups=c.conv_dim)
        qkv = F.silu(qkv).transpose(1, 2)
        q, k, v = qkv.split([c.key_dim, c.key_dim, c.value_dim], -1)
        q = F.normalize(wide(q).reshape(B, T, H, D), dim=-1, eps=c.rms_eps)   # ggml_l2_norm
        k = F.normalize(wide(k).reshape(B, T, H, D), dim=-1, eps=c.rms_eps)
        v = wide(v).reshape(B, T, H, D)
        beta = torch.sigmoid(wide(self.ssm_beta(x)))                 # [B, T, H]
        g = -wide(self.A_log).exp() * F.softplus(wide(self.ssm_alpha(x)) + wide(self.ssm_dt_bias))
        with torch.autocast(device_type=x.device.type, enabled=False):
            rule = recurrent_gated_delta_rule if recurrent else chunk_gated_delta_rule
            o = rule(q, k, v, g, beta)                                # [B, T, H, D] float32
        z = wide(self.attn_gate(x)).reshape(B, T, H, D)
        o = rms(o, c.rms_eps) * self.ssm_norm * F.silu(z)
        return self.ssm_out(o.reshape(B, T, c.value_dim))


class FFN(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.ffn_gate = nn.Linear(c.n_embd, c.n_ff, bias=False)
        self.ffn_up = nn.Linear(c.n_embd, c.n_ff, bias=False)
        self.ffn_down = nn.Linear(c.n_ff, c.n_embd, bias=False)

    def forward(self, x):
        return self.ffn_down(F.silu(self.ffn_gate(x)) * self.ffn_up(x))


class Block(nn.Module):
    def __init__(self, c: Config, recurrent: bool):
        super().__init__()
        self.recurrent = recurrent
        self.attn_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.post_attention_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.mixer = GatedDeltaNet(c) if recurrent else GatedAttention(c)
        self.ffn = FFN(c)

    def forward(self, x, cos, sin, reference: bool = False):
        a = self.attn_norm(x)
        a = self.mixer(a, recurrent=reference) if self.recurrent else self.mixer(a, cos, sin)
        h = x + a
        return h + self.ffn(self.post_attention_norm(h))


class MTP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.enorm = RMSNorm(c.n_embd, c.rms_eps)
        self.hnorm = RMSNorm(c.n_embd, c.rms_eps)
        self.eh_proj = nn.Linear(2 * c.n_embd, c.n_embd, bias=False)   # input: [enorm(e), hnorm(h)]
        self.block = Block(c, recurrent=False)
        self.shared_head_norm = RMSNorm(c.n_embd, c.rms_eps)


class Qwen35(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.token_embd = nn.Embedding(c.vocab, c.n_embd)
        self.layers = nn.ModuleList([Block(c, c.is_recurrent(i)) for i in range(c.n_layer)])
        self.output_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.mtp = MTP(c)
        self._init()

    def _init(self):
        std = 0.02
        proj_std = std / math.sqrt(2 * (self.c.n_layer + 1))
        for name, p in self.named_parameters():
            if p.dim() == 2 and not name.endswith("ssm_conv1d"):
                out_proj = name.endswith(("ssm_out.weight", "attn_output.weight", "ffn_down.weight"))
                nn.init.normal_(p, 0.0, proj_std if out_proj else std)

    # ---- forward pieces
    def trunk(self, idx, reference: bool = False):
        """idx [B, T] -> normalised final hidden state hn [B, T, C] (llama.cpp's h_nextn)."""
        T = idx.shape[1]
        cos, sin = rope_tables(self.c, T, idx.device)
        x = self.token_embd(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, reference)
        return self.output_norm(x)

    def logits(self, hn):
        """Tied output head: llama.cpp uses token_embd when output.weight is absent."""
        return F.linear(hn, self.token_embd.weight)

    def mtp_hidden(self, hn, next_idx):
        """hn [B, T, C] at positions t, next_idx [B, T] = x_{t+1} -> MTP hidden (normed)."""
        m = self.mtp
        T = next_idx.shape[1]
        cos, sin = rope_tables(self.c, T, next_idx.device)
        e = self.token_embd(next_idx)
        u = m.eh_proj(torch.cat([m.enorm(e), m.hnorm(hn)], -1))
        u = m.block(u, cos, sin)
        return m.shared_head_norm(u)

    def forward(self, batch):
        """batch [B, T+1] -> (trunk logits [B, T, V] for x_1..x_T,
                              MTP logits [B, T-1, V] for x_2..x_T)."""
        inp = batch[:, :-1]
        hn = self.trunk(inp)
        lt = self.logits(hn)
        hm = self.mtp_hidden(hn[:, :-1], inp[:, 1:])
        lm = self.logits(hm)
        return lt, lm

    # ---- export
    def gguf_tensors(self) -> dict:
        """GGUF name -> float32 CPU tensor, exactly as stored in the file."""
        c = self.c
        out = {"token_embd.weight": self.token_embd.weight, "output_norm.weight": self.output_norm.weight}

        def block(p: str, b: Block):
            out[p + "attn_norm.weight"] = b.attn_norm.weight
            out[p + "post_attention_norm.weight"] = b.post_attention_norm.weight
            m = b.mixer
            if b.recurrent:
                out[p + "attn_qkv.weight"] = m.attn_qkv.weight
                out[p + "attn_gate.weight"] = m.attn_gate.weight
                out[p + "ssm_conv1d.weight"] = m.ssm_conv1d
                out[p + "ssm_dt.bias"] = m.ssm_dt_bias
                out[p + "ssm_a"] = -m.A_log.float().exp()
                out[p + "ssm_beta.weight"] = m.ssm_beta.weight
                out[p + "ssm_alpha.weight"] = m.ssm_alpha.weight
                out[p + "ssm_norm.weight"] = m.ssm_norm
                out[p + "ssm_out.weight"] = m.ssm_out.weight
            else:
                out[p + "attn_q.weight"] = m.attn_q.weight
                out[p + "attn_k.weight"] = m.attn_k.weight
                out[p + "attn_v.weight"] = m.attn_v.weight
                out[p + "attn_output.weight"] = m.attn_output.weight
                out[p + "attn_q_norm.weight"] = m.attn_q_norm.weight
                out[p + "attn_k_norm.weight"] = m.attn_k_norm.weight
            out[p + "ffn_gate.weight"] = b.ffn.ffn_gate.weight
            out[p + "ffn_up.weight"] = b.ffn.ffn_up.weight
            out[p + "ffn_down.weight"] = b.ffn.ffn_down.weight

        for il, b in enumerate(self.layers):
            block(f"blk.{il}.", b)
        p = f"blk.{c.n_layer}."
        block(p, self.mtp.block)
        out[p + "nextn.eh_proj.weight"] = self.mtp.eh_proj.weight
        out[p + "nextn.enorm.weight"] = self.mtp.enorm.weight
        out[p + "nextn.hnorm.weight"] = self.mtp.hnorm.weight
        out[p + "nextn.shared_head_norm.weight"] = self.mtp.shared_head_norm.weight
        return {k: v.detach().float().cpu().contiguous() for k, v in out.items()}

    @torch.no_grad()
    def load_gguf_tensors(self, t: dict) -> None:
        """Inverse of gguf_tensors (used to evaluate the Q8_0-rounded weights)."""
        own = self.gguf_tensors()
        assert set(own) == set(t), "tensor sets differ"
        c = self.c

        def put(param, value):
            param.copy_(value.to(param.dtype).view_as(param))

        put(self.token_embd.weight, t["token_embd.weight"])
        put(self.output_norm.weight, t["output_norm.weight"])

        def block(p: str, b: Block):
            put(b.attn_norm.weight, t[p + "attn_norm.weight"])
            put(b.post_attention_norm.weight, t[p + "post_attention_norm.weight"])
            m = b.mixer
            if b.recurrent:
                put(m.attn_qkv.weight, t[p + "attn_qkv.weight"])
                put(m.attn_gate.weight, t[p + "attn_gate.weight"])
                put(m.ssm_conv1d, t[p + "ssm_conv1d.weight"])
                put(m.ssm_dt_bias, t[p + "ssm_dt.bias"])
                put(m.A_log, (-t[p + "ssm_a"].double()).log().float())
                put(m.ssm_beta.weight, t[p + "ssm_beta.weight"])
                put(m.ssm_alpha.weight, t[p + "ssm_alpha.weight"])
                put(m.ssm_norm, t[p + "ssm_norm.weight"])
                put(m.ssm_out.weight, t[p + "ssm_out.weight"])
            else:
                put(m.attn_q.weight, t[p + "attn_q.weight"])
                put(m.attn_k.weight, t[p + "attn_k.weight"])
                put(m.attn_v.weight, t[p + "attn_v.weight"])
                put(m.attn_output.weight, t[p + "attn_output.weight"])
                put(m.attn_q_norm.weight, t[p + "attn_q_norm.weight"])
                put(m.attn_k_norm.weight, t[p + "attn_k_norm.weight"])
            put(b.ffn.ffn_gate.weight, t[p + "ffn_gate.weight"])
            put(b.ffn.ffn_up.weight, t[p + "ffn_up.weight"])
            put(b.ffn.ffn_down.weight, t[p + "ffn_down.weight"])

        for il, b in enumerate(self.layers):
            block(f"blk.{il}.", b)
        p = f"blk.{c.n_layer}."
        block(p, self.mtp.block)
        put(self.mtp.eh_proj.weight, t[p + "nextn.eh_proj.weight"])
        put(self.mtp.enorm.weight, t[p + "nextn.enorm.weight"])
        put(self.mtp.hnorm.weight, t[p + "nextn.hnorm.weight"])
        put(self.mtp.shared_head_norm.weight, t[p + "nextn.shared_head_norm.weight"])
