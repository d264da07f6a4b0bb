"""The generated-spec differential in CI: a fixed sample of Hypothesis-drawn models (sets, functions,
records, sequences, quantifiers, CHOOSE, LET, recursion, EXCEPT, IF/CASE, UNCHANGED, stuttering,
invariants, action and temporal properties, symmetry, evaluation errors) checked by TLC and by the
embedded engine: outcome, violated name, distinct and generated counts must agree. TLC is the oracle."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings

from kvexact.spec.checker.genspec import GenSpec, gen_specs
from kvexact.spec.checker.parity import compare, shrink, write_reproducer
from kvexact.spec.checker.result import Outcome
from kvexact.spec.checker.sany import sany_verdicts

SAMPLE = 20


def _sample(n: int) -> list[GenSpec]:
    out: list[GenSpec] = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(gen_specs())
    def collect(spec):
        out.append(spec)

    collect()
    return out[:n]


def test_generated_models_are_valid_tla(tmp_path, tla2tools_jar):
    """SANY accepts every generated module (the strategy's promise), 60 of them in one JVM."""
    files = []
    for i, spec in enumerate(_sample(60)):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        (folder / "Gen.tla").write_text(spec.module())
        files.append(folder / "Gen.tla")
    verdicts = sany_verdicts(files, tla2tools_jar)
    assert [verdicts[f].first_error() for f in files if not verdicts[f].accepted] == []


@pytest.mark.slow
@pytest.mark.tlc
def test_fixed_sample_agrees_with_tlc(tla2tools_jar):
    specs = _sample(SAMPLE)
    results = [compare(spec, tla2tools_jar) for spec in specs]
    outcomes = {r.tlc.outcome for r in results}
    assert Outcome.SUCCESS in outcomes and len(outcomes) >= 3  # the sample reaches several verdicts
    assert [(i, r.why()) for i, r in enumerate(results) if not r.agree] == []


def test_a_disagreement_is_written_as_a_minimal_reproducer(tmp_path, tla2tools_jar):
    """A disagreement's reproducer is the model itself (module and cfg) with both results in WHY.txt;
    shrinking an agreeing comparison returns it unchanged."""
    spec = _sample(SAMPLE)[0]
    found = compare(spec, tla2tools_jar)
    assert found.agree
    # a comparison whose TLC result says a different outcome stands for a disagreement
    fake = attrs.evolve(found, tlc=attrs.evolve(found.tlc, outcome=Outcome.DEADLOCK))
    out = write_reproducer(fake, tmp_path, 1)
    assert (out / "Gen.tla").read_text() == spec.module() and (out / "Gen.cfg").read_text() == spec.cfg()
    assert "outcome: embedded" in (out / "WHY.txt").read_text()
    assert shrink(found, tla2tools_jar, budget=2).agree  # nothing to shrink towards: it stays as it was
