"""Mutation testing (``kvexact bench mutation``): cosmic-ray's operators mutate ``reference/`` and the kernels'
host code one mutant at a time, and a killer has to fail with the mutant in place.

A killer is a named pytest selection of the project's tests (``golden``: the reference's golden tests,
``tests/reference/golden/test_golden.py``, run ``-x -q``) or a quick gate check (fixed seed 0, the ``ci`` Hypothesis profile; e.g.
``kernels-differential`` for the kernels' host code). Each killer's line coverage is measured once by coverage.py
on the unmutated code; a mutant is run by the killers that execute one of its lines, cheapest first, in one
subprocess that stops at the first killer that does not pass. A mutant on lines no killer executes is not run: it
survives as "not executed". Triton kernel bodies are left to the hand-written mutants of
:mod:`kvexact.kernels.mutants`.

Invariant: a mutant counts as killed only when a killer did not pass (or the probe ran out of time) with the
mutant in place; equivalent mutants are read from ``equivalent_mutants.toml`` (each with its reason) and are
reported as such, never dropped; the score of a module is killed / (mutants - equivalent).
"""

from __future__ import annotations

import ast
import enum
import fnmatch
import hashlib
import json
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

EQUIVALENTS_FILE = Path(__file__).with_name("equivalent_mutants.toml")
ROOTS = ("reference", "kernels", "conformance")
DEFAULT_MODULES = ("reference.*", "kernels.paged", "kernels.shared", "kernels.device")
# the failure lab's deliberately faulty variants, the timing harness of `kvexact bench reference`, and the
# seed's worked numbers (oracles, not code, in reference.labs.formulas_golden)
EXCLUDED = ("reference.labs.*", "reference.bench", "conformance.live.*")
# deliberately faulty adapters kept beside the correct ones (the gate must catch them): like the failure lab, they
# are bugs on purpose, not code behind an adapter, so no mutant is made inside them (module -> top-level names)
FAULTY_DEFINITIONS = {
    "conformance.simple_runtime": ("faulty_no_cow", "faulty_stale_generation"),
    "reference.peers.sglang_protocol": ("UnlockedPrefixAdapter", "PageOverrunAdapter", "faulty_page_overrun",
                                        "faulty_unlocked_prefix"),
}
# ``--target adapter``: definitions in the adapter modules that no adapter calls (module -> qualified name -> what
# calls them instead). A mutant inside one changes nothing an adapter does, so it is judged equivalent with this
# reason; it is still made, run and counted under ``--target reference``
UNCALLED_BY_ADAPTERS = {
    "reference.peers.sglang_adapter": {
        **{f"SGLangAdapter.{name}": "the profile's slot-level API, which the golden cases and `kvexact diff sglang` "
                                    "drive; the prefix-index adapter calls admit, finish, evict and partition only"
           for name in ("_key", "reserve", "match", "insert", "release", "lock", "unlock", "checkpoint",
                        "slot_tokens")},
        "TraceRecord.as_dict": "the golden cases read the profile's call trace; no adapter does",
    },
    "reference.peers.sglang": {
        "RadixCache.create_simulated": "SGLang's constructor for its scheduler's in-batch check and unit tests; the "
                                       "adapter builds its cache with the allocator",
        "RadixCache.touch_prefix": "the profile's scheduler models call it; the adapter's walks go through "
                                   "match_prefix",
        "RadixCache.pretty_print": "a debugging printout",
        "TreeNode.__repr__": "a debugging printout",
    },
    "reference.peers.vllm_protocol": {
        "VllmProtocolAdapter.digest": "the machines never call an adapter's digest (they compare the reference's "
                                      "digests only); the profile's own tests do",
    },
}
# ``--target adapter``: definitions in the adapter modules that are kvexact's own checking code, not code behind an
# adapter (module -> top-level names): the trace recorder of reference/adapters.py and its projections of the
# allocator onto the specs' variables, which the machines' reference runs to validate its own steps, and the
# checks of an adapter's shape the machines run on the object a factory returns. A mutant there
# weakens a check rather than planting a bug in a system under test, so none is made under this target; the
# reference target makes and counts them (the golden cases test the recorder)
CHECKING_CODE = {
    "reference.adapters": ("default_ident", "checker_value", "_requests", "_handle", "_other_refs", "_all_blocks",
                           "_open_txn", "_request_vars", "project_kv_allocation", "no_stale", "snapshot_of",
                           "init_snapshot", "project_cow_publication", "TraceRecorder", "_fn", "project_state",
                           "adapter_protocol", "check_adapter", "adapter_kind", "check_methods"),
}
FAST_CHECKS_LEVEL = "quick"
# pytest selections a mutant may be killed by: name -> paths relative to the repository root. The golden cases'
# own tests only: the mutant tests beside them read the reference's source text, which a mutant on disk changes
PYTEST_SELECTIONS = {"golden": ("tests/reference/golden/test_golden.py",)}
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist")
DEFAULT_KILLERS = ("golden", "kernels-differential")
# ``--target adapter``: the code behind an adapter (the vLLM and SGLang profiles, the reference adapter, the
# example runtime), killed only by what a runtime team runs on its own system: the machines through each
# adapter (their observe() promises, kernels and trace validation included), never the golden cases
ADAPTER_MODULES = ("conformance.simple_runtime", "reference.adapters", "reference.peers.vllm_protocol",
                   "reference.peers.vllm", "reference.peers.vllm_pool", "reference.peers.sglang_protocol",
                   "reference.peers.sglang", "reference.peers.sglang_adapter")
