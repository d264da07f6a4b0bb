"""An adapter cannot make a check pass (or end the command) by ending the process: ``sys.exit`` in a call,
``os._exit``, SIGSEGV and SIGABRT are failing checks naming the adapter, the call and its arguments, with a
reproduction; ``sys.exit`` at import and a raising factory are usage errors; adapters get copies of lists."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import settings

from kvexact.conformance.guard import AdapterFault, AdapterFaultError, death_message, freeze
from kvexact.conformance.runner import run_machine
from kvexact.reference.adapters import AdapterError, AdapterProblem

FEW = ["--no-kernels", "--spec", "KVAllocation", "--examples", "10", "--steps", "10"]

# an allocator that dies (as ``DIE`` says) when a request starts with a prompt of three tokens or more
DYING = textwrap.dedent("""\
    import os, signal, sys
    from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator
    class Dies(SimpleRuntimeAllocator):
        def start(self, request_id, prompt):
            if len(prompt) >= 3:
                {die}
            return super().start(request_id, prompt)
    def factory(config):
        return Dies(config)
    """)

DEATHS = {
    "sys_exit_0": "sys.exit(0)",
    "os_exit_0": "os._exit(0)",
    "segv": "os.kill(os.getpid(), signal.SIGSEGV)",
    "abort": "os.abort()",
}


@pytest.fixture
def module(tmp_path, monkeypatch, request):
    """``module(name, source)`` -> the importable name of a fresh module (unique per test)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    prefix = "kvx_guard_" + request.node.name.split("[")[0].removeprefix("test_")[:30]
    prefix += f"_{sum(map(ord, request.node.name))}"  # parametrized runs import different modules

    def make(kind: str, source: str) -> str:
        name = f"{prefix}_{kind}"
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
        return name

    return make


@pytest.mark.parametrize("kind, fault", [("sys_exit_0", AdapterFault.EXITED), ("os_exit_0", AdapterFault.PROCESS_ENDED),
                                         ("segv", AdapterFault.KILLED_BY_SIGNAL), ("abort", AdapterFault.KILLED_BY_SIGNAL)])
