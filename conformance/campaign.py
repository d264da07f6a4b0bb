"""Fuzzing campaigns on Dask: slices (machine, adapter, seed, budget) run in parallel on a Dask cluster.

Invariants: a slice runs on exactly one worker with the campaign's example database
(:mod:`kvexact.conformance.campaign_db`), so a failure it finds is in that database before the slice
returns; while it runs, it publishes its counters as Dask events (topic :data:`TOPIC`), one start event per
attempt, so a slice that Dask ran again after losing its worker is counted as a restart; it stops after the
example in progress once its budget is spent or the campaign's stop event is set. Dask (``distributed``)
is imported only by the functions that need it: the module imports without the ``campaign`` extra.
"""

from __future__ import annotations

import collections
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from kvexact.conformance.runner import MachineRun

TOPIC = "kvexact-fuzz"
PUBLISH_SECONDS = 0.5  # how often a running slice sends its counters
RATE_WINDOW = 10.0  # steps per second are measured over this many recent seconds


class CampaignUnavailable(Exception):
    """``--workers`` / ``--scheduler`` without the ``campaign`` extra (Dask) installed."""


def require_dask() -> None:
    """Raise :class:`CampaignUnavailable` (one line naming the extra) when Dask is not importable."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise CampaignUnavailable("--workers and --scheduler need Dask: pip install 'kvexact[campaign]'") from None


@attrs.frozen
class Slice:
    """One unit of a campaign: ``examples`` examples of ``spec`` (at most ``seconds`` long) with ``seed``."""

    number: int
    spec: str
    adapter: str | None
    seed: int
    seconds: float
    examples: int
    steps: int
    shrink: bool = True
    kernels: bool = True
    call_timeout: float | None = None
    shrink_seconds: float = 30.0


@attrs.frozen
class Databases:
    """Where a slice reads and writes examples: a local directory (on the worker's host), a shared
    ``redis://`` database written too, one read only."""

    local: str
    shared: str | None = None
    read_only: str | None = None


@attrs.frozen
class SliceResult:
    slice: Slice
    run: MachineRun | None
    shared_error: str = ""
    adapter_error: str = ""
    adapter_problem: str = ""  # the AdapterProblem member's name


def run_slice(piece: Slice, dbs: Databases, stop_name: str | None = None) -> SliceResult:
    """Run ``piece`` here (on a Dask worker, or in this process when there is none), publishing counters."""
    from hypothesis import settings

    from kvexact.conformance.adapter_border import resolve
    from kvexact.conformance.campaign_db import campaign_database
    from kvexact.conformance.profiles import load_profile
    from kvexact.conformance.runner import _rule_names, build_machine, machine_settings, run_machine
    from kvexact.reference.adapters import AdapterError

    load_profile("fuzz")
    database, shared = campaign_database(Path(dbs.local), dbs.shared, dbs.read_only, strict=False)
    s = settings(machine_settings("fuzz", piece.examples, piece.steps, piece.shrink), database=database)
    live: dict[str, Any] = {"stats": {}}
    try:
        adapter = resolve(piece.adapter)  # once per slice; the text travelled, the factory is imported here
        rules = list(_rule_names(build_machine(piece.spec, adapter, piece.kernels, piece.call_timeout)))
        stop = threading.Event()
        with _publishing(piece, rules, live, stop, stop_name):
            run = run_machine(piece.spec, adapter, s, piece.seed, piece.kernels, piece.call_timeout,
                              piece.shrink_seconds, watch=lambda stats: live.update(stats=stats),
                              stop_at=time.monotonic() + piece.seconds, profile="fuzz", stop=stop)
    except AdapterError as exc:  # sent back as text: the exception type does not survive pickling
        return SliceResult(piece, None, adapter_error=str(exc), adapter_problem=exc.problem.name)
    return SliceResult(piece, run, shared.error if shared else "")


@contextmanager
def _publishing(piece: Slice, rules: list[str], live: dict[str, Any], stop: threading.Event,
                stop_name: str | None) -> Iterator[None]:
    """Send the slice's counters every :data:`PUBLISH_SECONDS` (and once at the end) while the block runs;
    set ``stop`` once the campaign's Dask event ``stop_name`` is set. Outside a Dask worker: nothing."""
    try:
        from distributed import Event, get_client, get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        yield
        return
    attempt = uuid.uuid4().hex
    stopper = Event(stop_name, client=get_client()) if stop_name else None
    done = threading.Event()

    def send(final: bool) -> None:
        stats = dict(live["stats"])
        worker.log_event(TOPIC, {
            "slice": piece.number, "attempt": attempt, "spec": piece.spec, "adapter": piece.adapter or "reference",
            "worker": worker.address, "pid": os.getpid(), "examples": stats.get("examples", 0),
            "steps": stats.get("steps", 0), "failures": stats.get("failures", 0), "rules": rules,
            "fired": sorted(k.split(":", 1)[1] for k, v in stats.items() if k.startswith("rule:") and v),
            "final": final})

    def loop() -> None:
        while not done.wait(PUBLISH_SECONDS):
            send(False)
            try:
                if stopper is not None and stopper.is_set():
                    stop.set()
            except Exception:  # the scheduler is going away: the campaign is ending anyway
                stop.set()

    send(False)
    thread = threading.Thread(target=loop, name="kvexact-slice-counters", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        send(True)


class Counters:
    """A campaign's live counters, built from the slices' events (each attempt's latest figures count)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.lock = threading.Lock()
        self.attempts: dict[str, dict[str, Any]] = {}
        self.slice_attempts: dict[int, set[str]] = collections.defaultdict(set)
        self.rules: dict[str, set[str]] = {}
        self.fired: dict[str, set[str]] = collections.defaultdict(set)
        self.new_rule_at: dict[str, float] = {}
        self.samples: collections.deque[tuple[float, int]] = collections.deque()
        self.workers: set[str] = set()
        self.dashboard = ""

    def record(self, msg: dict[str, Any]) -> None:
        """Take one slice event."""
        now = self.clock()
        with self.lock:
            self.attempts[msg["attempt"]] = msg
            self.slice_attempts[msg["slice"]].add(msg["attempt"])
            self.workers.add(msg["worker"])
            spec = msg["spec"]
            self.rules.setdefault(spec, set()).update(msg["rules"])
            new = set(msg["fired"]) - self.fired[spec]
            if new or spec not in self.new_rule_at:
                self.new_rule_at[spec] = now
            self.fired[spec] |= new
            self.samples.append((now, self._total("steps")))
            while len(self.samples) > 2 and self.samples[0][0] < now - RATE_WINDOW:
                self.samples.popleft()

    def _total(self, field: str) -> int:
        return sum(int(a[field]) for a in self.attempts.values())

    def restarts(self) -> dict[int, int]:
        """Slices that ran more than once (their worker was lost), with how many extra runs."""
        with self.lock:
            return {n: len(a) - 1 for n, a in self.slice_attempts.items() if len(a) > 1}

    def snapshot(self) -> dict[str, Any]:
        """The figures of the counters page (JSON-ready)."""
        now = self.clock()
        with self.lock:
            (t0, s0), (t1, s1) = (self.samples[0], self.samples[-1]) if self.samples else ((0.0, 0), (0.0, 0))
            machines = {spec: {"rules_fired": len(self.fired[spec]), "rules": len(rules),
                               "fired": sorted(self.fired[spec]),
                               "seconds_since_new_rule": round(now - self.new_rule_at[spec], 1)}
                        for spec, rules in sorted(self.rules.items())}
            return {"examples": self._total("examples"), "steps": self._total("steps"),
                    "steps_per_second": round((s1 - s0) / (t1 - t0), 1) if t1 > t0 else 0.0,
                    "failures": self._total("failures"), "slices": len(self.slice_attempts),
                    "restarts": sum(len(a) - 1 for a in self.slice_attempts.values()),
                    "workers_seen": len(self.workers), "elapsed_seconds": round(now - self.started, 1),
                    "machines": machines, "dask_dashboard": self.dashboard}


@attrs.define
class Campaign:
    """What the command line asked for: the slices' shape, the budget and the databases."""

    specs: tuple[str, ...]
    adapter: str | None
    seed: int
    minutes: float
    examples: int
    steps: int
    dbs: Databases
    shrink: bool = True
    kernels: bool = True
    call_timeout: float | None = None
    shrink_seconds: float = 30.0

    def slice(self, number: int, seconds: float) -> Slice:
        return Slice(number, self.specs[number % len(self.specs)], self.adapter, self.seed + number, seconds,
                     self.examples, self.steps, self.shrink, self.kernels, self.call_timeout, self.shrink_seconds)


@attrs.define
class Outcome:
    """The campaign's end: every slice result, errors met, and whether Ctrl-C ended it."""

    results: list[SliceResult] = attrs.Factory(list)
    lost: list[str] = attrs.Factory(list)  # slices Dask gave up on (KilledWorker and the like)
    interrupted: bool = False

    @property
    def failures(self) -> list[MachineRun]:
        return [r.run for r in self.results if r.run is not None and not r.run.passed]

    @property
    def shared_errors(self) -> list[str]:
        return sorted({r.shared_error for r in self.results if r.shared_error})

    @property
    def adapter_errors(self) -> list[SliceResult]:
        return [r for r in self.results if r.adapter_error]


def start_client(workers: int | None, scheduler: str | None, dashboard_port: int) -> Any:
    """A Dask client: on a new local cluster of ``workers`` processes with one thread each, or on the
    cluster whose scheduler is at ``scheduler``. The local workers ignore Ctrl-C (a terminal sends it to
    them too): the campaign stops them itself once it has collected what they hold."""
    from distributed import Client, LocalCluster, WorkerPlugin

    if scheduler:
        return Client(scheduler, timeout="20s")

    class IgnoreCtrlC(WorkerPlugin):
        name = "kvexact-ignore-ctrl-c"

        def setup(self, worker: Any) -> None:
            import signal

            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, signal.SIG_IGN)

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=f":{dashboard_port}", silence_logs=40)
    client = Client(cluster)
    client.register_plugin(IgnoreCtrlC())
    return client


