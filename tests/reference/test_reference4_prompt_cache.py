"""Prompt Cache markup (seed 0x0CB): schema layout, module population, assembly, invalidation, and one
test per named markup rejection. Expected positions are derived by hand from the layout rules in the
module docstring (the seed's own schema/module figure is not in its text)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvexact.reference import prompt_cache as pc
from kvexact.reference.formulas import evaluate
from kvexact.reference.formulas_all import load_all
from kvexact.reference.modules import ModuleRejection, Namespace
from kvexact.reference.rejections import Rejected

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "prompt_cache"
SCHEMA = (EXAMPLES / "trip_schema.xml").read_text()
PROMPT = (EXAMPLES / "trip_prompt.xml").read_text()
NS = Namespace("tenant", 4, frozenset({"alice"}))


def _populated(schema: pc.MarkupSchema, names=None) -> pc.ModuleStore:
    return pc.ModuleStore().populate(schema, schema.modules if names is None else names, NS, "sem", "lay")


def _assemble(prompt=PROMPT, schema=None, store=None, **kw):
    schema = schema or pc.parse_schema(SCHEMA)
    store = store if store is not None else _populated(schema)
    return pc.assemble_markup(kw.pop("principal", "alice"), prompt, schema, store, kw.pop("namespace", NS), "sem",
                              "lay", **kw)


def test_schema_layout_reserves_parameter_slots_and_shares_union_starts():
    s = pc.parse_schema(SCHEMA)
    # system: 7 words at 0..6; plan: 4 words at 7..10, slot of 3 at 11..13, 3 words at 14..16;
    # the union starts both members at 17 and spans tokyo's 6 words: the schema ends at 23
    assert s.schema_id == "trip" and s.generation == 1 and s.end == 23
    assert s.modules["system"].position_ids == tuple(range(0, 7))
    assert s.modules["plan"].position_ids == (7, 8, 9, 10, 14, 15, 16)
    assert dict(s.modules["plan"].slots) == {"duration": (11, 12, 13)}
    assert s.modules["tokyo"].position_ids == tuple(range(17, 23))
    assert s.modules["miami"].position_ids == (17, 18, 19, 20)
    assert s.modules["plan"].token_ids == pc.word_tokens("Plan a trip of for me .")


def test_every_module_satisfies_n_module():
    load_all()
    for m in pc.parse_schema(SCHEMA).modules.values():
        assert evaluate("prompt.module_tokens", token_ids=m.token_ids, position_ids=m.position_ids) == len(m.token_ids)


def test_assembly_imports_modules_and_computes_arguments_and_text_with_discontinuous_positions():
    segments = _assemble()
    got = [(s.module_id, s.source, s.position_ids) for s in segments]
    assert got == [("system", "cache", tuple(range(7))),
                   ("plan", "cache", (7, 8, 9, 10, 14, 15, 16)),
                   ("plan.duration", "compute", (11, 12)),  # "two weeks" leaves slot position 13 empty
                   ("miami", "cache", (17, 18, 19, 20)),
                   ("#text@23", "compute", (23, 24, 25, 26))]
    assert pc.gaps(segments, 23) == (13, 21, 22)


def test_only_populated_modules_are_imported():
    schema = pc.parse_schema(SCHEMA)
    sources = {s.module_id: s.source for s in _assemble(store=_populated(schema, ["plan"]))}
    assert sources == {"system": "compute", "plan": "cache", "plan.duration": "compute", "miami": "compute",
                       "#text@23": "compute"}


def test_authorization_precedes_any_module_lookup():
    lookups: list[str] = []
    with pytest.raises(Rejected) as exc:
        _assemble(principal="mallory", lookups=lookups)
    assert exc.value.reason is ModuleRejection.UNAUTHORIZED_NAMESPACE and lookups == []
    _assemble(lookups=lookups)
    assert lookups == ["system", "plan", "miami"]


MOVED = SCHEMA.replace('<module name="system">', '<module name="greeting">Hello .</module>\n  <module name="system">')


def test_equal_text_at_moved_positions_is_not_a_hit():
    """A schema edited without advancing its generation: the stored module's text matches, its positions do not."""
    stale = _populated(pc.parse_schema(SCHEMA))
    with pytest.raises(Rejected) as exc:
        _assemble(schema=pc.parse_schema(MOVED), store=stale)
    assert exc.value.reason is ModuleRejection.POSITION_MISMATCH