ADAPTER_KILLERS = ("adapter-sglang-index", "adapter-vllm-profile", "adapter-vllm-delayed-caching",
                   "adapter-simple-runtime", "adapter-reference", "machines")
TARGETS = {"reference": (DEFAULT_MODULES, DEFAULT_KILLERS), "adapter": (ADAPTER_MODULES, ADAPTER_KILLERS)}
SKIPPED_BY_TARGET = {"adapter": CHECKING_CODE}  # target -> definitions it makes no mutant in


class MutationRejection(enum.Enum):
    UNKNOWN_MODULE = "unknown module"
    EQUIVALENT_WITHOUT_REASON = "equivalent mutant without a reason"
    BAD_EQUIVALENTS_FILE = "unreadable equivalent-mutants file"
    UNKNOWN_CHECK = "not a quick gate check or a pytest selection"
    NO_TESTS = "the pytest selection is not in this checkout"


class MutationInputError(ValueError):
    def __init__(self, rejection: MutationRejection, detail: str):
        super().__init__(f"{rejection.value}: {detail}")
        self.rejection = rejection


class Outcome(enum.Enum):
    KILLED = "killed"
    TIMEOUT = "killed (timeout)"
    SURVIVED = "survived"
    NOT_EXECUTED = "survived (no killer executes it)"
    EQUIVALENT = "equivalent"
    INCOMPETENT = "incompetent"  # the mutation could not be applied, does not compile, or the probe could not start


KILLED = (Outcome.KILLED, Outcome.TIMEOUT)
SURVIVORS = (Outcome.SURVIVED, Outcome.NOT_EXECUTED)


@attrs.frozen
class Mutant:
    """One cosmic-ray mutation of one module: ``key`` names it across edits that move lines."""

    module: str
    path: Path
    operator: str
    occurrence: int
    line: int
    end_line: int
    before: str
    after: str
    compiles: bool = True  # False when the operator made a module Python cannot compile

    @property
    def key(self) -> str:
        return f"{self.module}|{self.operator}|{self.before.strip()} => {self.after.strip()}"


@attrs.frozen
class MutantResult:
    mutant: Mutant
    outcome: Outcome
    checks: tuple[str, ...] = ()  # the checks the probe ran (cheapest first)
    killed_by: str = ""
    reason: str = ""  # the equivalence reason
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        m = self.mutant
        return {"module": m.module, "line": m.line, "operator": m.operator, "occurrence": m.occurrence,
                "before": m.before.strip(), "after": m.after.strip(), "outcome": self.outcome.value,
                "checks": list(self.checks), "killed_by": self.killed_by, "reason": self.reason,
                "seconds": round(self.seconds, 2)}


def root_dirs() -> dict[str, Path]:
    import kvexact.conformance
    import kvexact.kernels
    import kvexact.reference

    return {"reference": Path(kvexact.reference.__file__).resolve().parent,
            "kernels": Path(kvexact.kernels.__file__).resolve().parent,
            "conformance": Path(kvexact.conformance.__file__).resolve().parent}


