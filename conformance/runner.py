"""Running the machines: one shared runner for ``kvexact conform``, ``kvexact fuzz`` and the gate.

Invariant: a run is reported as passed only when Hypothesis finished every example without a failure;
a failure carries the error text and, when Hypothesis printed one, the ``@reproduce_failure`` blob that
replays it, from which :func:`write_reproduction` writes a plain pytest file.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from kvexact.conformance.adapter_border import (
    DEFAULT_SHRINK_SECONDS,
    Adapter,
    AdapterUnusable,
    call_seconds,
    first_problem,
    limited_factory,
    resolve,
)
from kvexact.conformance.fork_state import (
    STOP_FILE,
    StopFile,
    can_fork_with,
    database_state,
    publishing_stats,
    read_stats,
    request_stop,
    restore_database_state,
)
from kvexact.conformance.guard import (
    AdapterFault,
    death_message,
    isolation,
    replay_source,
    run_isolated,
)
from kvexact.conformance.machines import failure_in_flight
from kvexact.conformance.machines.allocator import machine_class
from kvexact.conformance.profiles import profile_settings
from kvexact.reference.adapters import AdapterError, AdapterProblem
from kvexact.spec.files import write_atomic

SPECS = ("KVAllocation", "CowPublication")  # allocator machines: an allocator adapter can stand in
RADIX_PAGED = ("Radix@page2", "Radix@page4")  # the Radix machine at SGLang's page sizes (index and adapter paged)
MACHINES = (*SPECS, "Radix", "Vmm", "Revocation", "SharedTail", "PromptCache", "ChunkAttention", *RADIX_PAGED, "Hybrid")
# which machines an adapter of each protocol stands in for (Vmm and Revocation drive the reference only)
PROTOCOL_MACHINES = {"allocator": SPECS, "prefix-index": ("Radix", *RADIX_PAGED), "hybrid-cache": ("Hybrid",)}
_BLOB = re.compile(r"@reproduce_failure\('([^']+)', (b'[^']*'|b\"[^\"]*\")\)")


@attrs.frozen
class MachineRun:
    spec: str
    adapter: str
    passed: bool
    seconds: float
    stats: dict[str, int]
    rules: tuple[str, ...]
    error: str = ""
    reproduce: tuple[str, str] | None = None  # (hypothesis version, blob literal)
    falsifying: str = ""  # the failing example's steps as Hypothesis printed them (rules and draws only)
    replay: str = ""  # when the adapter ended the process: a script replaying its calls (no blob exists)

    @property
    def examples(self) -> int:
        return self.stats.get("examples", 0)

    @property
    def steps(self) -> int:
        return self.stats.get("steps", 0)

    def rules_fired(self) -> list[str]:
        """Rules that ran with everything they need (a call that found an optional adapter method
        missing does not count)."""
        return [r for r in self.rules if self.stats.get(f"rule:{r}", 0)]

    def missing_methods(self) -> list[str]:
        """Optional adapter methods a rule needed and the adapter lacks."""
        return sorted(k.split(":", 1)[1] for k in self.stats if k.startswith("missing:"))


def machine_settings(profile: str, examples: int | None = None, steps: int | None = None,
                     shrink: bool = True) -> settings:
    """The profile's settings for a machine run. No explain phase: it replays the failing example under a
    line tracer (through the Triton interpreter, minutes) for comments the step listing does not need."""
    base = profile_settings(profile)
    dropped = {Phase.explain} if shrink else {Phase.explain, Phase.shrink}
    phases = tuple(p for p in base.phases if p not in dropped)
    return settings(base, max_examples=examples or base.max_examples,
                    stateful_step_count=steps or base.stateful_step_count, deadline=None, print_blob=True,
                    report_multiple_bugs=False, phases=phases,
                    suppress_health_check=[*base.suppress_health_check, HealthCheck.filter_too_much])


def _page(spec: str) -> int:
    return int(spec.partition("@page")[2] or 1)


def _fits(adapter: Adapter, spec: str) -> bool:
    """A machine takes an adapter of its protocol; a paged one only if the factory lists its page size in
    ``page_sizes`` (default: page size 1 only)."""
    return (spec in PROTOCOL_MACHINES[adapter.protocol]
            and _page(spec) in (1, *getattr(adapter.factory, "page_sizes", ())))


def machines_for(adapter: str | Adapter | None) -> tuple[str, ...]:
    """The machines ``adapter`` (``module:factory`` or a resolved :class:`Adapter`) stands in for; all of
    them for the reference."""
    resolved = resolve(adapter)
    if resolved is None:
        return MACHINES
    return tuple(m for m in PROTOCOL_MACHINES[resolved.protocol] if _fits(resolved, m))


def build_machine(spec: str, adapter: str | Adapter | None, check_kernels: bool = True,
                  call_timeout: float | None = None) -> Any:
    """A fresh machine class for ``spec`` with ``adapter`` as the system under test (None: reference),
    every adapter call limited to ``call_timeout`` seconds (default: ``KVEXACT_CALL_TIMEOUT`` or 60).

    Raises :class:`AdapterError` when the adapter's protocol does not fit the machine."""
    resolved = resolve(adapter)
    factory = None
    if resolved is not None:
        factory = limited_factory(resolved.factory, resolved.spec, call_seconds(call_timeout))
        if not _fits(resolved, spec):
            raise AdapterError(AdapterProblem.WRONG_MACHINE,
                               f"--adapter {resolved} is a {resolved.protocol} adapter; the {spec} machine "
                               f"takes none of that kind or page size (it fits: {', '.join(machines_for(resolved))})")
    return _counting_failures(_machine_class(spec, factory, check_kernels))


