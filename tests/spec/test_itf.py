"""The one ITF owner: both value encodings, decoding back to checker values, documents."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvexact.spec import itf
from kvexact.spec.checker.values import Fcn, ModelValue, from_python


def test_checker_values_encode_as_apalache_writes_them():
    assert itf.encode(5) == {"#bigint": "5"}
    assert itf.encode(frozenset({1})) == {"#set": [{"#bigint": "1"}]}
    assert itf.encode((1, True)) == [{"#bigint": "1"}, True]
    assert itf.encode(Fcn({"a": "x"})) == {"a": "x"}
    assert itf.encode(Fcn({3: 1})) == {"#map": [[{"#bigint": "3"}, {"#bigint": "1"}]]}
    assert itf.encode(ModelValue("m")) == {"#unserializable": "m"}


def test_projection_values_encode_with_plain_integers():
    value = {"epoch": 3, "tables": itf.Fn({"r1": [1, 2]}), "wrote": {(0, 5)}, "on": True}
    assert itf.encode_plain(value) == {"epoch": 3, "tables": {"#map": [["r1", [1, 2]]]},
                                       "wrote": {"#set": [{"#tup": [0, 5]}]}, "on": True}


_leaves = st.one_of(st.integers(-5, 5), st.booleans(), st.sampled_from(["a", "b"]),
                    st.sampled_from([ModelValue("m1"), ModelValue("m2")]))
_values = st.recursive(_leaves, lambda inner: st.one_of(
    st.frozensets(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.integers(0, 3), inner, min_size=1, max_size=3).map(lambda d: from_python(d)),
    st.dictionaries(st.sampled_from(["x", "y"]), inner, min_size=1).map(lambda d: from_python(d))), max_leaves=8)


@given(_values)
def test_decode_inverts_encode(value):
    assert itf.decode(itf.encode(value)) == value


def test_plain_model_values_are_named_by_the_trace():
    assert itf.decode(itf.encode_plain({"r": "r1"}), frozenset({"r1"})) == from_python({"r": ModelValue("r1")})
    assert itf.decode("r1") == "r1"


def test_documents_round_trip_and_bad_ones_are_named():
    doc = itf.document([({"index": 0}, {"x": 1}), ({"index": 1, "action": "A"}, {"x": 2})], ["x"], {"spec": "S"})
    assert doc["#meta"]["format"] == "ITF" and doc["#meta"]["spec"] == "S" and doc["vars"] == ["x"]
    meta, states = itf.read_document(doc)
    assert meta["spec"] == "S" and states == [({"index": 0}, {"x": 1}), ({"index": 1, "action": "A"}, {"x": 2})]
    with pytest.raises(itf.ITFError, match="non-empty 'states'"):
        itf.read_document({"states": []})
    with pytest.raises(itf.ITFError, match="state 0"):
        itf.read_document({"states": [3]})


def test_plain_writes_checker_values_as_the_plain_form_and_reads_back():
    mvs = frozenset({"r1", "NoReq"})
    value = from_python({"epoch": 3, "req": ModelValue("NoReq"), "wrote": {(0, 2), (1, 1)},
                         "tables": {ModelValue("r1"): {0: (5, 6)}}, "ref": {0: {3: 1, 4: 0}}, "empty": ()})
    text = itf.plain(value)
    assert text["req"] == "NoReq" and text["epoch"] == 3 and text["empty"] == []
    assert text["wrote"] == {"#set": [[0, 2], [1, 1]]}  # sets sorted by their JSON text, tuples as lists
    assert text["tables"] == {"#map": [["r1", {"#map": [[0, [5, 6]]]}]]}
    assert itf.decode(json.loads(json.dumps(text)), mvs) == value
    assert itf.plain(text) == text  # plain JSON already: unchanged