def all_modules() -> dict[str, Path]:
    """Every mutable module: ``reference.x`` / ``kernels.x`` -> its file (package ``__init__`` files aside)."""
    out = {}
    for root, folder in root_dirs().items():
        for path in sorted(folder.rglob("*.py")):
            if path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            name = ".".join((root, *path.relative_to(folder).with_suffix("").parts))
            if not any(fnmatch.fnmatchcase(name, pattern) for pattern in EXCLUDED):
                out[name] = path
    return out


def select_modules(patterns: Iterable[str]) -> dict[str, Path]:
    """The modules named by the patterns (fnmatch, e.g. ``reference.prefix`` or ``reference.*``)."""
    known = all_modules()
    chosen: dict[str, Path] = {}
    for pattern in patterns:
        hits = {n: p for n, p in known.items() if fnmatch.fnmatchcase(n, pattern)}
        if not hits:
            raise MutationInputError(MutationRejection.UNKNOWN_MODULE,
                                     f"{pattern!r} names no module; known: reference.*, kernels.paged, ...")
        chosen.update(hits)
    return dict(sorted(chosen.items()))


def jit_lines(source: str) -> set[int]:
    """Lines inside ``@triton.jit`` functions (their bodies are mutated by hand, not by cosmic-ray)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any(
                "jit" in ast.unparse(d).split("(")[0].split(".")[-1] for d in node.decorator_list):
            lines.update(range(node.lineno - len(node.decorator_list), (node.end_lineno or node.lineno) + 1))
    return lines


ANNOTATION_REASON = ("an operator inside an annotation (a function's, or a field's or variable's) under `from "
                     "__future__ import annotations`: a string, never evaluated at run time")


NO_COMPILE_REASON = "the mutated module does not compile (e.g. `**` of a dict display replaced): not a program"


def annotation_only_lines(source: str) -> set[int]:
    """Lines whose every ``|`` sits in a function's parameter or return annotation or in an annotated assignment's
    annotation (an attrs field), in a module that postpones annotations (PEP 563): a ``|`` mutated there changes a
    string nothing evaluates (the project calls no ``get_type_hints``; attrs reads the names, not the types)."""
    tree = ast.parse(source)
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations"
                                                                                  for a in n.names)
               for n in tree.body):
        return set()
    inside: set[tuple[int, int]] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                                  *filter(None, (args.vararg, args.kwarg))) if a.annotation]
            for ann in (*annotations, *filter(None, [node.returns])):
                inside.update((n.lineno, n.col_offset) for n in ast.walk(ann) if isinstance(n, ast.BinOp))
        elif isinstance(node, ast.AnnAssign):
            inside.update((n.lineno, n.col_offset) for n in ast.walk(node.annotation) if isinstance(n, ast.BinOp))
    ors = [(n.lineno, n.col_offset) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr)]
    return {line for line, _c in inside} - {line for line, col in ors if (line, col) not in inside}


def faulty_lines(module: str, source: str, skip: Mapping[str, Iterable[str]] | None = None) -> set[int]:
    """Lines of the module's deliberately faulty definitions (:data:`FAULTY_DEFINITIONS`) and of the definitions
    ``skip`` names for it (:data:`CHECKING_CODE` under ``--target adapter``), decorators included."""
    return set(definition_lines(source, (*FAULTY_DEFINITIONS.get(module, ()), *(skip or {}).get(module, ()))))


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _definitions(source: str, qualified_names: Iterable[str]) -> Iterator[tuple[str, Definition]]:
    """Each named definition (``Class.method`` or a top-level name) with its node."""
    wanted = set(qualified_names)

    def visit(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, Definition]]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + node.name
                if name in wanted:
                    yield name, node
                if isinstance(node, ast.ClassDef):
                    yield from visit(node.body, name + ".")

    yield from visit(ast.parse(source).body, "")


def definition_lines(source: str, qualified_names: Iterable[str]) -> dict[int, str]:
    """``line -> qualified name`` for every line of the named definitions (``Class.method`` or a top-level name,
    decorators included)."""
    out: dict[int, str] = {}
    for name, node in _definitions(source, qualified_names):
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        out.update({line: name for line in range(first, (node.end_lineno or node.lineno) + 1)})
    return out


def _body(node: Definition) -> set[int]:
    """The lines of a definition's body: what runs only when it is called (its header, defaults and annotations
    run when the module is imported)."""
    return set(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))


def body_lines(source: str, name: str) -> set[int]:
    """The lines of the named definition's body (empty when the source has no such definition)."""
    return next((_body(node) for _name, node in _definitions(source, [name])), set())


