"""The live adapters over the real vLLM 0.33.0 and SGLang 0.5.23, run in the runtime environment."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kvexact.reference.peers.sglang import RadixCache
from kvexact.reference.peers.sglang_pool import PagedTokenToKVPoolAllocator
from kvexact.reference.peers.vllm import VllmConfig, VllmKVCacheManager
from kvexact.reference.peers.vllm_hashing import MMFeature, RequestExtras

ROOT = Path(__file__).resolve().parents[2]


def run_in(python: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, *args], cwd=ROOT, capture_output=True, text=True)


def _cli(python: str, *args: str):
    return run_in(python, "-m", "kvexact.cli", *args)


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_differential_finds_no_divergence(runtime_python, runtime):
    r = _cli(runtime_python, "diff", runtime, "--streams", "15", "--seed", "7")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert f"{runtime} " in r.stdout and "15 streams" in r.stdout and ", 0 divergent" in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("adapter, machine", [("vllm", "KVAllocation"), ("vllm", "CowPublication"),
                                              ("sglang", "Radix")])
def test_live_adapter_passes_the_gate_machine(runtime_python, adapter, machine):
    """With the kernels: the runtimes import Triton, so the adapters settle the interpreter mode first."""
    r = _cli(runtime_python, "conform", "--adapter", f"kvexact.conformance.live.{adapter}:factory", "--spec", machine,
             "--examples", "3", "--steps", "8")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert machine in r.stdout


REPLAY = r'''
import json, torch
from array import array
from kvexact.conformance.live import sglang as live_sglang  # stands in SGLang's GPU modules first
from kvexact.conformance.live import vllm as live_vllm
from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange
from vllm.sampling_params import SamplingParams
from vllm.v1.core.kv_cache_utils import generate_block_hash_extra_keys
from vllm.v1.request import Request
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

out = {}
# V1: block size 16, 40-token prompt, images A at [30,35) and B at [36,39), 8 decoded tokens
hasher = live_vllm.get_request_block_hasher(16, live_vllm.sha256)
live_vllm.init_none_hash(live_vllm.sha256)
mm = [MultiModalFeatureSpec(data=None, modality="image", identifier=name, mm_position=PlaceholderRange(offset=o, length=n))
      for name, o, n in (("imgA", 30, 5), ("imgB", 36, 3))]
req = Request("r", list(range(40)), SamplingParams(max_tokens=8), None, mm_features=mm, block_hasher=hasher)
req.append_output_token_ids(list(range(100, 108)))
out["v1_block2"] = generate_block_hash_extra_keys(req, 32, 48, 0)[0]
out["v1_hashes"] = [h.hex() for h in req.block_hashes]
# S1: page size 4, insert 4 tokens on slots 4-7, evict 3
alloc = PagedTokenToKVPoolAllocator(32, 4, torch.int64, "cpu", None, False)
cache = RadixCache(CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=alloc, page_size=4))
slots = alloc.alloc(4)
cache.insert(InsertParams(key=RadixKey(array("q", [11, 12, 13, 14])), value=slots))
cache.evict(EvictParams(num_tokens=3))
out["s1_free"] = alloc.free_pages.tolist()
# S2: cache disabled
off = RadixCache(CacheInitParams(disable=True, req_to_token_pool=None, token_to_kv_pool_allocator=None, page_size=1))
out["s2_last_node"] = repr(off.insert(InsertParams(key=RadixKey(array("q", [1, 2, 3])))).last_device_node)
# S3: unlock after eviction, then evict
token_alloc = TokenToKVPoolAllocator(16, torch.int64, "cpu", None, False)
tree = RadixCache(CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=token_alloc,
                                  page_size=1))
tree.insert(InsertParams(key=RadixKey(array("q", [1, 2, 3])), value=token_alloc.alloc(3)))
lock = tree.lock(tree.match_prefix(MatchPrefixParams(key=RadixKey(array("q", [1, 2, 3])))).last_device_node)
tree.unlock(lock)
tree.evict(EvictParams(num_tokens=3))
tree.dec_lock_ref(lock.node)
try:
    tree.evict(EvictParams(num_tokens=3))
    out["s3"] = "no error"
except AssertionError:
    out["s3"] = "AssertionError"
print(json.dumps(out))
'''


@pytest.mark.slow
def test_issue_streams_on_the_real_runtimes_match_the_profiles(runtime_python):
    """V1, S1, S2, S3 replayed on the real code; the profiles give the same answers."""
    r = run_in(runtime_python, "-c", REPLAY)
    assert r.returncode == 0, r.stderr[-3000:]
    real = json.loads(r.stdout.strip().splitlines()[-1])
    manager = VllmKVCacheManager.create(VllmConfig(16, 16))
    request = manager.make_request("r", list(range(40)), RequestExtras(
        mm=(MMFeature("imgA", 30, 5), MMFeature("imgB", 36, 3)))).append_output(manager.hasher, list(range(100, 108)))
    assert [list(k) for k in request.block_extra_keys[2]] == real["v1_block2"]
    assert [h.hex() for h in request.block_hashes] == real["v1_hashes"]
    allocator = PagedTokenToKVPoolAllocator(32, 4)
    cache = RadixCache(page_size=4, allocator=allocator)
    cache.insert([11, 12, 13, 14], allocator.alloc(4))
    cache.evict(3)
    assert allocator.free_pages == real["s1_free"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert real["s2_last_node"] == "None" and RadixCache(disable=True).insert([1, 2, 3]).last_device_node is None
    assert real["s3"] == "AssertionError"


def _dropped_store(events):
    """(i, k): event i is the only copy of a hash stored before, whose next touch is event k removing it."""
    copies: dict = {}
    stored: set = set()
    for i, ev in enumerate(events):
        if ev.kind == "AllBlocksCleared":
            copies.clear()
            continue
        if ev.kind == "BlockStored" and len(ev.hashes) == 1 and ev.hashes[0] in stored and not copies.get(ev.hashes[0]):
            h = ev.hashes[0]
            for k in range(i + 1, len(events)):
                later = events[k]
                if later.kind == "BlockRemoved" and h in later.hashes:
                    return i, k
                if later.kind == "AllBlocksCleared" or h in later.hashes or later.parent == h:
                    break
        for h in ev.hashes:
            copies[h] = copies.get(h, 0) + (1 if ev.kind == "BlockStored" else -1)
            stored.add(h)
    return None


@pytest.mark.slow
def test_an_event_log_recorded_from_the_live_vllm_validates_and_a_dropped_store_is_rejected(runtime_python, tmp_path):
    """vLLM's own KV events (its KVCacheManager with events on, its msgpack KVEventBatch encoding) under the
    profile logs' workload validate against KVAllocation; dropping one store fails at the removal it leaves
    unexplained."""
    from kvexact.conformance import vllm_events as ve
    from kvexact.conformance.partial_trace import PartialRejection

    path = tmp_path / "live.msgpack"
    r = run_in(runtime_python, "-c", "import sys; from kvexact.conformance.live.vllm import record_event_log; "
               f"open({str(path)!r}, 'wb').write(record_event_log(0, 120))")
    assert r.returncode == 0, r.stderr[-3000:]
    raw = ve.read_events(path)
    assert len(raw) >= 40
    result = ve.validate_events(raw, blocks=8, requests=2)
    assert result.ok, result.summary()
    cli = _cli(runtime_python, "validate-trace", "--events", "vllm", str(path),
               "--blocks", "8")
    assert cli.returncode == 0, cli.stdout + cli.stderr[-2000:]
    events = [ev for _w, ev in ve.normalize(raw)]
    picked = _dropped_store(events)
    assert picked is not None, "the workload must store a hash again and later evict it"
    i, k = picked
    rejected = ve.validate_events(raw[:i] + raw[i + 1:], blocks=8, requests=2)
    assert not rejected.ok and rejected.failure.index == k  # 1-based in the log without event i
    assert rejected.failure.rejection is PartialRejection.UNEXPLAINED
    assert "is not cached before the step" in rejected.failure.nearest.reason


def _record_sglang_log(python: str, tmp_path: Path) -> Path:
    """The live RadixCache's events under seed 0 and 80 operations, as a MessagePack file."""
    path = tmp_path / "live-sglang.msgpack"
    r = run_in(python, "-c", "from kvexact.conformance.live.sglang import record_event_log; "
               f"open({str(path)!r}, 'wb').write(record_event_log(0, 80))")
    assert r.returncode == 0, r.stderr[-3000:]
    return path