def run_campaign(client: Any, campaign: Campaign, counters: Counters, interrupted: threading.Event,
                 parallel: int) -> Outcome:
    """Keep ``parallel`` slices in flight until the budget is spent or a failure is found; then let the
    slices in flight finish their example and collect them. Ctrl-C (KeyboardInterrupt) sets the stop event,
    gives the slices a few seconds to return, and ends the campaign as interrupted."""
    from distributed import Event, as_completed

    stop_name = f"kvexact-stop-{uuid.uuid4().hex}"
    stop = Event(stop_name, client=client)
    client.subscribe_topic(TOPIC, lambda event: counters.record(event[1]))
    deadline = time.monotonic() + campaign.minutes * 60
    outcome = Outcome()
    number = 0

    def submit() -> Any:
        nonlocal number
        piece = campaign.slice(number, max(1.0, deadline - time.monotonic()))
        number += 1
        return client.submit(run_slice, piece, campaign.dbs, stop_name, pure=False,
                             key=f"kvexact-slice-{piece.number}-{piece.spec}-{uuid.uuid4().hex[:8]}")

    pending = as_completed([submit() for _ in range(parallel)], with_results=False)
    try:
        for future in pending:
            try:
                result = future.result()
            except Exception as exc:  # Dask gave up on the slice (its workers kept dying)
                outcome.lost.append(f"{type(exc).__name__}: {str(exc)[:300]}")
                continue
            outcome.results.append(result)
            if interrupted.is_set():
                raise KeyboardInterrupt
            ending = bool(outcome.failures or outcome.adapter_errors or outcome.shared_errors)
            if ending:
                stop.set()
            elif time.monotonic() < deadline - 1.0:
                pending.add(submit())
    except KeyboardInterrupt:
        outcome.interrupted = True
        try:
            stop.set()
            for future in as_completed(list(pending.futures), timeout=10, with_results=False):
                if future.status == "finished":
                    outcome.results.append(future.result())
        except Exception:  # workers stopped by the same Ctrl-C, or not back in time: the counters remain
            pass
    return outcome


def report_lines(outcome: Outcome, counters: Counters, seconds: float) -> list[str]:
    """The campaign's closing report: totals, per-machine rule coverage, restarts, failures."""
    snap = counters.snapshot()
    restarts = counters.restarts()
    lines = [f"fuzz: campaign {'interrupted (Ctrl-C)' if outcome.interrupted else 'done'} after {seconds:.1f} s: "
             f"{snap['slices']} slices, {snap['examples']} examples, {snap['steps']} steps "
             f"({snap['steps'] / seconds if seconds else 0:.1f} steps/s), {len(outcome.failures)} failures, "
             f"{sum(restarts.values())} restarts, {snap['workers_seen']} workers"]
    for spec, m in snap["machines"].items():
        lines.append(f"fuzz:   {spec}: rules fired {m['rules_fired']}/{m['rules']}")
    if restarts:
        lines.append("fuzz:   restarted after a lost worker: " +
                     ", ".join(f"slice {n} ({k} time{'s' if k > 1 else ''})" for n, k in sorted(restarts.items())))
    for lost in outcome.lost:
        lines.append(f"fuzz:   a slice was given up by Dask: {lost}")
    return lines