def uncalled_reason(mutant: Mutant, uncalled: dict[str, dict[str, str]], coverage_map: dict[str, Any]) -> str | None:
    """The equivalence reason of a mutant inside a definition no adapter calls (:data:`UNCALLED_BY_ADAPTERS`): none
    when the mutant is in a decorator, or a passing check executes a line of the definition's body after all (then
    the list is wrong there and the mutant is run). A default or annotation in the header counts as uncalled: it is
    evaluated at import, but used only by a call."""
    names = uncalled.get(mutant.module)
    if not names:
        return None
    for name, node in _definitions(mutant.path.read_text(encoding="utf-8"), names):
        if node.lineno <= mutant.line <= (node.end_lineno or node.lineno):  # a decorator line is left to run
            if _covering_checks(mutant.module, _body(node), coverage_map):
                return None
            return f"inside {name}, which no adapter calls: {names[name]}"
    return None


def enumerate_mutants(modules: dict[str, Path], skip: Mapping[str, Iterable[str]] | None = None) -> list[Mutant]:
    """Every mutant cosmic-ray's argument-free operators make of the modules, outside Triton bodies, the
    deliberately faulty definitions and the definitions ``skip`` names (module -> top-level names); the mutated
    line is filled in later by :func:`with_after`, for the mutants that are run."""
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast_from_path

    operators = [(n, cosmic_ray.plugins.get_operator(n)()) for n in cosmic_ray.plugins.operator_names()
                 if not cosmic_ray.plugins.get_operator(n).arguments()]
    out: list[Mutant] = []
    for module, path in modules.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        skipped = jit_lines(source) | faulty_lines(module, source, skip)
        nodes = list(ast_nodes(get_ast_from_path(path)))
        for name, operator in operators:
            positions = [(s, e) for node in nodes for s, e in operator.mutation_positions(node)]
            out.extend(Mutant(module, path, name, occurrence, start[0], end[0], lines[start[0] - 1], "")
                       for occurrence, (start, end) in enumerate(positions) if start[0] not in skipped)
    return out


def with_after(mutant: Mutant) -> Mutant | None:
    """The mutant with its mutated line, or None when cosmic-ray makes no change there."""
    import cosmic_ray.plugins
    from cosmic_ray.mutating import mutate_code

    mutated = mutate_code(mutant.path.read_text(encoding="utf-8"),
                          cosmic_ray.plugins.get_operator(mutant.operator)(), mutant.occurrence)
    if mutated is None:
        return None
    new_lines = mutated.splitlines()
    try:
        compile(mutated, str(mutant.path), "exec")
        compiles = True
    except SyntaxError:
        compiles = False
    return attrs.evolve(mutant, after=new_lines[mutant.line - 1] if mutant.line <= len(new_lines) else "",
                        compiles=compiles)