def _first_store_used_later(events) -> tuple[int, int] | None:
    """(i, k): the first store i whose hash or child event k comes before any reset (0-based)."""
    for i, ev in enumerate(events):
        if ev.kind != "BlockStored":
            continue
        for k in range(i + 1, len(events)):
            later = events[k]
            if later.kind == "AllBlocksCleared":
                break
            if set(ev.hashes) & set(later.hashes) or later.parent in ev.hashes:
                return i, k
    return None


@pytest.mark.slow
def test_an_event_log_recorded_from_the_live_sglang_validates_and_a_dropped_store_is_rejected(runtime_python,
                                                                                              tmp_path):
    """SGLang 0.5.23's own KV events (its recorder on the real RadixCache, its msgpack KVEventBatch) under a
    random request stream validate against RadixIndex; dropping a store fails at the next event that needs
    one of its hashes, by name."""
    from kvexact.conformance import sglang_events as se
    from kvexact.conformance import vllm_events as ve
    from kvexact.conformance.partial_trace import PartialRejection

    path = _record_sglang_log(runtime_python, tmp_path)
    raw = ve.read_events(path)
    events = [ev for _w, ev in ve.normalize(raw)]
    assert [ev.kind for ev in events].count("BlockStored") >= 4 and any(ev.kind == "BlockRemoved" for ev in events)
    result = se.validate_events(raw)
    assert result.ok, result.summary()
    cli = _cli(runtime_python, "validate-trace", "--events", "sglang", str(path))
    assert cli.returncode == 0, cli.stdout + cli.stderr[-2000:]
    picked = _first_store_used_later(events)
    assert picked is not None, "the workload must store a hash and later use or evict it"
    i, k = picked
    rejected = se.validate_events(raw[:i] + raw[i + 1:])
    assert not rejected.ok and rejected.failure.index == k  # 1-based in the log without event i
    assert rejected.failure.rejection is PartialRejection.EVENT_NOT_MAPPED
    assert rejected.failure.reason.split(":")[0] in ("UNKNOWN_PARENT", "UNKNOWN_HASH", "REMOVED_NOT_CACHED")