def test_schema_revision_invalidates_every_module_of_the_older_generation():
    revised = pc.parse_schema(MOVED.replace('generation="1"', 'generation="2"'))
    stale = _populated(pc.parse_schema(SCHEMA))
    prompt2 = PROMPT.replace('generation="1"', 'generation="2"')
    with pytest.raises(Rejected) as exc:  # kept by mistake, a stale module is refused, never imported
        _assemble(prompt2, schema=revised, store=stale)
    assert exc.value.reason is ModuleRejection.SCHEMA_GENERATION_MISMATCH
    store, dropped = stale.revise_schema(revised)
    assert dropped == ("miami", "plan", "system", "tokyo") and not store.receipts
    assert {s.source for s in _assemble(prompt2, schema=revised, store=store)} == {"compute"}
    repopulated = _populated(revised)
    assert repopulated.receipts[("trip", "system", "")].position_ids == tuple(range(2, 9))  # shifted by "Hello ."
    assert _assemble(prompt2, schema=revised, store=repopulated)[0].source == "cache"


def test_namespace_rotation_invalidates_modules_of_the_old_namespace_generation():
    schema = pc.parse_schema(SCHEMA)
    successor = Namespace("tenant", 5, NS.readers)
    with pytest.raises(Rejected) as exc:
        _assemble(namespace=successor)
    assert exc.value.reason is ModuleRejection.NAMESPACE_MISMATCH
    store, dropped = _populated(schema).rotate_namespace(successor)
    assert dropped == ("miami", "plan", "system", "tokyo")
    assert {s.source for s in _assemble(store=store, namespace=successor)} == {"compute"}
    assert _populated(schema).rotate_namespace(NS)[1] == ()  # the current generation drops nothing


def test_a_prompt_for_another_schema_or_generation_is_refused():
    for prompt, reason in ((PROMPT.replace('schema="trip"', 'schema="city"'), ModuleRejection.SCHEMA_ID_MISMATCH),
                           (PROMPT.replace('generation="1"', 'generation="0"'),
                            ModuleRejection.SCHEMA_GENERATION_MISMATCH)):
        with pytest.raises(Rejected) as exc:
            _assemble(prompt)
        assert exc.value.reason is reason


P = '<prompt schema="trip" generation="1">'
SCHEMA_CASES = {
    pc.MarkupRejection.NOT_WELL_FORMED: ('<schema name="s">\n<module name="a">x</schema>', "line 2"),
    pc.MarkupRejection.WRONG_ROOT: ('<prompt schema="s"/>', "found <prompt> on line 1"),
    pc.MarkupRejection.MISSING_ATTRIBUTE: ('<schema name="s">\n<module>x</module></schema>', "<module> on line 2"),
    pc.MarkupRejection.BAD_NUMBER: ('<schema name="s"><module name="a">x <param name="p" len="0"/></module>'
                                    '</schema>', "len='0'"),
    pc.MarkupRejection.UNKNOWN_ELEMENT: ('<schema name="s">\n<modul name="a"/></schema>', "<modul> on line 2"),
    pc.MarkupRejection.STRAY_TEXT: ('<schema name="s">\n<union>loose<module name="a">x</module></union></schema>',
                                    "'loose' on line 2"),
    pc.MarkupRejection.DUPLICATE_MODULE: ('<schema name="s"><module name="a">x</module>\n<module name="a">y</module>'
                                          '</schema>', "'a' on line 2, first on line 1"),
    pc.MarkupRejection.DUPLICATE_PARAMETER: ('<schema name="s"><module name="a"><param name="p" len="1"/>\n'
                                             '<param name="p" len="2"/></module></schema>', "'p' on line 2"),
    pc.MarkupRejection.EMPTY_UNION: ('<schema name="s">\n<union/></schema>', "<union> on line 2"),
}
PROMPT_CASES = {
    pc.MarkupRejection.UNDECLARED_MODULE: (P + "\n<paris/></prompt>", "<paris> on line 2"),
    pc.MarkupRejection.UNDECLARED_PARAMETER: (P + '<plan days="3"/></prompt>', "days= on <plan>"),
    pc.MarkupRejection.ARGUMENT_TOO_LONG: (P + '<plan duration="a very long month"/></prompt>', "4 tokens, slot of 3"),
    pc.MarkupRejection.REPEATED_MODULE: (P + "<system/>\n<system/></prompt>", "line 2, first on line 1"),
    pc.MarkupRejection.UNION_CONFLICT: (P + "<tokyo/><miami/></prompt>", "<miami> on line 1 and <tokyo>"),
    pc.MarkupRejection.CONTENT_IN_IMPORT: (P + "<system>hi</system></prompt>", "<system> on line 1 must be empty"),
}