def load_equivalents(path: Path = EQUIVALENTS_FILE, target: str | None = None) -> dict[str, str]:
    """``key -> reason`` from the TOML file: ``[[equivalent]]`` tables with ``key`` and ``reason``, and an optional
    ``target`` (a name of :data:`TARGETS`) for a mutant equivalent only under that target (a guard no adapter
    trips is tested under ``reference``). With ``target`` None every entry is returned."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import toml as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MutationInputError(MutationRejection.BAD_EQUIVALENTS_FILE, f"{path}: {exc}") from None
    out = {}
    for i, entry in enumerate(data.get("equivalent", [])):
        key, reason = entry.get("key", ""), str(entry.get("reason", "")).strip()
        if not key or not reason:
            raise MutationInputError(MutationRejection.EQUIVALENT_WITHOUT_REASON,
                                     f"{path}: entry {i + 1} ({key or 'no key'}) needs a key and a reason")
        only = entry.get("target")
        if only is not None and only not in TARGETS:
            raise MutationInputError(MutationRejection.BAD_EQUIVALENTS_FILE,
                                     f"{path}: entry {i + 1} ({key}) names target {only!r}; known: {sorted(TARGETS)}")
        if target is None or only is None or only == target:
            out[key] = reason
    return out


def sample(mutants: list[Mutant], max_mutants: int | None, seed: int) -> list[Mutant]:
    """A uniform sample of at most ``max_mutants``, in an order drawn from the seed, so that the first k of
    an interrupted run are a uniform sample too; all of them, in file order, without a maximum."""
    if max_mutants is None or max_mutants >= len(mutants):
        return list(mutants)
    return [mutants[i] for i in random.Random(seed).sample(range(len(mutants)), max_mutants)]


# ----------------------------------------------------------------------------------------------------
# the coverage map: which reference/kernels lines each killer executes


def sources_digest() -> str:
    """A digest of every mutable module's text and of the gate's own modules (a new case executes new lines): a
    coverage map is reused only for the same sources and checks."""
    h = hashlib.sha256()
    gate = {f"kvexact.gate.{p.stem}": p for p in Path(__file__).parent.glob("*.py")}
    folders = {name: [f if f.is_dir() else f.parent for f in (repo_root() / d for d in paths)]
               for name, paths in PYTEST_SELECTIONS.items()}  # a test file's folder holds its case modules
    tests = {f"tests:{name}:{p.relative_to(d)}": p for name, dirs in folders.items() for d in dirs
             for p in sorted(d.rglob("*.py"))}
    for name, path in sorted({**all_modules(), **gate, **tests}.items()):
        h.update(name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def repo_root() -> Path:
    """The checkout's root (the folder holding ``kvexact/`` and ``tests/``)."""
    import kvexact

    return Path(kvexact.__file__).resolve().parents[1]


def selection_paths(name: str) -> list[str]:
    """The pytest selection's paths in this checkout; :class:`MutationInputError` (NO_TESTS) when one is missing
    (an installed wheel carries no tests)."""
    paths = [repo_root() / p for p in PYTEST_SELECTIONS[name]]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise MutationInputError(MutationRejection.NO_TESTS, f"{name}: {', '.join(missing)}")
    return [str(p) for p in paths]


class _FirstFailure:
    """A pytest plugin keeping the node id of the first test that failed."""

    def __init__(self) -> None:
        self.nodeid = ""

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed and not self.nodeid:
            self.nodeid = report.nodeid


def run_selection(name: str, stop_first: bool = True) -> tuple[bool, str]:
    """Run the pytest selection in this process: whether it passed, and the first failing test's id."""
    import pytest

    first = _FirstFailure()
    args = [*(PYTEST_ARGS if stop_first else PYTEST_ARGS[1:]), f"--rootdir={repo_root()}", *selection_paths(name)]
    code = pytest.main(args, plugins=[first])
    return code == 0, first.nodeid


def run_killer(name: str) -> tuple[bool, str]:
    """Run one killer (a pytest selection, or a quick gate check at seed 0, ``ci`` profile): whether it passed, and
    what it said when it did not."""
    if name in PYTEST_SELECTIONS:
        passed, nodeid = run_selection(name)
        return passed, nodeid or "pytest did not pass"
    from kvexact.gate import framework
    from kvexact.gate.checks import load_checks

    check = {c.name: c for c in load_checks()}[name]
    outcome = framework.run_check(check, framework.GateContext(level=FAST_CHECKS_LEVEL, profile="ci"))
    return (outcome.result.verdict is framework.Verdict.PASSED,
            f"{outcome.result.verdict.value}: {outcome.result.detail[:500]}")


def measure_check(name: str) -> dict[str, Any]:
    """Run one killer under coverage.py (in this fresh process, so import-time lines count; adapter runs are not
    forked here, so their lines count too): ``{"seconds", "passed", "lines": {module: [line, ...]}}``."""
    import coverage

    cov = coverage.Coverage(data_file=None, source=[str(d) for d in root_dirs().values()])
    start = time.perf_counter()
    cov.start()  # before the first import of the code under test, so its import-time lines count
    try:
        from kvexact.conformance import runner

        # an adapter's machine run is forked by default, and coverage.py records only this process: run it here
        runner.isolation = lambda: None  # type: ignore[assignment]
        passed, _said = run_killer(name)
    finally:
        cov.stop()
    by_path = {str(p): n for n, p in all_modules().items()}
    data = cov.get_data()
    lines = {by_path[f]: sorted(data.lines(f) or ()) for f in data.measured_files() if f in by_path}
    return {"seconds": round(time.perf_counter() - start, 2), "passed": passed, "lines": lines}