def test_an_adapter_that_ends_the_process_fails_conform_naming_the_call(kvexact_cli, module, tmp_path, kind, fault):
    name = module(kind, DYING.format(die=DEATHS[kind]))
    out = tmp_path / "out"
    code, text = kvexact_cli(["conform", "--adapter", f"{name}:factory", *FEW, "--out", str(out)]).code_and_text
    assert code == 1, text
    assert "Traceback" not in text and "internal error" not in text
    line = next(ln for ln in text.splitlines() if ln.startswith("AdapterFaultError: "))
    assert fault.name in line and f"{name}:factory" in line and "start('r" in line, line
    repros = list(out.glob("test_repro_KVAllocation_*.py"))
    assert len(repros) == 1, text
    if fault is not AdapterFault.EXITED:  # the replay script makes the calls again and dies again
        r = subprocess.run([sys.executable, str(repros[0])], capture_output=True, text=True, timeout=120,
                           env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
        assert r.returncode != 1 and "Traceback" not in r.stderr, r.stderr
        assert (r.returncode < 0) == (fault is AdapterFault.KILLED_BY_SIGNAL)


def test_an_adapter_that_calls_sys_exit_0_fails_fuzz_and_the_gate(kvexact_cli, module, tmp_path):
    name = module("exit0", DYING.format(die="sys.exit(0)"))
    code, text = kvexact_cli(["fuzz", "--minutes", "0.5", "--adapter", f"{name}:factory", "--no-kernels",
                              "--examples-per-round", "10", "--steps", "10", "--out", str(tmp_path)]).code_and_text
    assert code == 1 and "EXITED" in text, text
    code, text = kvexact_cli(["gate", "--select", "machines", "--adapter", f"{name}:factory"]).code_and_text
    assert code == 1 and "EXITED" in text, text


def test_os_exit_in_a_machine_run_is_a_failed_run_not_the_end_of_the_process(module):
    name = module("os_exit_7", DYING.format(die="os._exit(7)"))
    few = settings(max_examples=10, stateful_step_count=10, deadline=None, database=None, derandomize=True)
    run = run_machine("KVAllocation", f"{name}:factory", few, check_kernels=False)
    assert not run.passed and run.reproduce is None
    assert run.error.startswith("AdapterFaultError: PROCESS_ENDED:") and "exit status 7" in run.error
    assert "adapter.start(" in run.replay and "factory(AdapterConfig(" in run.replay


def test_the_death_message_names_the_running_call_and_the_config():
    log = ["factory AdapterConfig(block_tokens=2)", "block_ids(0)", "start('r0', (1, 2, 3))"]
    text = death_message("m:f", "KVAllocation", "was killed by signal SIGSEGV", log)
    assert text == ("AdapterFaultError: KILLED_BY_SIGNAL: the process running --adapter m:f in the KVAllocation "
                    "machine was killed by signal SIGSEGV during start('r0', (1, 2, 3)) (call 2 on the adapter "
                    "built by factory(AdapterConfig(block_tokens=2)))")
    assert "while building the adapter" in death_message("m:f", "Radix", "ended with exit status 3 and no result",
                                                          log[:1])
    assert AdapterFaultError(AdapterFault.EXITED, "x").fault is AdapterFault.EXITED


def test_sys_exit_at_import_is_a_usage_error(kvexact_cli, module):
    name = module("import_exit", "import sys\nsys.exit(7)\ndef factory(config):\n    pass\n")
    code, text = kvexact_cli(["conform", "--adapter", f"{name}:factory", *FEW]).code_and_text
    assert code == 2, text
    assert f"importing {name} called sys.exit(7)" in text and "Traceback" not in text
    from kvexact.conformance.adapter_border import load_adapter

    with pytest.raises(AdapterError) as exc:
        load_adapter(f"{name}:factory")
    assert exc.value.problem is AdapterProblem.IMPORT_FAILED


@pytest.mark.parametrize("body, says", [("raise OSError('cannot open /dev/nvidia0')", "raised OSError: cannot open /dev/nvidia0"),
                                        ("sys.exit(0)", "called sys.exit(0)")])
def test_a_factory_that_raises_or_exits_is_a_usage_error_naming_it(kvexact_cli, module, body, says):
    name = module("factory", f"import sys\ndef factory(config):\n    {body}\n")
    for command in (["conform", *FEW], ["gate", "--select", "machines"]):
        code, text = kvexact_cli([*command, "--adapter", f"{name}:factory"]).code_and_text
        assert code == 2, text
        assert f"--adapter {name}:factory: the factory {says}" in text and "internal error" not in text


MUTATES = textwrap.dedent("""\
    from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator
    class Mutates(SimpleRuntimeAllocator):
        def start(self, request_id, prompt):
            result = super().start(request_id, list(prompt))
            prompt.clear()  # the caller's list, were it handed over
            return result
    def factory(config):
        return Mutates(config)
    """)


def test_an_adapter_cannot_mutate_the_callers_prompt(kvexact_cli, module, tmp_path):
    """The machine's prompt is handed over as a tuple: the adapter's ``clear`` fails as its own error (a failing
    check naming it), and the machine's list is untouched."""
    name = module("mutates", MUTATES)
    code, text = kvexact_cli(["conform", "--adapter", f"{name}:factory", *FEW, "--out", str(tmp_path)]).code_and_text
    assert code == 1, text
    assert "AttributeError: 'tuple' object has no attribute 'clear'" in text, text


def test_freeze_makes_nested_lists_tuples():
    prompt = [1, [2, 3]]
    assert freeze(("r0", prompt)) == ("r0", (1, (2, 3))) and prompt == [1, [2, 3]]


def test_a_call_stuck_where_the_timer_cannot_reach_is_stopped_and_fails_naming_it(kvexact_cli, module, tmp_path):
    """A call that blocks the per-call timer's signal (as a call stuck in C code never returns to the
    interpreter) is killed by the parent once no adapter call came for 2 x limit + 10 s: HUNG, exit 1, the
    call named, a replay written; never a hang of the command."""
    from kvexact.conformance.runner import stall_limit

    name = module("stuck", DYING.format(die="signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM}); "
                                            "time.sleep(3600)").replace("import os, signal, sys",
                                                                          "import os, signal, sys, time"))
    out = tmp_path / "out"
    code, text = kvexact_cli(["conform", "--adapter", f"{name}:factory", *FEW, "--call-timeout", "0.5",
                              "--out", str(out)]).code_and_text
    assert code == 1, text
    line = next(ln for ln in text.splitlines() if ln.startswith("AdapterFaultError: "))
    assert "HUNG" in line and f"stopped by kvexact after {stall_limit(0.5):g} s" in line and "start('r" in line, line
    assert len(list(out.glob("test_repro_KVAllocation_*.py"))) == 1, text
    assert stall_limit(0) == 0 and stall_limit(60) == 130


def test_a_run_with_an_in_memory_database_is_forked_and_its_saves_come_back(module):
    """An in-memory example database does not keep a run in this process: the adapter's ``os._exit`` is a
    failed run, and the failing examples the forked child saved are in this process's database after it."""
    from hypothesis.database import InMemoryExampleDatabase

    dying = module("os_exit_mem", DYING.format(die="os._exit(0)"))
    raising = module("raises_mem", DYING.format(die="raise ValueError('no room for this prompt')"))
    for name, says in ((dying, "AdapterFaultError: PROCESS_ENDED:"), (raising, "ValueError: no room")):
        db = InMemoryExampleDatabase()
        few = settings(max_examples=10, stateful_step_count=10, deadline=None, database=db)
        run = run_machine("KVAllocation", f"{name}:factory", few, seed=3, check_kernels=False)
        assert not run.passed and run.error.startswith(says), run.error
    assert any(db.data.values()), "the child's saves of the failing example did not come back"


def test_a_lost_shared_database_in_the_forked_run_is_recorded_here(module):
    """A shared database that stops answering inside the forked run carries the error in this process."""
    from hypothesis.database import ExampleDatabase, InMemoryExampleDatabase, MultiplexedDatabase

    from kvexact.conformance.campaign_db import SharedDatabase

    class Gone(ExampleDatabase):
        def fetch(self, key):
            raise ConnectionError("Connection refused")

        def save(self, key, value):
            raise ConnectionError("Connection refused")

        def delete(self, key, value):
            raise ConnectionError("Connection refused")

    shared = SharedDatabase(Gone(), "redis://127.0.0.1:1/0")
    raising = module("raises_shared", DYING.format(die="raise ValueError('no room for this prompt')"))
    few = settings(max_examples=10, stateful_step_count=10, deadline=None,
                   database=MultiplexedDatabase(InMemoryExampleDatabase(), shared))
    run = run_machine("KVAllocation", f"{raising}:factory", few, seed=3, check_kernels=False)
    assert not run.passed
    assert shared.error == "ConnectionError: Connection refused"


def test_a_stoppable_run_is_forked_shows_its_counters_and_stops_when_asked(module, tmp_path):
    """As in a campaign worker (a stop event, a live counters dict): the run goes to a child, its counters
    move here while it runs, and setting the event ends it after the example in progress, as passed."""
    import os
    import threading
    import time

    pids = tmp_path / "pids"
    name = module("pid", textwrap.dedent(f"""\
        import os
        from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator
        def factory(config):
            with open({str(pids)!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
            return SimpleRuntimeAllocator(config)
        """))
    live: dict[str, dict[str, int]] = {}
    seen: list[int] = []
    stop = threading.Event()

    def stopper() -> None:
        for _ in range(1200):  # at most 120 s
            if live.get("stats", {}).get("examples", 0) >= 3:
                seen.append(live["stats"]["examples"])
                break
            time.sleep(0.1)
        stop.set()

    thread = threading.Thread(target=stopper)
    thread.start()
    many = settings(max_examples=100_000, stateful_step_count=10, deadline=None, database=None)
    run = run_machine("KVAllocation", f"{name}:factory", many, seed=1, check_kernels=False,
                      watch=lambda stats: live.update(stats=stats), stop=stop)
    thread.join()
    assert seen and seen[0] >= 3, "the counters never moved while the run was going"
    assert run.passed and seen[0] <= run.examples < 100_000, run
    assert os.getpid() not in {int(p) for p in pids.read_text().split()}


def test_only_databases_whose_state_can_come_back_are_forked():
    from hypothesis.database import (
        DirectoryBasedExampleDatabase,
        InMemoryExampleDatabase,
        MultiplexedDatabase,
        ReadOnlyDatabase,
    )

    from kvexact.conformance.fork_state import can_fork_with

    class Spy(InMemoryExampleDatabase):
        pass

    assert can_fork_with(None) and can_fork_with(InMemoryExampleDatabase())
    assert can_fork_with(MultiplexedDatabase(DirectoryBasedExampleDatabase("x"),
                                             ReadOnlyDatabase(InMemoryExampleDatabase())))
    assert not can_fork_with(Spy()) and not can_fork_with(MultiplexedDatabase(InMemoryExampleDatabase(), Spy()))


def test_with_a_cuda_context_open_a_machine_run_goes_to_a_spawned_interpreter(module, monkeypatch):
    """A process holding a CUDA context cannot fork a usable child: the run goes to a fresh interpreter
    (``spawn``), with the same verdicts and the database's saves handed back. (The context is simulated:
    ``cuda_open`` is made true; what differs is only how the child starts.)"""
    from hypothesis.database import InMemoryExampleDatabase

    from kvexact.conformance import guard

    monkeypatch.setattr(guard, "cuda_open", lambda: True)
    assert guard.isolation() == "spawn"
    dying = module("spawn_exit", DYING.format(die="os._exit(0)"))
    raising = module("spawn_raises", DYING.format(die="raise ValueError('no room for this prompt')"))
    few = settings(max_examples=10, stateful_step_count=10, deadline=None, database=None)
    run = run_machine("KVAllocation", f"{dying}:factory", few, seed=3, check_kernels=False)
    assert not run.passed and run.error.startswith("AdapterFaultError: PROCESS_ENDED:"), run.error
    assert "adapter.start(" in run.replay
    db = InMemoryExampleDatabase()
    run = run_machine("KVAllocation", f"{raising}:factory", settings(few, database=db), seed=3, check_kernels=False)
    assert not run.passed and run.error.startswith("ValueError: no room"), run.error
    assert any(db.data.values())
    passing = run_machine("KVAllocation", "kvexact.conformance.simple_runtime:simple_runtime", few, seed=3,
                          check_kernels=False)
    monkeypatch.setattr(guard, "cuda_open", lambda: False)
    forked = run_machine("KVAllocation", "kvexact.conformance.simple_runtime:simple_runtime", few, seed=3,
                         check_kernels=False)
    assert passing.passed and forked.passed and passing.examples >= 10, (passing, forked)