def _live_publisher(python: str, drop: int | None = None) -> tuple[subprocess.Popen, str, int]:
    """SGLang 0.5.23's own ZmqEventPublisher sending the live RadixCache's events (seed 0, 80 operations) from a
    child in the runtime environment: (the child, its endpoint, the batches it will send)."""
    code = f"from kvexact.conformance.live.sglang import publish_event_log; publish_event_log(0, 80, drop={drop!r})"
    proc = subprocess.Popen([python, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline().split()
    if len(first) != 2:
        proc.kill()
        raise AssertionError(f"the publisher did not start: {first} {proc.communicate()[1][-3000:]}")
    return proc, first[0], int(first[1])


@pytest.mark.slow
def test_a_live_sglang_publisher_stream_validates(runtime_python):
    """`validate-trace --events sglang --live` subscribed to SGLang's own publisher accepts its stream."""
    proc, endpoint, batches = _live_publisher(runtime_python)
    try:
        cli = _cli(runtime_python, "validate-trace", "--events", "sglang", "--live", endpoint, "--idle", "120",
                   "--max-batches", str(batches))
    finally:
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert cli.returncode == 0, cli.stdout + cli.stderr[-2000:]
    assert "SGLang event log accepted by RadixIndex" in cli.stdout


@pytest.mark.slow
def test_a_live_sglang_publisher_stream_without_a_store_is_rejected_at_the_right_event(runtime_python, tmp_path):
    """The same stream with one store dropped by the publisher: rejected, by name, at the next event that needs
    one of its hashes (the recorded log is deterministic, so the dropped event is known in advance)."""
    from kvexact.conformance import sglang_events as se
    from kvexact.conformance import vllm_events as ve
    from kvexact.conformance.partial_trace import PartialRejection

    path = _record_sglang_log(runtime_python, tmp_path)
    recorded = ve.read_events(path)
    events = [ev for _w, ev in ve.normalize(recorded)]
    picked = _first_store_used_later(events)
    assert picked is not None, "the workload must store a hash and later use or evict it"
    i, k = picked
    proc, endpoint, batches = _live_publisher(runtime_python, drop=i)
    try:
        raw = ve.load_log(None, endpoint, idle_s=120, max_batches=batches)
    finally:
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert [e for _w, e in raw] == [e for _w, e in recorded[:i] + recorded[i + 1:]]
    rejected = se.validate_events(raw)
    assert not rejected.ok and rejected.failure.index == k  # 1-based in the stream without event i
    assert rejected.failure.rejection is PartialRejection.EVENT_NOT_MAPPED
    assert f"{endpoint} seq" in rejected.failure.where
    assert rejected.failure.reason.split(":")[0] in ("UNKNOWN_PARENT", "UNKNOWN_HASH", "REMOVED_NOT_CACHED")


OBSERVE = r'''
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from kvexact.conformance.live import vllm as live_vllm
from kvexact.conformance.machines.allocator import machine_class
from kvexact.conformance.runner import machine_settings
from kvexact.reference.adapters import AdapterConfig

a = live_vllm.factory(AdapterConfig())
a.start("r0", [1, 2, 3, 1, 2])
a.release("r0")
freed = a.observe()["queues"]["free"][0]
a.start("r1", [1, 2, 3])  # a hit on r0's first cached block: vLLM's touch takes it out of the free queue
hit = a.table("r1", 0)[0]
assert hit not in a.observe()["queues"]["free"][0] and hit in freed, (hit, freed)
m = machine_class("KVAllocation", sut_factory=live_vllm.factory, check_kernels=False, validate_trace=False)
run_state_machine_as_test(m, settings=settings(machine_settings("ci", shrink=False), max_examples=5,
                                               stateful_step_count=15))
print("observation_checks", m.stats["observation_checks"])
'''

ROOM = r'''
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from kvexact.conformance.live import vllm as live_vllm
from kvexact.conformance.machines.allocator import machine_class
from kvexact.conformance.runner import machine_settings

m = machine_class("KVAllocation", sut_factory=live_vllm.factory, check_kernels=False, validate_trace=False)
run_state_machine_as_test(m, settings=settings(machine_settings("ci", shrink=False), max_examples=30,
                                               stateful_step_count=30))
print("refusals_for_blocks_checked", m.stats.get("refusals_for_blocks_checked", 0))
'''


def test_live_vllm_free_queue_is_observed_and_keeps_the_queue_promises(runtime_python):
    """The live adapter's observe() reads vLLM's own free block queue: a prefix hit takes the block out, and the
    KVAllocation machine checks the queue after every step."""
    r = run_in(runtime_python, "-c", OBSERVE)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) > 20, r.stdout


def test_live_vllm_refusals_for_lack_of_blocks_are_held_to_its_usage(runtime_python):
    """The live adapter reports vLLM's own get_usage(), so each refusal for lack of blocks is checked against the
    blocks live tables leave unmapped (real vLLM 0.33.0 refuses only without room)."""
    r = run_in(runtime_python, "-c", ROOM)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) > 0, r.stdout


