"""Which files a reader follows one copy-on-write append through (issue 15), measured, not listed by hand.

Runs the CowPublication machine as Hypothesis would: start ``r0`` with three tokens (a partial tail at two
tokens a block), fork it into ``r1`` (the tail is shared), each followed by the machine's invariants.
Then, under ``sys.setprofile``, the ``append`` rule onto the child's shared partial tail (the copy on
write), the invariants that check the step (:data:`FOLLOWED`: the reference's self-check and the spec's
invariants on the recorded state) and the trace validation that runs at teardown. Every project function
called there names its file. Not followed: ``pool_gauges_reconcile`` (the telemetry gauges of 0x0CF, a
check of their own formulas) and ``check_attention`` (a rule of its own, also run at teardown). A file counts when a reader must read it to know what the append
does or how it is checked, with the spec the check reads; :data:`EXCLUDED` names the others, each with
its reason (modules of types and helpers only, the device policy's tensor factories among them, and the
checker's engine below ``load_model`` and ``check_step``). A file reached that is in neither list counts, so a new hop shows up.

    .venv/bin/python scripts/trace_append_files.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPEC = "CowPublication"

# files reached that a reader need not open, with the reason (paths relative to the repository root)
EXCLUDED = {
    "conformance/machines/__init__.py": "helpers: the failure type and the rule counter",
    "reference/handles.py": "types: the block handle record",
    "conformance/line_schemas.py": "helpers: the trace line schema",
    "spec/__init__.py": "helpers: where the specs lie (spec_dir)",
    "kernels/device.py": "helpers: the device policy's tensor factories (the device the mirror's rows and index "
                         "tensors are made on; which rows and which copy are in conformance/mirror.py)",
    "spec/CowPublication.cfg": "the model's configuration: its constants and invariant names",
}
FOLLOWED = ("reference_is_consistent", "projection_keeps_the_spec_invariants", "sut_is_consistent")
ENGINE = "spec/checker/"  # the checker's engine below load_model and check_step ...
ENGINE_FRONT = "spec/checker/model.py"  # ... which counts


def _relative(filename: str) -> str | None:
    if not Path(filename).is_file():
        return None
    try:
        path = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return None if path.parts[0] in (".venv", "scripts") else path.as_posix()


def excluded_reason(path: str) -> str | None:
    """Why ``path`` does not count, or None when it does."""
    if path in EXCLUDED:
        return EXCLUDED[path]
    if path.startswith(ENGINE) and path != ENGINE_FRONT:
        return "the checker's engine below load_model and check_step"
    return None


def _invariants(machine: Any, names: tuple[str, ...] | None = None) -> None:
    """Run the machine's invariants (``names``: only those), as Hypothesis does after a step."""
    for name in dir(type(machine)):
        if getattr(getattr(type(machine), name), "hypothesis_stateful_invariant", None) is not None:
            if names is None or name in names:
                getattr(machine, name)()


def trace_append() -> dict[str, list[str]]:
    """Each project file reached by one copy-on-write append, with the functions called there, in order."""
    from kvexact.conformance.machines.allocator import machine_class
    from kvexact.spec import spec_dir

    machine = machine_class(SPEC, check_kernels=True, validate_trace=True)()
    _invariants(machine)
    parent = machine.start("home", [1, 2, 3], 3)
    _invariants(machine)
    child = machine.fork(parent)
    _invariants(machine)
    assert len(child.tokens) % machine.config.block_tokens, "the child's tail must be partial"

    reached: dict[str, list[str]] = {}

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_code.co_qualname == "<module>":
            return  # a module imported on the way runs its body once per process: not a call of the append
        path = _relative(frame.f_code.co_filename)
        if path is not None:
            names = reached.setdefault(path, [])
            if frame.f_code.co_qualname not in names:
                names.append(frame.f_code.co_qualname)

    copies = machine.device.copies
    sys.setprofile(profile)
    try:
        machine.append(child, 3)
        _invariants(machine, FOLLOWED)
        machine._validate_trace()
    finally:
        sys.setprofile(None)
    assert child.tokens == [1, 2, 3, 3] and machine.device.copies > copies, "the append must copy on write"
    assert machine.stats["trace_steps"] > 0, "the trace was validated"
    for suffix in (".tla", ".cfg"):  # the spec and its model, read by the check (files, not functions)
        spec_file = _relative(str(spec_dir() / f"{SPEC}{suffix}"))
        assert spec_file is not None
        reached.setdefault(spec_file, ["(the spec and its model, read by load_model)"])
    return reached


def counted(reached: dict[str, list[str]]) -> list[str]:
    """The files that count, in the order the append reaches them."""
    return [p for p in reached if excluded_reason(p) is None]


def main() -> int:
    reached = trace_append()
    counted_files = counted(reached)
    print(f"One copy-on-write append of the {SPEC} machine crosses {len(counted_files)} files:")
    for path in counted_files:
        names = [n for n in reached[path] if "<" not in n]  # named functions, not comprehensions
        print(f"  {path}: {', '.join(names[:5])}{f' and {len(names) - 5} more' if len(names) > 5 else ''}")
    print("Not counted:")
    for path in reached:
        reason = excluded_reason(path)
        if reason is not None:
            print(f"  {path}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
