"""Gated delta rule (Qwen3.5 linear attention), in PyTorch: a chunked form for training and a
plain recurrent loop as its reference.

Per head, with state S (Dk x Dv), decay a_t = exp(g_t), strength beta_t, q scaled by 1/sqrt(Dk):
    S_t = a_t S_{t-1} + k_t u_t^T,   u_t = beta_t (v_t - a_t S_{t-1}^T k_t),   o_t = S_t^T q_t
which is what llama.cpp computes (delta-net-base.cpp, autoregressive and chunked paths).

Chunked form (chunk of C tokens, G = cumulative sum of g inside the chunk, Gam = exp(G)):
    (I + A) U = beta V - diag(beta Gam) K S_0,  A_tj = beta_t exp(G_t - G_j) k_t.k_j  (j < t)
    O   = (Q * Gam) S_0 + [(Q K^T) * exp(G_t - G_j)]_{j <= t} U
    S_C = Gam_C S_0 + (K * exp(G_C - G))^T U
Exponents are only taken of G_t - G_j with j <= t (masked before exp), so nothing overflows.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def recurrent_gated_delta_rule(q, k, v, g, beta):
    """q, k: [B, T, H, Dk] (already l2-normalised); v: [B, T, H, Dv]; g, beta: [B, T, H].
    Returns o: [B, T, H, Dv]. Reference: one token at a time."""
    B, T, H, Dk = q.shape
    Dv = v.shape[-1]
    q = q * Dk ** -0.5
    S = q.new_zeros(B, H, Dk, Dv)
    outs = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None]
        kt = k[:, t]                                               # [B, H, Dk]
        u = beta[:, t, :, None] * (v[:, t] - (S * kt[..., None]).sum(-2))   # [B, H, Dv]
        S = S + kt[..., None] * u[..., None, :]
        outs.append((S * q[:, t][..., None]).sum(-2))              # [B, H, Dv]
    return torch.stack(outs, 1)


def chunk_gated_delta_rule(q, k, v, g, beta, chunk: int = 64):
    """Same contract as recurrent_gated_delta_rule; computed in float32 (or the input's
    dtype if wider), chunk by chunk."""
    B, T, H, Dk = q.shape
    Dv = v.shape[-1]
    dt = torch.float64 if q.dtype == torch.float64 else torch.float32
    q = (q.to(dt) * Dk ** -0.5).transpose(1, 2)                      # [B, H, T, Dk]
    k = k.to(dt).transpose(1, 2)
    v = v.to(dt).transpose(1, 2)
    g = g.to(dt).transpose(1, 2)                                     # [B, H, T]
    beta = beta.to(dt).transpose(1, 2)
    pad = (-T) % chunk
    if pad:
        q = F.pad(q, (0, 0, 0, pad))
        k = F.pad(k, (0, 0, 0, pad))
        v = F.pad(v, (0, 0, 0, pad))
        g = F.pad(g, (0, pad))
        beta = F.pad(beta, (0, pad))
    N = (T + pad) // chunk
    C = chunk
    q = q.reshape(B, H, N, C, Dk)
    k = k.reshape(B, H, N, C, Dk)
    v = v.reshape(B, H, N, C, Dv)
    g = g.reshape(B, H, N, C)
    beta = beta.reshape(B, H, N, C)

    G = g.cumsum(-1)                                                  # [B, H, N, C]
    incl = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)
    diff = G[..., :, None] - G[..., None, :]                          # [.., t, j] = G_t - G_j
    decay = diff.masked_fill(~incl, float("-inf")).exp()              # 0 above the diagonal

    kk = k @ k.transpose(-1, -2)                                      # [.., C, C]
    A = (beta[..., :, None] * kk * decay).masked_fill(~strict, 0.0)
    eye = torch.eye(C, dtype=dt, device=q.device)
    gam = G.exp()
    rhs = torch.cat([beta[..., None] * v, (beta * gam)[..., None] * k], -1)   # [.., C, Dv + Dk]
    sol = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
    W, Kc = sol.split([Dv, Dk], -1)                                   # U = W - Kc S_0

    qk = (q @ k.transpose(-1, -2)) * decay                            # lower incl. diagonal
    qg = q * gam[..., None]
    kdec = k * (G[..., -1:] - G).exp()[..., None]                     # [.., C, Dk]
    glast = G[..., -1].exp()                                          # [B, H, N]

    S = q.new_zeros(B, H, Dk, Dv)
    outs = []
    for n in range(N):
        U = W[:, :, n] - Kc[:, :, n] @ S                              # [B, H, C, Dv]
        outs.append(qg[:, :, n] @ S + qk[:, :, n] @ U)
        S = S * glast[:, :, n, None, None] + kdec[:, :, n].transpose(-1, -2) @ U
    o = torch.stack(outs, 2).reshape(B, H, N * C, Dv)[:, :, :T]
    return o.transpose(1, 2)                                          # [B, T, H, Dv]