def fast_checks(only: Iterable[str] = (), default: Iterable[str] = DEFAULT_KILLERS) -> list[str]:
    """The killers: the named ones (pytest selections first, then quick gate checks in the gate's order, then the
    adapter checks of the full level), or by default ``default``. A pytest selection must be in this checkout."""
    from kvexact.gate import framework
    from kvexact.gate.checks import load_checks

    quick = [c.name for c in framework.select_checks(load_checks(), level=FAST_CHECKS_LEVEL)]
    quick += [n for n in ADAPTER_KILLERS if n not in quick]  # run at the quick level's size like the others
    only = list(only) or list(default)
    unknown = [n for n in only if n not in quick and n not in PYTEST_SELECTIONS]
    if unknown:
        raise MutationInputError(MutationRejection.UNKNOWN_CHECK, f"{', '.join(unknown)}; the pytest selections are "
                                 f"{', '.join(PYTEST_SELECTIONS)}, the quick checks {', '.join(quick)}")
    for name in PYTEST_SELECTIONS:
        if name in only:
            selection_paths(name)
    return [n for n in [*PYTEST_SELECTIONS, *quick] if n in only]


def measure_coverage(status: Callable[[str], None] = lambda _t: None, only: Iterable[str] = ()) -> dict[str, Any]:
    """The coverage map: every killer (the defaults, or the ``only`` ones) run once, each in its own process, under
    coverage.py: ``{"digest", "checks": {name: measure_check(name)}}``."""
    import subprocess
    import tempfile

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in fast_checks(only):
            status(f"coverage of {name} ...")
            target = Path(tmp) / f"{name}.json"
            done = subprocess.run([sys.executable, "-m", "kvexact.gate.mutation", "--measure", name,
                                   str(target)], capture_output=True, text=True)
            if done.returncode != 0 or not target.exists():
                out[name] = {"seconds": 0.0, "passed": False, "lines": {},
                             "error": (done.stdout + done.stderr)[-300:]}
            else:
                out[name] = json.loads(target.read_text(encoding="utf-8"))
            c = out[name]
            status(f"  {name}: {'passed' if c['passed'] else 'NOT PASSED'} in {c['seconds']} s, "
                   f"{sum(map(len, c['lines'].values()))} lines")
    return {"digest": sources_digest(), "checks": out}


def checks_for(mutant: Mutant, coverage_map: dict[str, Any]) -> tuple[str, ...]:
    """The passing killers that execute a line of the mutant, cheapest first."""
    return _covering_checks(mutant.module, set(range(mutant.line, mutant.end_line + 1)), coverage_map)


def _covering_checks(module: str, lines: set[int], coverage_map: dict[str, Any]) -> tuple[str, ...]:
    """The passing killers that execute one of ``lines`` of ``module``, cheapest first."""
    hits = [(c["seconds"], name) for name, c in coverage_map["checks"].items()
            if c["passed"] and lines & set(c["lines"].get(module, ()))]
    return tuple(name for _s, name in sorted(hits))


# ----------------------------------------------------------------------------------------------------
# running


def probe_command(checks: Iterable[str]) -> str:
    return f"{sys.executable} -m kvexact.gate.mutation {','.join(checks)}"


