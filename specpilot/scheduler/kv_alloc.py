"""Host-side bookkeeping of the engine's KV slots and request-table rows (pure Python).

Slot 0 is the engine's scratch slot and is never handed out. Freeing is by value: a request
returns exactly the slots it holds beyond a length (rollback by length), or all of them.
"""


class FreeList:
    def __init__(self, ids: range):
        self._free = list(reversed(ids))  # pop() hands out the lowest ids first
        self.capacity = len(self._free)

    @property
    def available(self) -> int:
        return len(self._free)

    def alloc(self, n: int) -> list[int] | None:
        """n ids, or None (and nothing taken) if fewer than n are free."""
        if n > len(self._free):
            return None
        if n == 0:
            return []
        out = self._free[-n:]
        del self._free[-n:]
        out.reverse()
        return out

    def free(self, ids: list[int]) -> None:
        self._free.extend(ids)
        assert len(self._free) <= self.capacity, "double free"


class KVAllocator:
    """Slots 1..num_slots for tokens, rows 0..num_rows-1 of the request-to-token table."""

    def __init__(self, num_slots: int, num_rows: int):
        self.slots = FreeList(range(1, num_slots + 1))
        self.rows = FreeList(range(num_rows))

    @property
    def used_tokens(self) -> int:
        return self.slots.capacity - self.slots.available
