"""The differential machine of ``test_vllm_differential.py`` with the normative side driven through
Reference II's prefix cache (``kvexact.reference.prefix``: its own lookup with the 0x07 logits cap,
``admit`` and ``publish``) instead of the allocator's steps."""

from __future__ import annotations

from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize
from vllm_normative import BS, ROOMY, Normative, VllmVsNormative

from kvexact.reference import prefix
from kvexact.reference.keys import KeyInputs, hash_full_blocks  # noqa: E402
from kvexact.reference.namespaces import (  # noqa: E402
    CacheIsolationNamespace,
    NamespaceRegistry,
    create_namespace,
)

MANIFEST = "0" * 64


class PrefixCacheDriver(Normative):
    """Admissions through ``PrefixCache.lookup`` + ``prefix.admit``; full blocks through ``publish``."""

    def __init__(self, usable_blocks: int):
        super().__init__(usable_blocks)
        registry = create_namespace(NamespaceRegistry(), CacheIsolationNamespace("deploy", "t", "ns", 0, None, 0))
        self.cache = prefix.PrefixCache(self.alloc, registry, MANIFEST)
        self.policy = prefix.PrefixPolicy(block_tokens=BS)

    def _request(self, rid: str, tokens: tuple[int, ...]):
        return prefix.PrefixRequest(request_id=rid, inputs=KeyInputs(tuple(tokens)), tenant_id="t",
                                    namespace_id="ns", namespace_generation=0, manifest_sha256=MANIFEST)

    def _publish(self, rid: str, tokens: tuple[int, ...]) -> None:
        self.cache.publish(rid, KeyInputs(tokens), "ns", 0, self.policy)
        for i, h in enumerate(hash_full_blocks(KeyInputs(tokens), BS, self.policy.hash_fn)):
            self.content_of[h.hex()] = tokens[:(i + 1) * BS]

    def lookup(self, tokens: tuple[int, ...]) -> list[str]:
        return list(self.cache.lookup(self._request("probe", tokens), self.policy).matched_keys)

    def admit(self, rid: str, tokens: tuple[int, ...]) -> int | None:
        receipt = self.cache.lookup(self._request(rid, tokens), self.policy)

        def run() -> None:
            prefix.admit(self.cache, receipt, tokens, self.policy)
            self._publish(rid, tuple(tokens))

        return receipt.runtime_hit_tokens if self._run(run) else None

    def append(self, rid: str, tokens: tuple[int, ...], all_tokens: tuple[int, ...]) -> bool:
        def run() -> None:
            for t in tokens:
                self.alloc.append(rid, t)
            self._publish(rid, all_tokens)

        return self._run(run)


class VllmVsPrefixCache(VllmVsNormative):
    normative_driver = PrefixCacheDriver


class VllmVsPrefixCacheRoomy(VllmVsPrefixCache):
    """Pools that never evict: here the prefix cache's own lookup must agree with vLLM's at every step."""

    @initialize(num_blocks=st.just(ROOMY))
    def setup(self, num_blocks):
        super().setup(num_blocks)


TestVllmVsPrefixCacheRoomy = VllmVsPrefixCacheRoomy.TestCase
_active = settings()
TestVllmVsPrefixCacheRoomy.settings = settings(_active, max_examples=max(_active.max_examples, 60))


TestVllmVsPrefixCache = VllmVsPrefixCache.TestCase
# No shrinking in CI: a failure is reported at once (a shrink of this machine takes minutes).
TestVllmVsPrefixCache.settings = settings(_active, max_examples=max(_active.max_examples, 100),
                                          phases=[Phase.explicit, Phase.reuse, Phase.generate])


def test_vllm_prefix_cache_republishes_recomputed_content():
    """4 blocks (block 0 null), P=4: a 12-token prompt cached, freed, admitted again (its third block is
    recomputed into the block the admission popped), freed: vLLM serves 12 tokens of a 13-token
    extension; the normative prefix cache must too."""
    from kvexact.reference.lifecycle import release
    from kvexact.reference.peers.vllm_adapter import VllmAdapter

    prompt = (1, 1, 1, 1, 2, 2, 2, 2, 0, 1, 2, 3)
    normative, vllm = PrefixCacheDriver(3), VllmAdapter(4, BS)
    for rid in ("r1", "r2"):
        assert normative.admit(rid, prompt) == vllm.allocate(rid, prompt).num_hit_tokens
        release(normative.alloc, rid)
        vllm.free(rid)
    assert vllm.lookup(prompt + (7,)) == 12
    assert len(normative.lookup(prompt + (7,))) * BS == 12