def run_mutant(mutant: Mutant, checks: tuple[str, ...], timeout: float) -> MutantResult:
    """Apply the mutant on disk (cosmic-ray restores the file afterwards) and run the probe."""
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_item import MutationSpec, TestOutcome, WorkerOutcome

    spec = MutationSpec(module_path=mutant.path, operator_name=mutant.operator, occurrence=mutant.occurrence,
                        start_pos=(mutant.line, 0), end_pos=(mutant.line, 1))
    start = time.perf_counter()
    result = mutate_and_test([spec], probe_command(checks), timeout)
    seconds = time.perf_counter() - start
    if result.worker_outcome is not WorkerOutcome.NORMAL or result.test_outcome is TestOutcome.INCOMPETENT:
        return MutantResult(mutant, Outcome.INCOMPETENT, checks, reason=(result.output or "")[-300:],
                            seconds=seconds)
    if result.test_outcome is TestOutcome.SURVIVED:
        return MutantResult(mutant, Outcome.SURVIVED, checks, seconds=seconds)
    if result.output == "timeout":
        return MutantResult(mutant, Outcome.TIMEOUT, checks, killed_by="timeout", seconds=seconds)
    marker = [ln for ln in (result.output or "").splitlines() if ln.startswith("killed-by: ")]
    return MutantResult(mutant, Outcome.KILLED, checks, killed_by=marker[-1][11:] if marker else "?",
                        seconds=seconds)


def run_mutants(mutants: list[Mutant], coverage_map: dict[str, Any], equivalents: dict[str, str],
                timeout_factor: float = 4.0, on_result: Callable[[int, int, MutantResult], None] | None = None,
                runner: Callable[[Mutant, tuple[str, ...], float], MutantResult] = run_mutant,
                uncalled: dict[str, dict[str, str]] | None = None) -> list[MutantResult]:
    """Judge each mutant in order: equivalent (from the file, or inside a definition of ``uncalled`` whose body no
    check executes), not executed, or run by ``runner``."""
    results = []
    for i, bare in enumerate(mutants):
        mutant = with_after(bare) if not bare.after else bare
        if mutant is None:
            continue  # cosmic-ray offered a position it then does not change
        checks = checks_for(mutant, coverage_map)
        if mutant.key in equivalents:
            result = MutantResult(mutant, Outcome.EQUIVALENT, checks, reason=equivalents[mutant.key])
        elif uncalled and (why := uncalled_reason(mutant, uncalled, coverage_map)) is not None:
            result = MutantResult(mutant, Outcome.EQUIVALENT, checks, reason=why)
        elif mutant.operator.startswith("core/ReplaceBinaryOperator_BitOr_") and mutant.line in annotation_only_lines(
                mutant.path.read_text(encoding="utf-8")):
            result = MutantResult(mutant, Outcome.EQUIVALENT, checks, reason=ANNOTATION_REASON)
        elif not mutant.compiles:
            result = MutantResult(mutant, Outcome.INCOMPETENT, checks, reason=NO_COMPILE_REASON)
        elif not checks:
            result = MutantResult(mutant, Outcome.NOT_EXECUTED)
        else:
            budget = sum(coverage_map["checks"][c]["seconds"] for c in checks)
            result = runner(mutant, checks, 60.0 + timeout_factor * budget)
        results.append(result)
        if on_result is not None:
            on_result(i, len(mutants), result)
    return results


def rejudge_list(previous: dict[str, Any], every: list[Mutant]) -> tuple[list[Mutant], list[str]]:
    """The mutants a previous ``--json`` report left unkilled (survived or not executed), found by key in today's
    sources (lines may have moved), in the report's order; and the keys no longer found (the line changed)."""
    wanted = [m for m in previous.get("mutants", [])
              if m.get("outcome") in {o.value for o in SURVIVORS}]
    by_line: dict[tuple[str, str, str], list[Mutant]] = {}
    for m in every:
        by_line.setdefault((m.module, m.operator, m.before.strip()), []).append(m)
    found: list[Mutant] = []
    missing: list[str] = []
    for entry in wanted:
        key = f"{entry['module']}|{entry['operator']}|{entry['before']} => {entry['after']}"
        hits = [full for m in by_line.get((entry["module"], entry["operator"], entry["before"]), [])
                if (full := with_after(m)) is not None and full.key == key]
        if hits:
            # several occurrences can give the same line (two equal sub-expressions): the one nearest the old line
            found.append(min(hits, key=lambda m: abs(m.line - int(entry.get("line", 0)))))
        else:
            missing.append(key)
    return found, missing


