"""Gated DeltaNet math, torch reference (CPU and GPU), one request at a time, fp32 state.

causal_conv(window [C, K-1], x [T, C], weight [C, K]) -> (silu(conv) [T, C], new window [C, K-1])
    depthwise causal conv over the request's previous K-1 inputs (the window) and its T new rows.
delta_rule(q, k [T, H, Dk], v [T, H, Dv], g, beta [T, H], state [H, Dk, Dv]) -> (o [T, H, Dv],
    state): per row t: S <- S * exp(g_t); S <- S + k_t (beta_t (v_t - k_t S)); o_t = q_t S.
    q and k arrive L2-normalised, q already scaled by Dk^-0.5, heads already expanded to H.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def causal_conv(window: torch.Tensor, x: torch.Tensor, weight: torch.Tensor):
    k = weight.shape[1]
    seq = torch.cat([window.to(x.dtype), x.transpose(0, 1)], dim=1)  # [C, K-1+T]
    y = F.conv1d(seq[None], weight[:, None, :], groups=weight.shape[0])[0]  # [C, T]
    return F.silu(y).transpose(0, 1), seq[:, seq.shape[1] - (k - 1):]


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def delta_rule(q, k, v, g, beta, state: torch.Tensor):
    out = torch.empty(v.shape, dtype=torch.float32, device=v.device)
    s = state.float()
    for t in range(k.shape[0]):
        s = s * g[t].exp()[:, None, None]
        kv_mem = (s * k[t][:, :, None]).sum(dim=1)  # [H, Dv]
        delta = (v[t] - kv_mem) * beta[t][:, None]
        s = s + k[t][:, :, None] * delta[:, None, :]
        out[t] = (s * q[t][:, :, None]).sum(dim=1)
    return out, s