def _machine_class(spec: str, factory: Any, check_kernels: bool) -> Any:
    if spec == "Radix" or spec in RADIX_PAGED:
        from kvexact.conformance.machines.radix import RadixMachine

        page = _page(spec)
        return type("RadixRun", (RadixMachine,), {"stats": {}, "check_kernels": check_kernels, "page_size": page,
                                                  "sut_factory": staticmethod(factory) if factory else None})
    if spec == "Vmm":
        from kvexact.conformance.machines.vmm import VmmMachine

        return type("VmmRun", (VmmMachine,), {"stats": {}, "check_kernels": check_kernels})
    if spec == "Revocation":
        from kvexact.conformance.machines.revocation import RevocationMachine

        return type("RevocationRun", (RevocationMachine,), {"stats": {}})
    if spec == "SharedTail":
        from kvexact.conformance.machines.tails import SharedTailMachine

        return type("SharedTailRun", (SharedTailMachine,), {"stats": {}})
    if spec == "PromptCache":
        from kvexact.conformance.machines.prompt_cache import PromptCacheMachine

        return type("PromptCacheRun", (PromptCacheMachine,), {"stats": {}})
    if spec == "ChunkAttention":
        from kvexact.conformance.machines.chunk_attention import ChunkAttentionMachine

        return type("ChunkAttentionRun", (ChunkAttentionMachine,), {"stats": {}, "check_kernels": check_kernels})
    if spec == "Hybrid":
        from kvexact.conformance.machines.hybrid import HybridMachine

        return type("HybridRun", (HybridMachine,), {"stats": {},
                                                    "sut_factory": staticmethod(factory) if factory else None})
    return machine_class(spec, sut_factory=factory, check_kernels=check_kernels)


class _BudgetSpent(BaseException):
    """The run's wall-clock budget is spent (raised between examples, never while a failure is shrunk)."""


def _counting_failures(machine: Any) -> Any:
    """``machine`` whose stats count the failing examples (``failures``, shrinking's included) and which
    ends the run between examples once ``stop_at`` (a ``time.monotonic()`` value, on the class) has passed,
    unless a failure was seen."""

    def teardown(self: Any) -> None:
        failing = failure_in_flight() is not None
        try:
            machine.teardown(self)
        except Exception:
            failing = True
            raise
        finally:
            if failing:
                self.stats["failures"] = self.stats.get("failures", 0) + 1
        cls = type(self)
        spent = cls.stop_at is not None and time.monotonic() >= cls.stop_at
        if (spent or (cls.stop is not None and cls.stop.is_set())) and not self.stats.get("failures"):
            raise _BudgetSpent()

    return type(machine.__name__, (machine,), {"teardown": teardown, "stop_at": None, "stop": None})


def database_key(spec: str, adapter: str | None, profile: str) -> bytes:
    """The example-database key of a run: machine, adapter and profile, so that a failure found through one
    adapter is replayed only against that adapter (and a ``ci`` example never enters a ``fuzz`` run)."""
    return f"kvexact:{spec}:{adapter or 'reference'}:{profile}".encode()


