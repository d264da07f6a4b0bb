"""The vLLM profile behind the conformance adapter protocol, and the allocator machine driving it."""

from __future__ import annotations

from hypothesis import settings

from kvexact.reference.adapters import AdapterConfig, check_adapter
from kvexact.reference.peers.vllm_protocol import VllmProtocolAdapter, vllm_factory


def test_vllm_protocol_adapter_operations():
    a = vllm_factory(AdapterConfig(block_tokens=2, num_groups=2, blocks_per_group=4))
    check_adapter(a)
    assert not a.lockstep and a.block_ids(1) == [1, 2, 3, 4]
    assert a.start("r0", [1, 2, 3]).accepted and a.table("r0", 0) == a.table("r0", 1) == [1, 2]
    digest = a.digest()
    assert a.start("r0", [1]).rejection == "DUPLICATE_REQUEST" and a.digest() == digest
    assert a.start("r1", []).rejection == "EMPTY_APPEND"
    hit = a.start("r1", [1, 2, 3, 3])
    assert hit.accepted and hit.hit_tokens == 2 and a.table("r1", 0) == [1, 3]  # vLLM hits at once
    assert a.append("r0", 1).accepted and a.length("r0") == 4 and a.table("r0", 0) == [1, 2]
    assert a.append("r0", 1).accepted and a.table("r0", 0) == [1, 2, 4]  # the last free block
    assert a.append("r0", 1).accepted and a.length("r0") == 6
    digest = a.digest()
    refused = a.append("r0", 1)  # a seventh token needs a fifth block in each group
    assert refused.rejection == "INSUFFICIENT_BLOCKS" and a.length("r0") == 6 and a.digest() == digest
    assert a.cache("r0").accepted and a.cache("nobody").rejection == "UNKNOWN_REQUEST"
    assert a.release("r0").accepted and a.release("r0").rejection == "UNKNOWN_REQUEST"
    assert a.append("r0", 1).rejection == "UNKNOWN_REQUEST"
    a.self_check()


def test_vllm_protocol_machine_checks_attention():
    """Issue 9's allocator machine with the profile as the system under test: exact paged attention."""
    from kvexact.conformance.machines.allocator import AllocatorMachine

    class VllmUnderTest(AllocatorMachine):
        sut_factory = staticmethod(vllm_factory)
        validate_trace = False

    VllmUnderTest.stats = {}
    run = VllmUnderTest.TestCase
    run.settings = settings(settings(), max_examples=15, stateful_step_count=20)
    run().runTest()
    assert VllmUnderTest.stats.get("attention_checks", 0) > 0
    assert any(k.startswith("hit_tokens=") and k != "hit_tokens=0" for k in VllmUnderTest.stats)


def test_vllm_protocol_adapter_type():
    assert isinstance(vllm_factory(AdapterConfig()), VllmProtocolAdapter)
