"""The mutation bench's pieces (kvexact.gate.mutation): module choice, equivalents, sampling, the per-mutant
check choice from the coverage map, the verdicts and scores, the probe, and the CLI's usage errors. The
mutation runs themselves are benchmarks (``kvexact bench mutation``), not tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvexact.gate import mutation as mu


def _mutant(module: str = "reference.handles", line: int = 10, before: str = "x = a < b", after: str = "x = a > b",
            operator: str = "core/ReplaceComparisonOperator_Lt_Gt") -> mu.Mutant:
    return mu.Mutant(module, Path("/nowhere.py"), operator, 0, line, line, before, after)


COVERAGE = {"digest": "-", "checks": {
    "slow": {"seconds": 50.0, "passed": True, "lines": {"reference.handles": [10, 11]}},
    "fast": {"seconds": 2.0, "passed": True, "lines": {"reference.handles": [10]}},
    "broken": {"seconds": 1.0, "passed": False, "lines": {"reference.handles": [10]}},
    "other": {"seconds": 1.0, "passed": True, "lines": {"reference.prefix": [10]}},
}}


def test_default_modules_are_reference_and_kernel_host_code_without_the_failure_lab():
    chosen = mu.select_modules(mu.DEFAULT_MODULES)
    assert "reference.prefix" in chosen and "kernels.paged" in chosen
    assert not [n for n in chosen if n.startswith("reference.labs.")]
    assert "kernels.mutants" not in chosen and "reference.bench" not in chosen


def test_the_adapter_target_mutates_the_code_behind_the_adapters_and_is_killed_by_their_machines_only():
    modules, killers = mu.TARGETS["adapter"]
    chosen = mu.select_modules(modules)
    assert {"conformance.simple_runtime", "reference.adapters", "reference.peers.vllm_protocol",
            "reference.peers.sglang_protocol"} <= set(chosen)
    assert "golden" not in killers and "kernels-differential" not in killers
    assert mu.fast_checks((), killers) == ["machines", "adapter-sglang-index", "adapter-vllm-profile",
                                            "adapter-vllm-delayed-caching", "adapter-simple-runtime",
                                            "adapter-reference"]
    assert not [n for n in mu.all_modules() if n.startswith("conformance.live.")]  # needs the runtimes' env


def test_cli_lists_the_adapter_targets_modules():
    done = subprocess.run([sys.executable, "-m", "kvexact.cli", "bench", "mutation", "--target", "adapter", "--list"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "conformance.simple_runtime" in done.stdout and "reference.peers.vllm_protocol" in done.stdout
    assert "reference.prefix " not in done.stdout


def test_unknown_module_is_rejected_by_name():
    with pytest.raises(mu.MutationInputError) as err:
        mu.select_modules(["reference.nope"])
    assert err.value.rejection is mu.MutationRejection.UNKNOWN_MODULE


def test_equivalent_without_a_reason_and_a_bad_file_are_rejected_by_name(tmp_path):
    path = tmp_path / "eq.toml"
    path.write_text('[[equivalent]]\nkey = "reference.handles|op|a => b"\nreason = " "\n', encoding="utf-8")
    with pytest.raises(mu.MutationInputError) as err:
        mu.load_equivalents(path)
    assert err.value.rejection is mu.MutationRejection.EQUIVALENT_WITHOUT_REASON
    path.write_text("[[equivalent]\n", encoding="utf-8")
    with pytest.raises(mu.MutationInputError) as bad:
        mu.load_equivalents(path)
    assert bad.value.rejection is mu.MutationRejection.BAD_EQUIVALENTS_FILE


def test_the_killers_are_the_golden_tests_by_default_or_named_selections_and_quick_checks():
    assert mu.fast_checks() == ["golden", "kernels-differential"]
    assert mu.fast_checks(["negative-registry", "reference-seed", "golden"]) == ["golden", "reference-seed",
                                                                                 "negative-registry"]
    for bad in (["spec-witnesses"], ["nope"]):  # a full-level check is not part of the fast level
        with pytest.raises(mu.MutationInputError) as err:
            mu.fast_checks(bad)
        assert err.value.rejection is mu.MutationRejection.UNKNOWN_CHECK


def test_a_pytest_selection_missing_from_the_checkout_is_refused_by_name(monkeypatch):
    monkeypatch.setitem(mu.PYTEST_SELECTIONS, "golden", ("tests/no-such-folder",))
    with pytest.raises(mu.MutationInputError) as err:
        mu.fast_checks(["golden"])
    assert err.value.rejection is mu.MutationRejection.NO_TESTS and "no-such-folder" in str(err.value)


def test_the_kept_equivalents_file_loads_and_every_entry_has_a_reason():
    for key, reason in mu.load_equivalents().items():
        module, operator, change = key.split("|", 2)
        assert module.startswith(("reference.", "kernels.", "conformance.")) and operator.startswith("core/") and " => " in change
        assert reason


def test_triton_kernel_bodies_are_not_mutated_by_cosmic_ray():
    path = mu.select_modules(["kernels.paged"])["kernels.paged"]
    source = path.read_text(encoding="utf-8").splitlines()
    in_kernel = next(i + 1 for i, ln in enumerate(source) if ln.strip() == "valid = pos < hi")
    host = next(i + 1 for i, ln in enumerate(source) if ln.startswith("def paged_decode_attention("))
    jit = mu.jit_lines("\n".join(source))
    assert in_kernel in jit and host not in jit
    lines = {m.line for m in mu.enumerate_mutants({"kernels.paged": path})}
    assert in_kernel not in lines and not lines & jit
    assert lines  # the host code is mutated


def test_sample_is_fixed_by_the_seed_and_drawn_in_random_order():
    mutants = [_mutant(line=i) for i in range(1, 200)]
    a, b, c = mu.sample(mutants, 20, 0), mu.sample(mutants, 20, 0), mu.sample(mutants, 20, 1)
    assert a == b and a != c and len(a) == 20 and len(set(a)) == 20
    assert [m.line for m in a] != sorted(m.line for m in a)  # an interrupted run's first k are a sample too
    assert mu.sample(mutants, None, 0) == mutants


def test_checks_are_the_passing_ones_that_execute_the_line_cheapest_first():
    assert mu.checks_for(_mutant(line=10), COVERAGE) == ("fast", "slow")
    assert mu.checks_for(_mutant(line=11), COVERAGE) == ("slow",)
    assert mu.checks_for(_mutant(line=12), COVERAGE) == ()


def test_verdicts_and_scores():
    calls = []

    def runner(m, checks, timeout):
        calls.append((m.line, checks))
        outcome = mu.Outcome.KILLED if m.line == 10 else mu.Outcome.SURVIVED
        return mu.MutantResult(m, outcome, checks, killed_by="fast" if m.line == 10 else "")

    equivalent = _mutant(line=11, before="y = 1", after="y = 2")
    mutants = [_mutant(line=10), _mutant(line=11), equivalent, _mutant(line=12)]
    results = mu.run_mutants(mutants, COVERAGE, {equivalent.key: "y is never read"}, runner=runner)
    assert [r.outcome for r in results] == [mu.Outcome.KILLED, mu.Outcome.SURVIVED, mu.Outcome.EQUIVALENT,
                                            mu.Outcome.NOT_EXECUTED]
    assert calls == [(10, ("fast", "slow")), (11, ("slow",))]  # neither the equivalent nor the unexecuted ran
    assert results[2].reason == "y is never read"
    total = mu.scores(results)[-1]
    assert (total.mutants, total.killed, total.survived, total.not_executed, total.equivalent) == (4, 1, 1, 1, 1)
    assert total.score == pytest.approx(1 / 3)
    text = mu.survivors_text(results)
    assert "survived" in text and "y is never read" in text and "[killed]" not in text


SIGNATURES = """from __future__ import annotations
def f(x: int | None, y: int = 1 | 2) -> list[int] | None:
    return x | y