def run_machine(spec: str, adapter: str | Adapter | None, machine_settings_: settings, seed: int | None = None,
                check_kernels: bool = True, call_timeout: float | None = None,
                shrink_seconds: float = DEFAULT_SHRINK_SECONDS,
                watch: Callable[[dict[str, int]], None] | None = None, stop_at: float | None = None,
                profile: str | None = None, stop: threading.Event | None = None) -> MachineRun:
    """Run one machine; the adapter is ``module:factory`` (None: the reference is the system under test).

    Shrinking a failure stops after ``shrink_seconds`` (Hypothesis' own bound, ``MAX_SHRINKING_SECONDS``,
    is five minutes). Raises :class:`AdapterError` when the adapter could not be used (a call overran, the
    factory raised): that is no conformance verdict. ``watch`` receives the run's live stats (for progress);
    past ``stop_at`` (``time.monotonic()``) the run ends after the example in progress, as passed, unless
    a failure was seen (then it is shrunk and reported as usual); so too once ``stop`` is set. With an example
    database, its key is :func:`database_key` of ``spec``, ``adapter`` and ``profile`` (default: the loaded
    profile).

    A run through an adapter goes to a forked child (:mod:`~kvexact.conformance.guard`) unless the process
    holds a CUDA context or the example database has a part of a kind :func:`~kvexact.conformance.fork_state.
    can_fork_with` does not know: an adapter that ends the process (``os._exit``, SIGSEGV, SIGABRT) or a call
    that overruns the per-call limit (a hang, :data:`~kvexact.conformance.guard.AdapterFault.HUNG`) gives a
    failed run naming the call that was running, with a replay script (``replay``) in place of Hypothesis'
    blob. The child's counters reach ``watch``'s dict while it runs, ``stop`` reaches the child, and its
    example-database writes reach this process (:mod:`~kvexact.conformance.fork_state`). In this process (no
    fork) a hang stays :class:`AdapterError` ``CALL_TIMEOUT`` (could not run)."""
    resolved = resolve(adapter)
    mode = isolation()
    if resolved is not None and mode is not None and can_fork_with(machine_settings_.database, mode == "spawn"):
        return _run_forked(spec, resolved, machine_settings_, seed, check_kernels, call_timeout, shrink_seconds,
                           watch, stop_at, profile, stop, mode == "spawn")
    return _run_here(spec, resolved, machine_settings_, seed, check_kernels, call_timeout, shrink_seconds, watch,
                     stop_at, profile, stop)


def _run_forked(spec: str, resolved: Adapter, machine_settings_: settings, seed: int | None,
                check_kernels: bool, call_timeout: float | None, shrink_seconds: float,
                watch: Callable[[dict[str, int]], None] | None, stop_at: float | None, profile: str | None,
                stop: threading.Event | None, spawn: bool) -> MachineRun:
    """:func:`run_machine` in a child process (forked, or with ``spawn`` a fresh interpreter), with the
    adapter's death or hang turned into a failed run."""
    label = resolved.spec
    database = machine_settings_.database
    stats: dict[str, int] = {}
    if watch is not None:
        watch(stats)  # kept current from the child's counters
    started = time.perf_counter()

    def failed(error: str, log: list[str]) -> tuple[MachineRun, None]:
        return MachineRun(spec, label, False, time.perf_counter() - started, dict(stats),
                          _rule_names(build_machine(spec, resolved, check_kernels, call_timeout)), error,
                          replay=replay_source(label, spec, error, log, f"test_repro_{spec}.py")), None

    def died(how: str, log: list[str]) -> tuple[MachineRun, None]:
        return failed(death_message(label, spec, how, log), log)

    def hung(exc: BaseException, log: list[str]) -> tuple[MachineRun, None] | None:
        if not (isinstance(exc, AdapterError) and exc.problem is AdapterProblem.CALL_TIMEOUT):
            return None
        return failed(f"AdapterFaultError: {AdapterFault.HUNG.name}: {exc}", log)

    child = _ChildRun(spec, resolved, machine_settings_, seed, check_kernels, call_timeout, shrink_seconds,
                      stop_at, profile or settings.get_current_profile_name(), stop is not None)

    def poll(channel: Path) -> None:
        if stop is not None and stop.is_set():
            request_stop(channel)
        stats.update(read_stats(channel))

    run, state = run_isolated(child, died, hung, stall_seconds=stall_limit(call_seconds(call_timeout)), poll=poll,
                              spawn=spawn)
    if state is not None:
        restore_database_state(database, state)
    stats.update(run.stats)
    return run


