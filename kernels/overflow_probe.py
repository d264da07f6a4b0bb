"""Probe for int64 addressing in paged decode: a pool of more than 2^31 elements, read through a block
table whose second page is the pool's last block (its element offset ``block_id * block_stride`` is past
2^31 - 1).

Run as ``python -m kvexact.kernels.overflow_probe {1|0}``. The rows are written with the shipped kernels
(the write kernel's slots are int64 already); then the decode runs with its loaded block ids cast to int64
(1, the shipped kernels) or with that cast disabled (0), so the probe exercises the decode kernel's cast and
nothing else. Prints ``OK`` and exits 0 when the output equals float64 attention over the written rows;
prints ``WRONG`` and exits 1 otherwise, and exits 3 when the pool cannot even be reserved (on the CPU, where
anonymous memory cannot be overcommitted, the pool is a sparse file mapped shared instead). Without the cast
the product wraps in int32, so the kernel reads the wrong address (wrong values or SIGSEGV). The caches come
from ``torch.empty``: virtual memory is committed lazily, only the touched blocks are resident.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str]) -> int:
    import torch

    from kvexact.kernels import device as dev
    from kvexact.kernels import paged
    from kvexact.kernels import reference as ref

    block_size, heads, dim = 16, 1, 16
    per_block = block_size * heads * dim
    num_blocks = 2**31 // per_block + 2  # 2^31 + 2 blocks' worth of elements: ids near the end overflow int32
    shape = (num_blocks, block_size, heads, dim)
    try:
        kc, vc = dev.empty(shape, torch.float16), dev.empty(shape, torch.float16)
    except RuntimeError as exc:
        try:  # no overcommit for anonymous memory: sparse files, mapped shared, cost only the touched pages
            kc, vc = _sparse_file_pool(shape), _sparse_file_pool(shape)
        except (RuntimeError, OSError) as exc2:  # the probe cannot run, which is not a kernel failure
            print(f"CANNOT-RUN: {exc}; sparse file: {exc2}"[:300], flush=True)
            return 3
    last = num_blocks - 1
    assert kc.numel() > 2**31 and last * kc.stride(0) > 2**31 - 1
    n = block_size + 5  # page 0 is block 0, page 1 (five rows) the last block
    gen = dev.generator(0)
    keys = dev.randn((n, heads, dim), gen, torch.float16)
    values = dev.randn((n, heads, dim), gen, torch.float16)
    slots = [*range(block_size), *(last * block_size + o for o in range(n - block_size))]
    paged.reshape_and_cache(keys, values, kc, vc, dev.tensor(slots, torch.int64))
    query = dev.randn((1, 2, dim), gen, torch.float16)
    paged._INT64_ADDRESSING = argv[:1] != ["0"]  # the decode's loaded block ids, cast to int64 or not
    try:
        out = paged.paged_decode_attention(query, kc, vc, dev.tensor([[0, last]], torch.int32),
                                           dev.tensor([n], torch.int32))
    finally:
        paged._INT64_ADDRESSING = True
    want, _ = ref.attention_f64(query[0].cpu(), keys.cpu(), values.cpu())
    good = bool(torch.allclose(out[0].double().cpu(), want, atol=2e-3, rtol=2e-3))
    print("OK" if good else "WRONG", flush=True)
    return 0 if good else 1


def _sparse_file_pool(shape: tuple[int, ...]) -> Any:
    """A float16 CPU tensor of ``shape`` over a sparse temporary file mapped shared (unlinked at once);
    only on the CPU (the interpreter's device), where a GPU pool is real memory anyway."""
    import math
    import os
    import tempfile

    import torch

    from kvexact.kernels import device as dev

    if dev.device().type != "cpu":
        raise RuntimeError("a sparse-file pool is for the CPU only")
    n = math.prod(shape)
    fd, path = tempfile.mkstemp(prefix="kvexact-int64-")
    try:
        os.ftruncate(fd, 2 * n)
        flat = torch.from_file(path, shared=True, size=n, dtype=torch.float16)
    finally:
        os.close(fd)
        os.unlink(path)
    return flat.view(shape)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