@pytest.mark.parametrize("reason", list(SCHEMA_CASES), ids=lambda r: r.name)
def test_malformed_schema_is_refused_by_name_with_its_line(reason):
    text, where = SCHEMA_CASES[reason]
    with pytest.raises(Rejected) as exc:
        pc.parse_schema(text)
    assert exc.value.reason is reason and where in exc.value.detail and "\n" not in str(exc.value)


@pytest.mark.parametrize("reason", list(PROMPT_CASES), ids=lambda r: r.name)
def test_malformed_prompt_is_refused_by_name_with_its_line(reason):
    text, where = PROMPT_CASES[reason]
    with pytest.raises(Rejected) as exc:
        pc.parse_prompt(text, pc.parse_schema(SCHEMA))
    assert exc.value.reason is reason and where in exc.value.detail and "\n" not in str(exc.value)


def test_stale_revision_is_refused_by_name():
    schema = pc.parse_schema(SCHEMA)
    with pytest.raises(Rejected) as exc:
        _populated(schema).revise_schema(schema)
    assert exc.value.reason is pc.MarkupRejection.STALE_REVISION and "generation 1 after 1" in exc.value.detail


def test_every_markup_rejection_has_a_case():
    tested = set(SCHEMA_CASES) | set(PROMPT_CASES) | {pc.MarkupRejection.STALE_REVISION}
    assert tested == set(pc.MarkupRejection)


def _kvexact(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvexact.cli", "prompt-cache", *args], capture_output=True,
                          text=True, timeout=120)


def test_cli_prints_the_assembly_and_names_malformed_markup(tmp_path):
    ok = _kvexact(str(EXAMPLES / "trip_schema.xml"), str(EXAMPLES / "trip_prompt.xml"))
    assert ok.returncode == 0, ok.stderr
    assert "plan           cache      7 tokens  positions 7-10,14-16" in ok.stdout
    assert "gaps below 23: 13,21-22" in ok.stdout
    bad = tmp_path / "bad.xml"
    bad.write_text(P + '\n<plan days="3"/></prompt>')
    out = _kvexact(str(EXAMPLES / "trip_schema.xml"), str(bad))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "MarkupRejection.UNDECLARED_PARAMETER: days= on <plan> line 2" in out.stderr
    stale = _kvexact(str(EXAMPLES / "trip_schema.xml"), str(EXAMPLES / "trip_prompt.xml"), "--populated-generation", "0")
    assert stale.returncode == 0 and "invalidated (generation 0 -> 1): miami, plan, system, tokyo" in stale.stderr
    assert " cache " not in stale.stdout


def test_cli_refusals_and_malformed_schema(tmp_path):
    old = tmp_path / "old.xml"
    old.write_text(PROMPT.replace('generation="1"', 'generation="0"'))
    refused = _kvexact(str(EXAMPLES / "trip_schema.xml"), str(old))
    assert refused.returncode == 1 and "ModuleRejection.SCHEMA_GENERATION_MISMATCH" in refused.stdout
    schema = tmp_path / "schema.xml"
    schema.write_text('<schema name="s">\n<union/></schema>')
    bad = _kvexact(str(schema), str(EXAMPLES / "trip_prompt.xml"))
    assert bad.returncode == 2 and f"{schema}: MarkupRejection.EMPTY_UNION: <union> on line 2" in bad.stderr
    none = _kvexact(str(EXAMPLES / "trip_schema.xml"), str(EXAMPLES / "trip_prompt.xml"), "--cached", "none")
    assert none.returncode == 0 and " cache " not in none.stdout and "positions 7-10,14-16" in none.stdout
    unknown = _kvexact(str(EXAMPLES / "trip_schema.xml"), str(EXAMPLES / "trip_prompt.xml"), "--cached", "paris")
    assert unknown.returncode == 2 and "--cached: paris not declared in" in unknown.stderr