@attrs.frozen
class _ChildRun:
    """What a child process runs for :func:`_run_forked` (picklable, for a spawned child): the machine run,
    its counters written to the channel, a stop file read as the stop event, the database state handed back."""

    spec: str
    adapter: Adapter
    machine_settings: settings
    seed: int | None
    check_kernels: bool
    call_timeout: float | None
    shrink_seconds: float
    stop_at: float | None
    profile: str
    stoppable: bool

    def __call__(self, channel: Path) -> tuple[MachineRun, list[Any]]:
        with publishing_stats(channel) as slot:
            run = _run_here(self.spec, self.adapter, self.machine_settings, self.seed, self.check_kernels,
                            self.call_timeout, self.shrink_seconds, slot.append, self.stop_at, self.profile,
                            StopFile(channel / STOP_FILE) if self.stoppable else None)
        return run, database_state(self.machine_settings.database)


def stall_limit(call_limit: float) -> float:
    """How long a forked run may go without a new adapter call before the parent kills it (0: never): twice
    the per-call limit and ten seconds, so the child's own timer stops a Python-level hang first and this
    catches only a call stuck where no timer reaches (C code)."""
    return 2 * call_limit + 10 if call_limit > 0 else 0.0


def _run_here(spec: str, resolved: Adapter | None, machine_settings_: settings, seed: int | None,
              check_kernels: bool, call_timeout: float | None, shrink_seconds: float,
              watch: Callable[[dict[str, int]], None] | None, stop_at: float | None, profile: str | None,
              stop: threading.Event | StopFile | None) -> MachineRun:
    """:func:`run_machine` in this process."""
    label = resolved.spec if resolved is not None else None
    machine = build_machine(spec, resolved, check_kernels, call_timeout)
    machine.stop_at = stop_at
    machine.stop = stop
    if machine_settings_.database is not None and not machine_settings_.derandomize:
        # Hypothesis' digest hook; left alone without a database, where derandomize seeds from the digest
        machine._hypothesis_internal_add_digest = database_key(
            spec, label, profile or settings.get_current_profile_name())
    if watch is not None:
        watch(machine.stats)
    if seed is not None and not machine_settings_.derandomize:
        machine = hypothesis.seed(seed)(machine)
    start = time.perf_counter()
    try:
        with _shrink_budget(shrink_seconds) as stopped:
            run_state_machine_as_test(machine, settings=machine_settings_)
    except AdapterUnusable as exc:
        raise exc.error from None
    except _BudgetSpent:
        pass
    except Exception as exc:
        _raise_adapter_problem(machine)
        text = f"{type(exc).__name__}: {exc}"
        notes = "\n".join(getattr(exc, "__notes__", []))
        m = _BLOB.search(notes)
        steps = _falsifying_steps(notes, machine)
        if stopped:
            steps += f"\n  (shrinking stopped after {shrink_seconds:g} s, --shrink-seconds: these steps may not be minimal)"
        return MachineRun(spec, label or "reference", False, time.perf_counter() - start, dict(machine.stats),
                          _rule_names(machine), text[:2000], (m.group(1), m.group(2)) if m else None, steps)
    _raise_adapter_problem(machine)
    return MachineRun(spec, label or "reference", True, time.perf_counter() - start, dict(machine.stats),
                      _rule_names(machine))


def _raise_adapter_problem(machine: Any) -> None:
    """An adapter problem met during the run wins over whatever Hypothesis made of it."""
    problem = first_problem(getattr(machine, "sut_factory", None))
    if problem is not None:
        raise problem


@contextlib.contextmanager
def _shrink_budget(seconds: float) -> Iterator[list[bool]]:
    """Hypothesis' shrink time limit set to ``seconds`` for the block (its documented monkeypatch point);
    its warning that shrinking stopped (which says "five minutes") is replaced by a true entry in the
    yielded list."""
    from hypothesis.internal.conjecture import engine
    from hypothesis.reporting import current_reporter, with_reporter

    stopped: list[bool] = []
    relay = current_reporter()

    def report(text: object) -> None:
        if str(text).startswith("WARNING: Hypothesis has spent more than five minutes"):
            stopped.append(True)
        else:
            relay(text)

    previous = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        with with_reporter(report):
            yield stopped
    finally:
        engine.MAX_SHRINKING_SECONDS = previous


