"""Parsing TLC's -tool output (recorded text) and its value syntax."""

from kvexact.spec.checker.result import Outcome
from kvexact.spec.tlc import FrozenDict, ModelValue, parse_tool_output, parse_value, tool_messages


def test_tool_messages_are_split_by_code(tlc_output):
    codes = [code for code, _cls, _body in tool_messages(tlc_output["violation"])]
    assert codes == [2262, 2185, 2190, 2110, 2121, 2217, 2217, 2217, 2199, 2194, 2186]


def test_invariant_violation_with_its_trace(tlc_output):
    result = parse_tool_output(tlc_output["violation"], 12)
    assert result.engine == "tlc"
    assert result.outcome is Outcome.SAFETY and result.exit_code == 12
    assert (result.generated_states, result.distinct_states, result.left_on_queue) == (97, 16, 2)
    assert result.depth == 7
    assert result.violation.kind == "invariant" and result.violation.name == "NotSolved"
    trace = result.violation.trace
    assert [s.index for s in trace] == [1, 2, 3]
    assert [s.action for s in trace] == ["Initial predicate", "FillBigJug", "BigToSmall"]
    assert trace[0].location == "" and trace[0].values == {"big": 0, "small": 0}
    assert trace[1].location.startswith("line 25, col 5") and trace[1].location.endswith("module DieHard")
    assert trace[2].values == {"big": 2, "small": 3}


def test_success_counts_ignore_progress_lines_with_commas(tlc_output):
    result = parse_tool_output(tlc_output["success"], 0)
    assert result.outcome is Outcome.SUCCESS and result.violation is None
    assert (result.generated_states, result.distinct_states, result.depth) == (1234567, 45678, 12)


def test_deadlock_and_structured_values(tlc_output):
    result = parse_tool_output(tlc_output["deadlock"], 11)
    assert result.outcome is Outcome.DEADLOCK and result.violation.name == "Deadlock"
    values = result.violation.trace[0].values
    assert values["q"] == ()
    owner = values["owner"]
    assert owner[ModelValue("r1")] == {"phase": "idle", "n": -3}
    assert owner[ModelValue("r2")]["phase"] == "done"
    assert values["held"] == frozenset({(1, "a"), (2, 'b"c')})


def test_value_syntax():
    assert parse_value("TRUE") is True and parse_value("FALSE") is False
    assert parse_value("-12") == -12
    assert parse_value('"x y"') == "x y"
    mv = parse_value("NoReq")
    assert mv is ModelValue("NoReq") and not isinstance(parse_value('"NoReq"'), ModelValue)
    assert parse_value("{}") == frozenset() and parse_value("<<>>") == ()
    assert parse_value("1..3") == frozenset({1, 2, 3})
    assert parse_value("<<[block |-> 1, gen |-> 2], [block |-> 2, gen |-> 0]>>") == (
        {"block": 1, "gen": 2}, {"block": 2, "gen": 0})
    nested = parse_value("(0 :> <<>> @@ 1 :> <<[block |-> 1, gen |-> 1]>>)")
    assert isinstance(nested, FrozenDict) and nested[0] == () and nested[1][0]["gen"] == 1
    assert parse_value("{[ns |-> t1, gen |-> 0]}") == frozenset({FrozenDict(ns=ModelValue("t1"), gen=0)})


def test_bad_value_says_where():
    import pytest

    with pytest.raises(ValueError, match="column"):
        parse_value("<<1, $>>")
    with pytest.raises(ValueError, match="after a complete value"):
        parse_value("1 2")


def test_unknown_exit_code_is_not_a_result():
    import pytest

    from kvexact.spec.tlc import TlcFailed

    with pytest.raises(TlcFailed, match="code 42"):
        parse_tool_output("boom", 42)


def test_liveness_lasso_exits_13_with_its_loop(tlc_output):
    result = parse_tool_output(tlc_output["lasso"], 13)
    assert result.outcome is Outcome.LIVENESS and result.exit_code == 13
    v = result.violation
    assert v.kind == "temporal" and [s.values["x"] for s in v.trace] == [0, 1, 2]
    assert v.loop == 2
    stutter = parse_tool_output(tlc_output["stutter"], 13).violation
    assert stutter.loop == len(stutter.trace) == 3
