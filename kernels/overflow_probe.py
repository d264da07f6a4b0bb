"""Probe for int64 addressing: decode over a pool of more than 2^31 elements, reading only its last block.

Run as ``python -m kvexact.kernels.overflow_probe {1|0}`` (1: loaded block ids cast to int64, the shipped
kernels; 0: the cast disabled). Prints ``OK`` and exits 0 when the output equals float64 attention over
the last block's rows; prints ``WRONG`` and exits 1 otherwise, and exits 3 when the pool cannot even be reserved. Without the cast the product
``block_id * block_stride`` wraps in int32, so the kernel reads the wrong address (wrong values or SIGSEGV).
The caches come from ``torch.empty``: virtual memory is committed lazily, only the touched block is resident.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import torch

    from kvexact.kernels import device as dev
    from kvexact.kernels import paged
    from kvexact.kernels import reference as ref

    paged._INT64_ADDRESSING = argv[:1] != ["0"]
    block_size, heads, dim = 16, 1, 16
    per_block = block_size * heads * dim
    num_blocks = 2**31 // per_block + 2  # 2^31 + 2 blocks' worth of elements: ids near the end overflow int32
    try:
        kc = dev.empty((num_blocks, block_size, heads, dim), torch.float16)
        vc = dev.empty((num_blocks, block_size, heads, dim), torch.float16)
    except RuntimeError as exc:  # no overcommit here: the probe cannot run, which is not a kernel failure
        print(f"CANNOT-RUN: {exc}"[:300], flush=True)
        return 3
    assert kc.numel() > 2**31
    last = num_blocks - 1
    gen = dev.generator(0)
    keys = dev.randn((block_size, heads, dim), gen, torch.float16)
    values = dev.randn((block_size, heads, dim), gen, torch.float16)
    slots = dev.arange(block_size) + last * block_size
    paged.reshape_and_cache(keys, values, kc, vc, slots)
    query = dev.randn((1, 2, dim), gen, torch.float16)
    out = paged.paged_decode_attention(query, kc, vc, dev.tensor([[last]], torch.int32),
                                       dev.tensor([block_size], torch.int32))
    want, _ = ref.attention_f64(query[0].cpu(), keys.cpu(), values.cpu())
    good = bool(torch.allclose(out[0].double().cpu(), want, atol=2e-3, rtol=2e-3))
    print("OK" if good else "WRONG", flush=True)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