def second_stage(results: list[MutantResult], coverage_map: dict[str, Any], timeout_factor: float = 4.0,
                 on_result: Callable[[int, int, MutantResult], None] | None = None,
                 runner: Callable[[Mutant, tuple[str, ...], float], MutantResult] = run_mutant) -> list[MutantResult]:
    """Probe each survivor (run or not executed) on a line that a check of ``coverage_map`` executes with those
    checks (e.g. the costly ``machines`` check after the cheap ones); a kill replaces the survivor, a survivor
    keeps "survived" with every check that ran. The others are returned unchanged, in the same order."""
    todo = [i for i, r in enumerate(results) if r.outcome in SURVIVORS and checks_for(r.mutant, coverage_map)]
    out = list(results)
    for n, i in enumerate(todo):
        r = results[i]
        checks = checks_for(r.mutant, coverage_map)
        budget = sum(coverage_map["checks"][c]["seconds"] for c in checks)
        second = runner(r.mutant, checks, 60.0 + timeout_factor * budget)
        if second.outcome is Outcome.INCOMPETENT:
            second = r
        elif second.outcome is Outcome.SURVIVED:
            second = attrs.evolve(second, checks=(*r.checks, *checks), seconds=r.seconds + second.seconds)
        out[i] = second
        if on_result is not None:
            on_result(n, len(todo), second)
    return out


@attrs.frozen
class ModuleScore:
    module: str
    mutants: int
    killed: int
    survived: int
    not_executed: int
    equivalent: int
    incompetent: int

    @property
    def score(self) -> float | None:
        judged = self.mutants - self.equivalent - self.incompetent
        return self.killed / judged if judged else None


def scores(results: list[MutantResult]) -> list[ModuleScore]:
    """Per module, then a ``total`` row."""
    def row(name: str, rs: list[MutantResult]) -> ModuleScore:
        n = {o: sum(r.outcome is o for r in rs) for o in Outcome}
        return ModuleScore(name, len(rs), n[Outcome.KILLED] + n[Outcome.TIMEOUT], n[Outcome.SURVIVED],
                           n[Outcome.NOT_EXECUTED], n[Outcome.EQUIVALENT], n[Outcome.INCOMPETENT])

    modules = sorted({r.mutant.module for r in results})
    return [*(row(m, [r for r in results if r.mutant.module == m]) for m in modules), row("total", results)]


def render_table(rows: list[ModuleScore]) -> str:
    lines = ["| module | mutants | killed | survived (run) | not executed | equivalent | incompetent | score |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        score = "n/a" if r.score is None else f"{100 * r.score:.0f}%"
        lines.append(f"| {r.module} | {r.mutants} | {r.killed} | {r.survived} | {r.not_executed} | {r.equivalent} "
                     f"| {r.incompetent} | {score} |")
    return "\n".join(lines) + "\n"


def survivors_text(results: list[MutantResult]) -> str:
    lines = []
    for r in results:
        if r.outcome in SURVIVORS or r.outcome is Outcome.EQUIVALENT:
            m = r.mutant
            why = f" ({r.reason})" if r.reason else ""
            lines.append(f"- {m.module}:{m.line} {m.operator.removeprefix('core/')}: `{m.before.strip()}` -> "
                         f"`{m.after.strip()}` [{r.outcome.value}]{why}")
    return "\n".join(lines) + ("\n" if lines else "")


def report(results: list[MutantResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {**meta, "scores": [{**attrs.asdict(r), "score": r.score} for r in scores(results)],
            "mutants": [r.as_dict() for r in results]}


# ----------------------------------------------------------------------------------------------------
# the probe: ``python -m kvexact.gate.mutation KILLER[,KILLER...]`` (the per-mutant test command)


def probe(names: list[str]) -> int:
    """Run the named killers in order; exit 1 at the first that does not pass (printing ``killed-by: NAME``, with
    the first failing test of a pytest selection), 0 when all pass."""
    for name in names:
        passed, said = run_killer(name)
        if not passed:
            print(f"{name}: {said}")
            print(f"killed-by: {name} ({said})" if name in PYTEST_SELECTIONS else f"killed-by: {name}")
            return 1
    return 0


def write_json(path: Path, data: dict[str, Any]) -> None:
    from kvexact.spec.files import write_atomic

    write_atomic(path, json.dumps(data, indent=1) + "\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--measure"]:
        write_json(Path(argv[2]), measure_check(argv[1]))
        return 0
    return probe([n for arg in argv for n in arg.split(",") if n])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
