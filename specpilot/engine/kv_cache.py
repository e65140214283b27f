"""Device-side KV storage: the request-to-token table and the per-layer K/V buffers.

SGLang's two-level scheme: `req_to_token[row, pos]` holds the KV slot of position `pos` of the
request living in `row`; `k[layer][slot]`, `v[layer][slot]` hold the cached vectors. Slot 0 is a
reserved scratch slot (padding writes land there); allocation and freeing of rows and slots is the
scheduler's bookkeeping (scheduler/kv_alloc.py), so rollback is by length: a request's KV is
exactly the slots of its first `len` positions.
On CUDA, `store` writes K and V in one Triton launch (kernels/kv_store.py, a bit-exact copy; same
switch as the norms: layers.norm.USE_TRITON); elsewhere torch indexing.
"""

import torch

from specpilot.layers.norm import triton_kernels


class KVCache:
    def __init__(self, num_layers: int, num_slots: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device):
        # NOTE: torch.empty does not touch pages, so an unused pool costs no resident memory on CPU.
        shape = (num_slots, num_kv_heads, head_dim)
        self.k = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.num_slots = num_slots

    @staticmethod
    def bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
        return 2 * num_layers * num_kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()

    def store(self, layer_id: int, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """loc [T] int64 slots; k, v [T, Hkv, D]: k[t], v[t] go to slot loc[t], cast to the
        cache's dtype."""
        kernels = triton_kernels(k, "kv_store")
        if kernels is not None:  # cast first, as indexing would
            dt = self.k[layer_id].dtype
            kernels.store_kv(self.k[layer_id], self.v[layer_id], loc, k.to(dt), v.to(dt))
            return
        self.k[layer_id][loc] = k
        self.v[layer_id][loc] = v


class ReqToTokenTable:
    def __init__(self, num_rows: int, max_context: int, device: torch.device):
        self.table = torch.zeros((num_rows, max_context), dtype=torch.int64, device=device)

    def write(self, rows: torch.Tensor, positions: torch.Tensor, loc: torch.Tensor) -> None:
        """rows, positions, loc [T]: table[rows[t], positions[t]] = loc[t]."""
        self.table[rows, positions] = loc