def g(x: int | None = None) -> int | None:
    return x
class C:
    field: tuple[int | None, ...]
    other: int = 1 | 2
"""


def test_an_or_inside_postponed_function_annotations_only_is_equivalent(tmp_path):
    assert mu.annotation_only_lines(SIGNATURES) == {4, 7}  # lines 2 and 8 also have a real | in a value
    assert mu.annotation_only_lines(SIGNATURES.split("\n", 1)[1]) == set()  # evaluated annotations
    path = tmp_path / "m.py"
    path.write_text(SIGNATURES, encoding="utf-8")
    at = [mu.Mutant("reference.m", path, "core/ReplaceBinaryOperator_BitOr_Add", 0, line, line, "before", "after")
          for line in (2, 4)]
    results = mu.run_mutants(at, COVERAGE, {}, runner=lambda m, c, t: mu.MutantResult(m, mu.Outcome.SURVIVED))
    assert [r.outcome for r in results] == [mu.Outcome.NOT_EXECUTED, mu.Outcome.EQUIVALENT]
    assert results[1].reason == mu.ANNOTATION_REASON


def test_a_mutant_that_does_not_compile_is_incompetent_not_run(tmp_path):
    """cosmic-ray's `**` -> `//` also hits a dict display's unpacking: `{//a}` is no program (seed-1 revocation)."""
    path = tmp_path / "m.py"
    path.write_text("def f(a):\n    return {**a, 'b': 2 ** 3}\n", encoding="utf-8")
    bare = [m for m in mu.enumerate_mutants({"reference.m": path}) if m.operator.endswith("Pow_FloorDiv")]
    results = mu.run_mutants(bare, {"digest": "-", "checks": {"c": {"seconds": 1.0, "passed": True,
                                                                     "lines": {"reference.m": [2]}}}},
                             {}, runner=lambda m, c, t: mu.MutantResult(m, mu.Outcome.SURVIVED, c))
    assert sorted((r.mutant.after.strip(), r.outcome) for r in results) == [
        ("return {**a, 'b': 2 // 3}", mu.Outcome.SURVIVED), ("return {//a, 'b': 2 ** 3}", mu.Outcome.INCOMPETENT)]
    assert [r.reason for r in results if r.outcome is mu.Outcome.INCOMPETENT] == [mu.NO_COMPILE_REASON]


def test_probe_exits_0_when_its_checks_pass():
    ok = subprocess.run([sys.executable, "-m", "kvexact.gate.mutation", "packaging-selftest"], capture_output=True,
                        text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_probe_reports_the_first_check_that_does_not_pass(monkeypatch, capsys):
    from kvexact.gate import framework

    def failing(ctx):
        return framework.CheckResult(framework.Verdict.FAILED, detail="planted")

    import kvexact.gate.checks as checks_mod

    fake = [framework.GateCheck("a", "x", "", failing), framework.GateCheck("b", "x", "", failing)]
    monkeypatch.setattr(checks_mod, "load_checks", lambda: fake)
    assert mu.probe(["a", "b"]) == 1
    out = capsys.readouterr().out
    assert "killed-by: a" in out and "killed-by: b" not in out


def test_probe_names_the_first_failing_test_of_a_pytest_selection(monkeypatch, tmp_path, capsys):
    tests = tmp_path / "test_planted_probe.py"
    tests.write_text("def test_passes():\n    assert 1 + 1 == 2\n\n\ndef test_fails():\n    assert 1 + 1 == 3\n\n\n"
                     "def test_not_reached():\n    assert False\n", encoding="utf-8")
    monkeypatch.setitem(mu.PYTEST_SELECTIONS, "planted", (str(tests),))
    assert mu.probe(["planted"]) == 1
    out = capsys.readouterr().out
    assert "killed-by: planted (" in out and out.rstrip().endswith("::test_fails)")
    assert "1 failed, 1 passed" in out  # -x: the third test is not run


def test_cli_rejects_an_unknown_module_in_one_line():
    done = subprocess.run([sys.executable, "-m", "kvexact.cli", "bench", "mutation", "--module", "reference.nope",
                           "--list"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "unknown module" in done.stderr and "Traceback" not in done.stderr


def test_cli_lists_the_mutants_of_a_module():
    done = subprocess.run([sys.executable, "-m", "kvexact.cli", "bench", "mutation", "--module", "reference.handles",
                           "--list"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    count = int(done.stdout.split()[1])
    assert count > 0 and "total" in done.stdout


def test_rejudge_finds_the_unkilled_mutants_of_a_report_by_key_after_lines_moved(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f(a, b):\n    return a + b\n\n\ndef g(a, b):\n    return a < b\n\n\nN = 3\n",
                    encoding="utf-8")
    module = {"reference.m": path}
    old = [full for m in mu.enumerate_mutants(module) if (full := mu.with_after(m)) is not None]
    plus = next(m for m in old if m.operator == "core/ReplaceBinaryOperator_Add_Sub")
    less = next(m for m in old if m.operator == "core/ReplaceComparisonOperator_Lt_Gt")
    gone = next(m for m in old if m.operator == "core/NumberReplacer")
    report = {"mutants": [mu.MutantResult(plus, mu.Outcome.SURVIVED).as_dict(),
                          mu.MutantResult(less, mu.Outcome.NOT_EXECUTED).as_dict(),
                          mu.MutantResult(gone, mu.Outcome.SURVIVED).as_dict(),
                          mu.MutantResult(old[0], mu.Outcome.KILLED).as_dict()]}
    # today's source: two lines inserted above, and the number changed (that mutant's line no longer exists)
    path.write_text("import os\n\n\ndef f(a, b):\n    return a + b\n\n\ndef g(a, b):\n    return a < b\n\n\n"
                    "N = 4\n", encoding="utf-8")
    found, missing = mu.rejudge_list(report, mu.enumerate_mutants(module))
    assert [(m.key, m.line) for m in found] == [(plus.key, 5), (less.key, 9)]
    assert missing == [gone.key]  # named, not dropped; the killed one is not judged again


def test_second_stage_probes_only_survivors_on_its_checks_lines_and_keeps_the_rest():
    then = {"digest": "-", "checks": {"machines": {"seconds": 100.0, "passed": True,
                                                   "lines": {"reference.handles": [10, 11]}}}}
    first = [mu.MutantResult(_mutant(line=10), mu.Outcome.SURVIVED, ("fast",)),
             mu.MutantResult(_mutant(line=11), mu.Outcome.NOT_EXECUTED),
             mu.MutantResult(_mutant(line=12), mu.Outcome.SURVIVED, ("fast",)),
             mu.MutantResult(_mutant(line=11, before="y = 1"), mu.Outcome.KILLED, ("fast",), killed_by="fast")]
    calls = []

    def runner(m, checks, timeout):
        calls.append((m.line, checks, timeout))
        if m.line == 10:
            return mu.MutantResult(m, mu.Outcome.KILLED, checks, killed_by="machines")
        return mu.MutantResult(m, mu.Outcome.SURVIVED, checks)

    out = mu.second_stage(first, then, 4.0, runner=runner)
    assert calls == [(10, ("machines",), 460.0), (11, ("machines",), 460.0)]
    assert [(r.outcome, r.killed_by, r.checks) for r in out] == [
        (mu.Outcome.KILLED, "machines", ("machines",)), (mu.Outcome.SURVIVED, "", ("machines",)),
        (mu.Outcome.SURVIVED, "", ("fast",)), (mu.Outcome.KILLED, "fast", ("fast",))]


def test_cli_rejects_a_rejudge_file_that_is_not_a_report(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text("{not json", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "kvexact.cli", "bench", "mutation", "--module", "reference.handles",
                           "--rejudge", str(bad)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "not a JSON report" in done.stderr and "Traceback" not in done.stderr


def test_the_sources_digest_covers_the_golden_tests(monkeypatch, tmp_path):
    """A coverage map measured before a new golden case must not be reused after it."""
    before = mu.sources_digest()
    fake = tmp_path / "golden"
    fake.mkdir()
    for p in (mu.repo_root() / "tests/reference/golden").glob("*.py"):
        (fake / p.name).write_bytes(p.read_bytes())
    monkeypatch.setitem(mu.PYTEST_SELECTIONS, "golden", (str(fake),))
    assert mu.sources_digest() == before
    (fake / "seed_cases.py").write_text((fake / "seed_cases.py").read_text() + "\n# a new case\n")
    assert mu.sources_digest() != before


def test_the_sources_digest_covers_the_gate_checks_too(monkeypatch, tmp_path):
    """A coverage map measured before a new gate case must not be reused after it."""
    before = mu.sources_digest()
    fake = tmp_path / "gate"
    fake.mkdir()
    for p in Path(mu.__file__).parent.glob("*.py"):
        (fake / p.name).write_bytes(p.read_bytes())
    monkeypatch.setattr(mu, "__file__", str(fake / "mutation.py"))
    assert mu.sources_digest() == before
    (fake / "reference_check.py").write_text((fake / "reference_check.py").read_text() + "\n# a new case\n")
    assert mu.sources_digest() != before


@pytest.mark.slow
def test_the_coverage_map_sees_the_code_behind_an_adapter(tmp_path):
    """An adapter's machine runs are forked by default; the coverage map must still record their lines (before,
    the vLLM profile's own module looked unexecuted, so its mutants counted as not executed)."""
    target = tmp_path / "cov.json"
    done = subprocess.run([sys.executable, "-m", "kvexact.gate.mutation", "--measure", "adapter-vllm-profile",
                           str(target)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    from kvexact.reference.peers import vllm_protocol

    measured = json.loads(target.read_text())
    assert measured["passed"]
    source = Path(vllm_protocol.__file__).read_text().splitlines()
    in_a_method = 1 + next(i for i, line in enumerate(source) if "manager = VllmKVCacheManager.create(" in line)
    assert in_a_method in measured["lines"].get("reference.peers.vllm_protocol", []), in_a_method
    # and the lines run at import time (a module constant the protocol check reads): the code under test is
    # imported only once coverage is on
    from kvexact.reference import adapters

    source = Path(adapters.__file__).read_text().splitlines()
    at_import = 1 + next(i for i, line in enumerate(source) if line.startswith("REQUIRED_METHODS = "))
    assert at_import in measured["lines"].get("reference.adapters", []), at_import


def test_no_mutant_is_made_inside_a_deliberately_faulty_adapter():
    """The faulty adapters the gate must catch are bugs on purpose: every name listed exists, and no mutant of
    the adapter target starts on one of their lines, while the correct code around them is still mutated."""
    chosen = mu.select_modules(["reference.peers.sglang_protocol", "conformance.simple_runtime"])
    every = mu.enumerate_mutants(chosen)
    for module, names in mu.FAULTY_DEFINITIONS.items():
        source = chosen[module].read_text(encoding="utf-8")
        faulty = mu.faulty_lines(module, source)
        defined = {line.split("(")[0].split()[-1] for line in source.splitlines()
                   if line.startswith(("def ", "class "))}
        assert set(names) <= defined, set(names) - defined
        mine = [m for m in every if m.module == module]
        assert mine and not [m for m in mine if m.line in faulty], module
        assert faulty and all(1 <= n <= len(source.splitlines()) for n in faulty)


def test_the_adapter_target_makes_no_mutant_in_kvexacts_own_checking_code():
    """The trace recorder and its projections check the machines' reference; under ``--target adapter`` no mutant
    starts on their lines (every name listed is a top-level definition), while ``ReferenceAdapter`` and
    ``reference_factory`` beside them are still mutated, and the reference target still mutates the recorder."""
    chosen = mu.select_modules(list(mu.CHECKING_CODE))
    adapter_target = mu.enumerate_mutants(chosen, mu.SKIPPED_BY_TARGET["adapter"])
    reference_target = mu.enumerate_mutants(chosen)
    for module, names in mu.CHECKING_CODE.items():
        source = chosen[module].read_text(encoding="utf-8")
        defined = {line.split("(")[0].split(":")[0].split()[-1] for line in source.splitlines()
                   if line.startswith(("def ", "class "))}
        assert set(names) <= defined, set(names) - defined
        checking = set(mu.definition_lines(source, names))
        assert not [m for m in adapter_target if m.module == module and m.line in checking]
        assert [m for m in reference_target if m.module == module and m.line in checking]
        adapter_lines = set(mu.definition_lines(source, ["ReferenceAdapter", "reference_factory"]))
        assert [m for m in adapter_target if m.module == module and m.line in adapter_lines]


UNCALLED_SOURCE = """class A:
    def used(self):
        return 1

    def unused(self):
        return 2


def top():
    return 3
"""


def test_a_mutant_inside_a_definition_no_adapter_calls_is_equivalent_with_that_reason(tmp_path):
    """Under the adapter target only: a mutant inside a listed definition (a method by its class-qualified name) is
    equivalent, with the listed reason, unless a check executes its line after all (then the list is wrong there and
    the mutant is run); one outside it, or without the list, is judged as usual."""
    path = tmp_path / "m.py"
    path.write_text(UNCALLED_SOURCE, encoding="utf-8")
    assert mu.definition_lines(UNCALLED_SOURCE, ["A.unused", "top"]) == {5: "A.unused", 6: "A.unused", 9: "top",
                                                                         10: "top"}
    at = [mu.Mutant("reference.m", path, "core/NumberReplacer", 0, line, line, "before", "after") for line in (3, 6)]
    coverage = {"digest": "-", "checks": {"c": {"seconds": 1.0, "passed": True, "lines": {"reference.m": [3]}}}}
    uncalled = {"reference.m": {"A.unused": "the tests call it"}}
    survive = lambda m, c, t: mu.MutantResult(m, mu.Outcome.SURVIVED, c)  # noqa: E731
    results = mu.run_mutants(at, coverage, {}, runner=survive, uncalled=uncalled)
    assert [r.outcome for r in results] == [mu.Outcome.SURVIVED, mu.Outcome.EQUIVALENT]
    assert results[1].reason == "inside A.unused, which no adapter calls: the tests call it"
    assert [r.outcome for r in mu.run_mutants(at, coverage, {}, runner=survive)] == [mu.Outcome.SURVIVED,
                                                                                    mu.Outcome.NOT_EXECUTED]
    coverage["checks"]["c"]["lines"]["reference.m"].append(6)
    assert [r.outcome for r in mu.run_mutants(at, coverage, {}, runner=survive, uncalled=uncalled)] == [
        mu.Outcome.SURVIVED, mu.Outcome.SURVIVED]


DEFAULTS_SOURCE = """import functools


class A:
    def unused(self, priority=0):
        return priority

    @functools.lru_cache(maxsize=2)
    def cached(self):
        return 1
"""


def test_an_uncalled_definitions_header_runs_at_import_but_counts_as_uncalled(tmp_path):
    """A default in the header of an uncalled method is evaluated when the module is imported, so coverage shows its
    line executed; only a check that executes the body shows a call. A decorator may act at import: it is run."""
    path = tmp_path / "m.py"
    path.write_text(DEFAULTS_SOURCE, encoding="utf-8")
    assert mu.body_lines(DEFAULTS_SOURCE, "A.unused") == {6}
    at = [mu.Mutant("reference.m", path, "core/NumberReplacer", 0, line, line, "before", "after") for line in (5, 8)]
    coverage = {"digest": "-", "checks": {"c": {"seconds": 1.0, "passed": True, "lines": {"reference.m": [5, 8, 9]}}}}
    uncalled = {"reference.m": {"A.unused": "nothing calls it", "A.cached": "nothing calls it"}}
    survive = lambda m, c, t: mu.MutantResult(m, mu.Outcome.SURVIVED, c)  # noqa: E731
    results = mu.run_mutants(at, coverage, {}, runner=survive, uncalled=uncalled)
    assert [r.outcome for r in results] == [mu.Outcome.EQUIVALENT, mu.Outcome.SURVIVED]
    coverage["checks"]["c"]["lines"]["reference.m"].append(6)  # the body runs after all: the list is wrong there
    assert mu.run_mutants(at[:1], coverage, {}, runner=survive, uncalled=uncalled)[0].outcome is mu.Outcome.SURVIVED


def test_every_definition_listed_as_uncalled_by_adapters_exists():
    chosen = mu.select_modules(list(mu.UNCALLED_BY_ADAPTERS))
    for module, names in mu.UNCALLED_BY_ADAPTERS.items():
        found = set(mu.definition_lines(chosen[module].read_text(encoding="utf-8"), names).values())
        assert found == set(names), set(names) - found
        assert module in mu.ADAPTER_MODULES and all(reason for reason in names.values())


def test_an_equivalent_may_hold_under_one_target_only_and_an_unknown_target_is_refused_by_name(tmp_path):
    """A guard no adapter trips is equivalent under ``--target adapter`` but tested under ``reference``: an entry with
    ``target`` is returned for that target (and for the whole file), never for another one."""
    path = tmp_path / "eq.toml"
    path.write_text('[[equivalent]]\nkey = "reference.peers.vllm|op|a => b"\ntarget = "adapter"\nreason = "r1"\n'
                    '[[equivalent]]\nkey = "reference.pool|op|c => d"\nreason = "r2"\n', encoding="utf-8")
    assert set(mu.load_equivalents(path, target="adapter")) == {"reference.peers.vllm|op|a => b", "reference.pool|op|c => d"}
    assert set(mu.load_equivalents(path, target="reference")) == {"reference.pool|op|c => d"}
    assert len(mu.load_equivalents(path)) == 2
    path.write_text('[[equivalent]]\nkey = "reference.pool|op|c => d"\ntarget = "adapters"\nreason = "r"\n',
                    encoding="utf-8")
    with pytest.raises(mu.MutationInputError) as err:
        mu.load_equivalents(path)
    assert err.value.rejection is mu.MutationRejection.BAD_EQUIVALENTS_FILE and "'adapters'" in str(err.value)


def test_the_kept_adapter_only_equivalents_are_left_to_the_reference_target():
    adapter, reference = mu.load_equivalents(target="adapter"), mu.load_equivalents(target="reference")
    only_adapter = set(adapter) - set(reference)
    assert only_adapter and all(key.split("|")[0] in mu.ADAPTER_MODULES for key in only_adapter)
    assert set(reference) < set(adapter)