KV_EVENTS = '''
import sys
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from kvexact.conformance.live import vllm as live_vllm
from kvexact.conformance.machines.allocator import machine_class
from kvexact.conformance.machines.kv_events import KVEventFailure
from kvexact.conformance.runner import machine_settings

if sys.argv[1] == "drop-removals":  # a router fed by this runtime would keep every evicted prefix
    taken = live_vllm.LiveVllmAdapter.kv_events
    live_vllm.LiveVllmAdapter.kv_events = lambda self: [e for e in taken(self) if e["type"] != "BlockRemoved"]
m = machine_class("KVAllocation", sut_factory=live_vllm.factory, check_kernels=False, validate_trace=False)
try:
    run_state_machine_as_test(m, settings=settings(machine_settings("ci", shrink=False), max_examples=40,
                                                   stateful_step_count=40))
except KVEventFailure as exc:
    print("caught", exc.problem.name)
print("replayed", m.stats.get("kv_events:replayed", 0))
'''


def test_live_vllm_kv_events_replay_to_its_cached_prefixes(runtime_python):
    """The live adapter hands the machines real vLLM's take_events() and its cached_prefixes(): after every step the
    events replay to exactly the prefixes vLLM's block pool holds; with its removals dropped, they do not."""
    r = run_in(runtime_python, "-c", KV_EVENTS, "correct")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "caught" not in r.stdout and int(r.stdout.split()[-1]) > 100, r.stdout
    r = run_in(runtime_python, "-c", KV_EVENTS, "drop-removals")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "caught DISAGREES_WITH_CACHE" in r.stdout, r.stdout


SGLANG_KV_EVENTS = '''
import sys
from kvexact.conformance.live import sglang as live_sglang
from kvexact.conformance.runner import machine_settings, run_machine

if sys.argv[1] == "drop-removals":  # a router fed by this runtime would keep every evicted path
    taken = live_sglang.LiveSGLangAdapter.kv_events
    live_sglang.LiveSGLangAdapter.kv_events = lambda self: [
        e for e in taken(self) if type(e).__name__ != "BlockRemoved"]
run = run_machine(sys.argv[2], "kvexact.conformance.live.sglang:factory", machine_settings("ci", 30, 30, shrink=False),
                  0, check_kernels=False)
print("caught" if not run.passed else "passed", run.error[:300].replace(chr(10), " "))
print("replayed", run.stats.get("kv_events:replayed", 0))
'''


@pytest.mark.parametrize("machine", ["Radix", "Radix@page2"])
def test_live_sglang_kv_events_replay_to_the_cached_paths(runtime_python, machine):
    """The live SGLang adapter hands the Radix machine real SGLang's recorded KV events: after every step they
    store exactly the whole-page prefixes of the cached paths; with its removals dropped, they do not."""
    r = run_in(runtime_python, "-c", SGLANG_KV_EVENTS, "correct", machine)
    assert r.returncode == 0 and "passed" in r.stdout, r.stdout + r.stderr[-3000:]
    assert int(r.stdout.split()[-1]) > 100, r.stdout
    r = run_in(runtime_python, "-c", SGLANG_KV_EVENTS, "drop-removals", machine)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "caught" in r.stdout and "KV events:" in r.stdout, r.stdout
