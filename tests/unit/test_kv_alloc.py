from specpilot.scheduler.kv_alloc import FreeList, KVAllocator


def test_alloc_free_roundtrip():
    a = KVAllocator(num_slots=10, num_rows=2)
    s = a.slots.alloc(4)
    assert s == [1, 2, 3, 4] and a.used_tokens == 4  # slot 0 is the scratch slot
    assert a.slots.alloc(7) is None and a.used_tokens == 4  # nothing taken on failure
    a.slots.free(s[2:])  # rollback by length
    assert a.used_tokens == 2
    a.slots.free(s[:2])
    assert a.used_tokens == 0 and a.slots.available == 10


def test_double_free_detected():
    f = FreeList(range(3))
    f.free(f.alloc(3))
    try:
        f.free([0])
    except AssertionError:
        return
    raise AssertionError("double free not detected")