def _falsifying_steps(notes: str, machine: Any) -> str:
    """The rule calls and draws of Hypothesis' failing-example notes (invariant checks left out; a call
    whose result joins a bundle is kept with its assignment)."""
    invariants = {n for n in dir(machine) if hasattr(getattr(machine, n, None), "hypothesis_stateful_invariant")}
    keep = []
    for line in notes.splitlines():
        call = line.split(" = ", 1)[-1]  # a rule that fills a bundle is printed as ``live_0 = state.rule(...)``
        name = call.removeprefix("state.").split("(", 1)[0]
        if line.startswith("state = ") or line.startswith("Draw ") or (
                call.startswith("state.") and name not in invariants and name != "teardown"):
            keep.append("  " + line)
    return "\n".join(keep)


def _rule_names(machine: Any) -> tuple[str, ...]:
    """The rules the machine can fire (its own ``rule_names`` when it narrows them to its spec)."""
    if hasattr(machine, "rule_names"):
        return tuple(machine.rule_names())
    return tuple(sorted(n for n in dir(machine) if hasattr(getattr(machine, n, None), "hypothesis_stateful_rule")))


REPRO_TEMPLATE = '''"""Reproduction written by `kvexact fuzz` on {when}: {error_line}

Run it with `pytest {name}`; it replays the failing example of the {spec} machine
(adapter: {adapter}) and fails again while the bug is there. Needs hypothesis=={version}.
"""

from hypothesis import reproduce_failure, settings

from kvexact.conformance.runner import build_machine

ADAPTER = {adapter_literal}
Machine = build_machine({spec!r}, ADAPTER)
Machine = reproduce_failure({version!r}, {blob})(Machine)
Machine.TestCase.settings = settings(max_examples=1, stateful_step_count={steps}, deadline=None,
                                     database=None, derandomize=False)
TestReproduction = Machine.TestCase
'''


def write_reproduction(run: MachineRun, folder: Path, steps: int) -> Path:
    """A plain pytest file that replays ``run``'s failure (the blob Hypothesis printed, or the guard's replay
    of the calls of an adapter that ended the process)."""
    if run.reproduce is None and not run.replay:
        raise ValueError("this failure has no @reproduce_failure blob to replay")
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = folder / f"test_repro_{run.spec}_{stamp}.py"
    if run.reproduce is None:
        write_atomic(path, run.replay.replace(f"test_repro_{run.spec}.py", path.name))
        return path
    version, blob = run.reproduce
    write_atomic(path, REPRO_TEMPLATE.format(
        when=stamp, error_line=run.error.splitlines()[0][:150] if run.error else "failure", name=path.name,
        spec=run.spec, adapter=run.adapter, version=version, blob=blob, steps=steps,
        adapter_literal=repr(None if run.adapter == "reference" else run.adapter)))
    return path


def summary_line(run: MachineRun) -> str:
    fired = run.rules_fired()
    return (f"{run.spec:15} {run.adapter:24} {'passed' if run.passed else 'FAILED':7} "
            f"examples={run.examples} steps={run.steps} rules={len(fired)}/{len(run.rules)} "
            f"attention_checks={run.stats.get('attention_checks', 0)} trace_steps={run.stats.get('trace_steps', 0)} "
            f"copies={run.stats.get('device_copies', 0)} ({run.seconds:.1f}s)"
            + (f"\n  {run.adapter} lacks optional methods {', '.join(run.missing_methods())}: the rules that "
               f"need them did not run (not fired: {', '.join(sorted(set(run.rules) - set(fired)))})"
               if run.missing_methods() else ""))


def stats_figures(run: MachineRun) -> dict[str, Any]:
    return {"examples": run.examples, "steps": run.steps, "rules_fired": len(run.rules_fired()),
            "rules": len(run.rules), "missing_methods": run.missing_methods(), "attention_checks": run.stats.get("attention_checks", 0),
            "trace_steps": run.stats.get("trace_steps", 0), "cow_copies": run.stats.get("device_copies", 0)}
