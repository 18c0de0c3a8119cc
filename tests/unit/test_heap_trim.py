"""karpui.heap: the engine hands the C heap's free pages back between steps."""

import ctypes

from karpui import heap


def _resident_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


def test_trim_returns_the_free_pages_a_burst_of_large_allocations_left_in_the_heap():
    # 512 blocks of 64 KiB (from the heap, not mmap'd: under malloc's 128 KiB threshold), every other one kept: the
    # freed half, 16 MiB, are holes between live blocks, which free() alone leaves resident.
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    blocks = []
    for _ in range(512):
        block = libc.malloc(65536)
        libc.memset(block, 1, 65536)
        blocks.append(block)
    for block in blocks[::2]:
        libc.free(block)
    before = _resident_kib()
    assert heap.trim() is True
    released = before - _resident_kib()
    for block in blocks[1::2]:
        libc.free(block)
    # Each hole's pages but the partial ones at its ends: at least 15 of 16 per hole.
    assert released >= 256 * 60
