"""More golden cases, for the index side of ``reference/`` (prefix keys, formulas, namespaces, prompt
modules, revocation, traversal, VMM): they run lines no other quick case ran and check results no other case read
(issue #25, the gate's mutation score).

Invariant: every expected value below is the seed's (section named beside it), or follows from the seed's rule by
the arithmetic written beside it, or is computed here independently of the code under test (e.g. Python's own
integer arithmetic against the z3 encoding); none is copied from the code's output. Each case returns
``(what, got, expected)`` rows like the cases of the golden registry :mod:`golden`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from fractions import Fraction
from typing import Any

Rows = list[tuple[str, Any, Any]]

# The seed's display equations: line -> how many ``$$...$$`` it holds (grep -n '\$\$' on the seed text; 111 in all).
SEED_DISPLAY_LINES = {
    **dict.fromkeys((409, 413, 417, 421, 448, 458, 462, 466, 472, 480, 484, 492, 508, 535, 543, 547, 595, 631,
                     635, 639, 660, 670, 674, 678, 843, 860, 914, 929, 967, 971, 975, 1155, 1163, 1167, 1171,
                     1177, 1181, 1185, 1196, 1200, 1251, 1255, 1259, 1397, 1406, 1412, 1497, 1581, 1610, 1614,
                     1625, 1629, 1641, 1696, 1742, 1752, 1788, 1912, 1923, 1935, 1939, 1949, 1953, 1963, 1967,
                     2017, 2027, 2031, 2117, 2121, 2127, 2131, 2393, 2397, 2423, 2427, 2567, 2571, 2641, 2647,
                     2733, 2753, 2761, 2767), 1),
    **dict.fromkeys((444, 488, 614, 1431, 1680, 1748, 1908, 2411, 2415, 2610), 2), 704: 3, 2334: 4}
# The seed's section headings of Loops 3-11 (line, section; grep -nE '^0x[0-9A-Z]+' on the seed text): a display line
# belongs to the last heading above it.
SEED_SECTIONS = (
    (401, "0x02"), (405, "0x02A"), (440, "0x02B"), (454, "0x02C"), (476, "0x02D"), (504, "0x02E"), (520, "0x02F"),
    (539, "0x02G"), (570, "0x03"), (583, "0x03A"), (608, "0x03B"), (627, "0x03C"), (656, "0x03D"), (666, "0x03E"),
    (687, "0x03F"), (713, "0x03G"), (730, "0x03H"), (744, "0x03I"), (786, "0x03J"), (813, "0x04"), (831, "0x04A"),
    (839, "0x04B"), (864, "0x04C"), (870, "0x04D"), (899, "0x04E"), (925, "0x04F"), (942, "0x04G"), (946, "0x04H"),
    (950, "0x05"), (963, "0x05A"), (994, "0x05B"), (1017, "0x05C"), (1031, "0x05D"), (1079, "0x05E"),
    (1105, "0x05F"), (1123, "0x05G"), (1129, "0x06"), (1141, "0x06A"), (1204, "0x06B"), (1247, "0x06C"),
    (1286, "0x06D"), (1316, "0x06E"), (1336, "0x06F"), (1357, "0x06G"), (1363, "0x06H"), (1367, "0x06I"),
    (1371, "0x07"), (1384, "0x07A"), (1427, "0x07B"), (1461, "0x07C"), (1491, "0x07D"), (1510, "0x07E"),
    (1540, "0x07F"), (1556, "0x07G"), (1594, "0x08"), (1606, "0x08A"), (1637, "0x08B"), (1692, "0x08C"),
    (1738, "0x08D"), (1756, "0x08E"), (1792, "0x08F"), (1818, "0x08G"), (1865, "0x08H"), (1869, "0x08I"),
    (1873, "0x09"), (1879, "0x09A"), (1896, "0x09B"), (1945, "0x09C"), (1957, "0x0A"), (1995, "0x0AA"),
    (2013, "0x0AB"), (2023, "0x0AC"), (2091, "0x0B"), (2113, "0x0BA"), (2143, "0x0BB"), (2187, "0x0BC"),
    (2249, "0x0BD"), (2310, "0x0BE"), (2356, "0x0BF"), (2374, "0x0BG"), (2378, "0x0BH"), (2380, "0x0BI"),
    (2419, "0x0BJ"), (2445, "0x0BK"), (2449, "0x0BL"), (2487, "0x0BM"), (2489, "0x0BN"), (2497, "0x0C"),
    (2507, "0x0CA"), (2539, "0x0CB"), (2604, "0x0CC"), (2637, "0x0CD"), (2690, "0x0CE"), (2729, "0x0CF"),
    (2798, "0x0CG"), (2814, "0x0CH"), (2816, "0x0D"))


# The specs are fixed: what a spec says of a state or a trace is kept for the process (a later run of the check,
# e.g. in the tests, pays only for the reference's side).
_SPEC_MEMO: dict[Any, Any] = {}


def _spec_successors(model: Any, state: dict[str, Any]) -> frozenset[Any]:
    key = ("successors", id(model), model.key(state))
    if key not in _SPEC_MEMO:
        _SPEC_MEMO[key] = frozenset(model.key(n) for _a, n in model.expand(state))
    return _SPEC_MEMO[key]


def _validated(recorder: Any) -> Any:
    """``recorder.validate()``, kept per recorded trace (its initial state, constants and records)."""
    import json

    key = ("trace", type(recorder).__name__, json.dumps([recorder.initial_state, recorder.constants(),
                                                         recorder.records], sort_keys=True, default=repr))
    if key not in _SPEC_MEMO:
        _SPEC_MEMO[key] = recorder.validate()
    return _SPEC_MEMO[key]


def section_of_line(line: int) -> str:
    return [name for start, name in SEED_SECTIONS if start <= line][-1]


def formulas_catalog_0x10A() -> Rows:
    """0x10A: the catalog names every display equation of the seed at its line, under its section."""
    from kvexact.reference.formulas_seed import CATALOG

    return [("display equations per seed line", dict(Counter(e.line for e in CATALOG)), SEED_DISPLAY_LINES),
            ("entries whose section is not their line's", [(e.section, e.line) for e in CATALOG
                                                            if section_of_line(e.line) not in e.section.split(", ")],
             [])]


def _z3_value(ops: Any, out: Any, expected: Any) -> tuple[Any, bool]:
    """The value z3 gives ``out`` under the witnesses' side constraints, and whether it is the only one."""
    z3 = ops.z3
    if not ops.side and z3.is_expr(out):  # no division witness: the term is ground, its simplified form its value
        out = z3.simplify(out)
        if z3.is_true(out) or z3.is_false(out):
            return z3.is_true(out), True
        if z3.is_int_value(out):
            return out.as_long(), True
        if z3.is_rational_value(out):
            return Fraction(out.numerator_as_long(), out.denominator_as_long()), True
    if isinstance(expected, bool):
        v = z3.Bool("v")
    elif isinstance(expected, Fraction):
        v = z3.Real("v")
    else:
        v = z3.Int("v")
    s = z3.Solver()
    s.add(*ops.side)
    s.add(v == out)
    if s.check() != z3.sat:
        return "unsat", False
    val = s.model().eval(v, model_completion=True)
    s.add(v != val)
    unique = s.check() == z3.unsat
    if z3.is_true(val) or z3.is_false(val):
        return z3.is_true(val), unique
    if z3.is_int_value(val):
        return val.as_long(), unique
    return Fraction(val.numerator_as_long(), val.denominator_as_long()), unique


def formulas_z3_0x10A() -> Rows:
    """0x10A: every arithmetic formula with a golden case, evaluated over z3 integers (the encoding the obligations
    prove with), has exactly the seed's value; z3's division witnesses admit no divisor of 0, as Python's integer
    arithmetic refuses one."""
    import z3

    from kvexact.reference.formulas import INT_OPS, REGISTRY, Z3Ops, evaluate
    from kvexact.reference.formulas_all import load_all
    from kvexact.reference.labs.formulas_golden import DERIVED, GOLDEN
    load_all()

    def as_z3(name: str, x: Any) -> Any:
        if name == "axis":  # an index into the dims list, a Python int in every encoding
            return x
        if isinstance(x, bool):
            return z3.BoolVal(x)
        if isinstance(x, int):
            return z3.IntVal(x)
        if isinstance(x, (list, tuple)):
            return type(x)(as_z3("", i) for i in x)
        return x

    wrong = []
    checked = 0
    for table in (GOLDEN, DERIVED):
        for fid, cases in table.items():
            if not REGISTRY[fid].arithmetic:
                continue
            for kwargs, expected in cases:
                ops = Z3Ops()
                out = evaluate(fid, ops, **{k: as_z3(k, v) for k, v in kwargs.items()})
                got, unique = _z3_value(ops, out, expected)
                checked += 1
                if got != expected or not unique:
                    wrong.append((fid, got, expected, unique))
    rows: Rows = [("z3 values that differ from the seed's, or are not unique", wrong, []),
                  ("z3 golden cases evaluated (every arithmetic golden case)", checked >= 120, True)]
    ops = Z3Ops()
    # floor(7 / 2) = 3, ceil(7 / 2) = 4, 7 mod 2 = 1, 7 / 2 = 7/2, min(5, 3, 4) = 3, max(5, 3, 4) = 5; min and max
    # again with the extreme first and last, 1[3 > 2] = 1, 1[2 > 3] = 0, the conjunction of true and false
    seven, two = z3.IntVal(7), z3.IntVal(2)
    probes = [("floor 7/2", ops.floordiv(seven, two), 3), ("ceil 7/2", ops.ceildiv(seven, two), 4),
              ("7 mod 2", ops.mod(seven, two), 1), ("7 / 2", ops.ratio(7, 2), Fraction(7, 2)),
              ("ceil 8/2", ops.ceildiv(z3.IntVal(8), two), 4), ("floor 8/2", ops.floordiv(z3.IntVal(8), two), 4),
              ("min 5 3 4", ops.minimum(*map(z3.IntVal, (5, 3, 4))), 3),
              ("min 3 5 4", ops.minimum(*map(z3.IntVal, (3, 5, 4))), 3),
              ("min 5 4 3", ops.minimum(*map(z3.IntVal, (5, 4, 3))), 3),
              ("max 5 3 4", ops.maximum(*map(z3.IntVal, (5, 3, 4))), 5),
              ("max 3 5 4", ops.maximum(*map(z3.IntVal, (3, 5, 4))), 5),
              ("max 3 4 5", ops.maximum(*map(z3.IntVal, (3, 4, 5))), 5),
              ("1[3 > 2]", ops.indicator(z3.IntVal(3) > 2), 1), ("1[2 > 3]", ops.indicator(z3.IntVal(2) > 3), 0),
              ("sum of nothing", ops.total([]), 0), ("sum 1 2 3", ops.total(map(z3.IntVal, (1, 2, 3))), 6),
              ("true and false", ops.all_of(z3.BoolVal(True), z3.BoolVal(False)), False),
              ("true and true", ops.all_of(z3.BoolVal(True), z3.BoolVal(True)), True)]
    rows.append(("z3 operations on 7 and 2 and three numbers", [(w, _z3_value(ops, out, e)) for w, out, e in probes],
                 [(w, (e, True)) for w, _o, e in probes]))
    for name in ("floordiv", "ceildiv", "mod", "ratio"):
        zero = Z3Ops()
        out = getattr(zero, name)(z3.IntVal(7), z3.IntVal(0))
        rows.append((f"z3 {name}(7, 0) has no value", _z3_value(zero, out, 0 if name != "ratio" else Fraction(0))[0],
                     "unsat"))
        rows.append((f"int {name}(7, 0) refused as", _raises(lambda n=name: getattr(INT_OPS, n)(7, 0)), "ValueError"))
    # 0x08D lock(v): node 2 lies on the root path of terminal 4 (4 -> 2 -> 1), not of its sibling 3 (3 -> 1)
    rows.append(("lock count of node 2 with terminals 3 and 4; of node 1", (
        evaluate("radix.lock_count", node=2, terminals=[3, 4], parent={1: None, 2: 1, 3: 1, 4: 2}),
        evaluate("radix.lock_count", node=1, terminals=[3, 4], parent={1: None, 2: 1, 3: 1, 4: 2})), (1, 2)))
    rows.append(("int ceil(7 / 2), ceil(-7 / 2), floor(7 / 2), 7 mod 2, 7 / 2, 1[False]",
                 (INT_OPS.ceildiv(7, 2), INT_OPS.ceildiv(-7, 2), INT_OPS.floordiv(7, 2), INT_OPS.mod(7, 2),
                  INT_OPS.ratio(7, 2), INT_OPS.indicator(False)), (4, -3, 3, 1, Fraction(7, 2), 0)))
    return rows


def _canon(value: Any) -> bytes:
    """The project's canonical encoding written out by hand for None, ints, strings, bytes and tuples (0x07B's
    ``H``: SHA-256 over sorted-key, whitespace-free JSON; bytes as ``{"$bytes": hex}``)."""
    import json

    def plain(v: Any) -> Any:
        if isinstance(v, bytes):
            return {"$bytes": v.hex()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return json.dumps(plain(value), sort_keys=True, separators=(",", ":")).encode()


def keys_0x07B() -> Rows:
    """0x07B: the chain ``h_i = H(h_(i-1), X_i, E_i)`` over full blocks, with the extras the seed lists: the LoRA
    name on every block, each multimodal feature overlapping the block with its block-relative offset, the cache
    salt on block 0 only, and the SHA-256 of the prompt-embedding rows the block covers; the lookup key appends the
    group id (4 bytes, big-endian); 0x07D: a partial tail binds its rows, their count and the policy id; 0x01A: a
    group block of k hash blocks takes every k-th fine hash."""
    from kvexact.reference import keys as k
    from kvexact.reference.rejections import rejection_of

    def sha(payload: Any) -> bytes:
        return hashlib.sha256(_canon(payload)).digest()

    tokens = tuple(range(100, 132))  # 32 tokens, two blocks of 16
    rows = tuple(bytes([i]) for i in range(32))
    feats = (k.MultimodalFeature("img", 10, 10), k.MultimodalFeature("edge", 16, 4), k.MultimodalFeature("end", 12, 4))
    inputs = k.KeyInputs(tokens, lora_name="L", mm_features=feats, cache_salt="s", prompt_embed_rows=rows)
    # [10, 20) crosses the boundary at 16; [16, 20) starts on it (block 1 only); [12, 16) ends on it (block 0 only)
    e0 = (("lora", "L"), ("mm", "img", 10), ("mm", "end", 12), ("cache_salt", "s"),
          ("prompt_embeds", hashlib.sha256(bytes(range(16))).hexdigest()))
    e1 = (("lora", "L"), ("mm", "img", 10 - 16), ("mm", "edge", 0),
          ("prompt_embeds", hashlib.sha256(bytes(range(16, 32))).hexdigest()))
    h0 = sha((None, tokens[:16], e0))
    h1 = sha((h0, tokens[16:], e1))
    out: Rows = [("block extras 0 and 1", (k.block_extra_keys(inputs, 0, 16), k.block_extra_keys(inputs, 16, 32)),
                  (e0, e1)),
                 ("no extras declared", k.block_extra_keys(k.KeyInputs(tokens), 0, 16), None),
                 ("chain of 32 tokens", k.hash_full_blocks(inputs, 16), [h0, h1]),
                 ("chain of 31 tokens: one full block", len(k.hash_full_blocks(k.KeyInputs(tokens[:31]), 16)), 1),
                 ("chain of 15 tokens: none", k.hash_full_blocks(k.KeyInputs(tokens[:15]), 16), []),
                 ("a change in block 1 keeps h_0, changes h_1",
                  (lambda hs: (hs[0] == h0, hs[1] == h1))(k.hash_full_blocks(
                      k.KeyInputs((*tokens[:20], 7, *tokens[21:]), lora_name="L", mm_features=feats, cache_salt="s",
                                  prompt_embed_rows=rows), 16)), (True, False)),
                 ("leading equal hashes", (k.matching_full_blocks([h0, h1], [h0, h0]),
                                           k.matching_full_blocks([h1, h0], [h0, h0]),
                                           k.matching_full_blocks([h0, h1], [h0, h1, h0])), (1, 0, 2))]
    key = k.ConcretePrefixKey(h1, 258)
    out.append(("lookup key of group 258, partial flags", (key.lookup_key, key.is_partial,
                                                         k.ConcretePrefixKey(h1, 0, valid_rows=3).is_partial),
                (h1 + bytes([0, 0, 1, 2]), False, True)))
    out.append(("group keys of P=16 at hash block 16", [x.lookup_key for x in k.prefix_keys(inputs, 16, 1)],
                [h0 + bytes([0, 0, 0, 1]), h1 + bytes([0, 0, 0, 1])]))
    tail_in = k.KeyInputs(tokens[:20], lora_name="L", cache_salt="s")
    t0 = sha((None, tokens[:16], (("lora", "L"), ("cache_salt", "s"))))
    tail = k.partial_tail_key(tail_in, 16, 2, "pol")
    out.append(("0x07D tail of 20 tokens at P=16: hash, group, rows",
                (tail.block_hash, tail.cache_group_id, tail.valid_rows),
                (sha(("partial", t0, tokens[16:20], 4, "pol", (("lora", "L"),))), 2, 4)))
    out.append(("0x07D tail of 3 tokens: no parent", k.partial_tail_key(k.KeyInputs(tokens[:3]), 16, 0, "p").block_hash,
                sha(("partial", None, tokens[:3], 3, "p", None))))
    fine = [bytes([i]) * 4 for i in range(7)]
    out.append(("0x01A group block 8 over hash block 4 (7 fine hashes); group block 4",
                (k.group_block_hashes(fine, 4, 8), k.group_block_hashes(fine, 4, 4), k.group_block_hashes(fine, 2, 8)),
                ([fine[1], fine[3], fine[5]], fine, [fine[3]])))
    refused = [
        ("hash block 4 in group block 6", lambda: k.group_block_hashes(fine, 4, 6), k.KeyRejection.HASH_BLOCK_NOT_DIVIDING),
        ("hash block 0", lambda: k.group_block_hashes(fine, 0, 8), k.KeyRejection.NON_POSITIVE_BLOCK_SIZE),
        ("group block 0", lambda: k.group_block_hashes(fine, 4, 0), k.KeyRejection.NON_POSITIVE_BLOCK_SIZE),
        ("group id -1", lambda: k.ConcretePrefixKey(h0, -1), k.KeyRejection.NEGATIVE_GROUP_ID),
        ("tail of 16 tokens at P=16", lambda: k.partial_tail_key(k.KeyInputs(tokens[:16]), 16, 0, "p"),
         k.KeyRejection.PARTIAL_TAIL_EMPTY),
        ("tail of 20 tokens claiming 5 rows", lambda: k.partial_tail_key(tail_in, 16, 0, "p", valid_rows=5),
         k.KeyRejection.PARTIAL_TAIL_ROWS_DRIFT),
        ("tail at P=0", lambda: k.partial_tail_key(tail_in, 0, 0, "p"), k.KeyRejection.NON_POSITIVE_BLOCK_SIZE),
        ("feature from -1", lambda: k.KeyInputs(tokens, mm_features=(k.MultimodalFeature("x", -1, 2),)),
         k.KeyRejection.FEATURE_OUT_OF_RANGE),
        ("feature of 0 tokens", lambda: k.KeyInputs(tokens, mm_features=(k.MultimodalFeature("x", 3, 0),)),
         k.KeyRejection.FEATURE_OUT_OF_RANGE),
        ("feature past the end", lambda: k.KeyInputs(tokens, mm_features=(k.MultimodalFeature("x", 30, 3),)),
         k.KeyRejection.FEATURE_OUT_OF_RANGE),
        ("31 embedding rows for 32 tokens", lambda: k.KeyInputs(tokens, prompt_embed_rows=rows[:31]),
         k.KeyRejection.PROMPT_EMBEDS_LENGTH_MISMATCH),
        ("empty salt", lambda: k.KeyInputs(tokens, cache_salt=""), k.KeyRejection.EMPTY_SALT),
        ("token -1", lambda: k.KeyInputs((1, -1)), k.KeyRejection.BAD_TOKEN_ID),
        ("token True", lambda: k.KeyInputs((1, True)), k.KeyRejection.BAD_TOKEN_ID)]
    out.append(("refused as", [(w, rejection_of(f)) for w, f, _r in refused], [(w, r) for w, _f, r in refused]))
    edge = k.KeyInputs(tokens, mm_features=(k.MultimodalFeature("x", 30, 2),), prompt_embed_rows=rows)  # ends at n
    out.append(("a feature ending on the last token is accepted", len(edge.mm_features), 1))
    return out


PC_SCHEMA = ('<schema name="s" generation="1"><module name="sys">a b c</module><module name="doc">d <param name="x" '
             'len="3"/> e</module><union><module name="u1">f g</module><module name="u2">h</module></union></schema>')


def prompt_cache_0x0CB() -> Rows:
    """0x0CB on markup: the schema lays modules out from 0 (sys at 0..2; doc's text at 3 and 7 around its 3-slot
    parameter x at 4..6; the union's members both at 8, the union as long as u1, so the schema ends at 10); a
    prompt's arguments fill the first positions of their slot and its own text starts at the schema's end; a cached
    module is taken only on a full hit (H_module: tokens, positions, schema, ABI); revising the schema or rotating
    the namespace drops the older generation's modules (0x06's successor namespace)."""
    import attrs

    from kvexact.reference import modules as pm
    from kvexact.reference import prompt_cache as pc
    from kvexact.reference.rejections import rejection_of

    w = pc.word_tokens
    schema = pc.parse_schema(PC_SCHEMA)
    mods = schema.modules
    out: Rows = [("schema id, generation, end", (schema.schema_id, schema.generation, schema.end), ("s", 1, 10)),
                 ("sys, doc, u1, u2: tokens, positions, union",
                  [(mods[n].token_ids, mods[n].position_ids, mods[n].union) for n in ("sys", "doc", "u1", "u2")],
                  [(w("a b c"), (0, 1, 2), None), (w("d e"), (3, 7), None), (w("f g"), (8, 9), 2), (w("h"), (8,), 2)]),
                 ("doc's slots; doc declared as", (dict(mods["doc"].slots), mods["doc"].declared()),
                  ({"x": (4, 5, 6)}, pm.DeclaredModule("doc", 3, 2, (3, 7)))),
                 ("a schema without a generation is generation 0",
                  pc.parse_schema('<schema name="t"><module name="m">z</module></schema>').generation, 0)]
    prompt = '<prompt schema="s" generation="1"><doc x="p q"/><sys/>tail words<u2/></prompt>'
    parsed = pc.parse_prompt(prompt, schema)
    out.append(("prompt items: id, tokens, cached, positions",
                [(i.module_id, i.token_ids, i.cached, d.positions()) for i, d in parsed.items],
                [("doc", w("d e"), True, (3, 7)), ("doc.x", w("p q"), False, (4, 5)),
                 ("sys", w("a b c"), True, (0, 1, 2)), ("#text@10", w("tail words"), False, (10, 11)),
                 ("u2", w("h"), True, (8,))]))
    ns = pm.Namespace("n", 0, frozenset({"alice"}))
    store = pc.ModuleStore().populate(schema, ["sys", "doc"], ns, "sem", "lay")
    lookups: list[str] = []
    segs = pc.assemble_markup("alice", prompt, schema, store, ns, "sem", "lay", lookups=lookups)
    out.append(("assembled: id, source, positions; lookups; gaps below 12",
                ([(g.module_id, g.source, g.position_ids) for g in segs], lookups, pc.gaps(segs, 12)),
                ([("sys", "cache", (0, 1, 2)), ("doc", "cache", (3, 7)), ("doc.x", "compute", (4, 5)),
                  ("u2", "compute", (8,)), ("#text@10", "compute", (10, 11))], ["doc", "sys", "u2"], (6, 9))))
    out.append(("another semantic ABI: the cached module refused as",
                rejection_of(lambda: pc.assemble_markup("alice", prompt, schema, store, ns, "sem-2", "lay")),
                pm.ModuleRejection.SEMANTIC_ABI_MISMATCH))
    revised = pc.parse_schema(PC_SCHEMA.replace('generation="1"', 'generation="2"'))
    store2, dropped = store.revise_schema(revised)
    out.append(("revision to generation 2 drops, keeps", (dropped, len(store2.receipts)), (("doc", "sys"), 0)))
    both = store.populate(pc.parse_schema(PC_SCHEMA.replace('name="s"', 'name="o"', 1)), ["u1"], ns, "sem", "lay")
    rotated, gone = both.rotate_namespace(pm.Namespace("n", 1, ns.readers))
    out.append(("rotating n to generation 1 drops", (gone, len(rotated.receipts)), (("doc", "sys", "u1"), 0)))
    out.append(("rotating another namespace drops", both.rotate_namespace(pm.Namespace("m", 5, ns.readers))[1], ()))
    out.append(("revising o keeps s's modules", both.revise_schema(
        pc.parse_schema(PC_SCHEMA.replace('name="s" generation="1"', 'name="o" generation="3"', 1)))[1], ("u1",)))
    receipt = store.receipts[("s", "sys", "")]
    out.append(("H_module of sys with itself; with other tokens, positions, schema generation, semantic ABI",
                [pm.module_hit(receipt, r) for r in (
                    receipt, attrs.evolve(receipt, token_ids=(1, 2, 3)), attrs.evolve(receipt, position_ids=(1, 2, 3)),
                    attrs.evolve(receipt, schema_generation=2), attrs.evolve(receipt, schema_id="o"),
                    attrs.evolve(receipt, semantic_manifest_digest="x"))],
                [True, False, False, False, False, False]))
    M, P = pc.MarkupRejection, pm.ModuleRejection
    schema_cases = [
        ("unclosed", '<schema name="s"><module name="a">x</module>', M.NOT_WELL_FORMED),
        ("prompt root", '<prompt schema="s"/>', M.WRONG_ROOT),
        ("schema without a name", '<schema><module name="a">x</module></schema>', M.MISSING_ATTRIBUTE),
        ("module without a name", '<schema name="s"><module>x</module></schema>', M.MISSING_ATTRIBUTE),
        ("generation x", '<schema name="s" generation="x"/>', M.BAD_NUMBER),
        ("len 0", '<schema name="s"><module name="a"><param name="p" len="0"/></module></schema>', M.BAD_NUMBER),
        ("len -1", '<schema name="s"><module name="a"><param name="p" len="-1"/></module></schema>', M.BAD_NUMBER),
        ("element in a module", '<schema name="s"><module name="a"><b/></module></schema>', M.UNKNOWN_ELEMENT),
        ("element in the schema", '<schema name="s"><b/></schema>', M.UNKNOWN_ELEMENT),
        ("element in a union", '<schema name="s"><union><b/></union></schema>', M.UNKNOWN_ELEMENT),
        ("text in the schema", '<schema name="s">hi<module name="a">x</module></schema>', M.STRAY_TEXT),
        ("text in a union", '<schema name="s"><union>hi<module name="a">x</module></union></schema>', M.STRAY_TEXT),
        ("two modules a", '<schema name="s"><module name="a">x</module><module name="a">y</module></schema>',
         M.DUPLICATE_MODULE),
        ("two params p", '<schema name="s"><module name="a"><param name="p" len="1"/><param name="p" len="2"/>'
         '</module></schema>', M.DUPLICATE_PARAMETER),
        ("empty union", '<schema name="s"><union></union></schema>', M.EMPTY_UNION)]
    out.append(("schemas refused as", [(n, rejection_of(lambda t=t: pc.parse_schema(t))) for n, t, _r in schema_cases],
                [(n, r) for n, _t, r in schema_cases]))
    prompt_cases = [
        ("schema root", '<schema name="s"/>', M.WRONG_ROOT),
        ("another schema", '<prompt schema="o"><sys/></prompt>', P.SCHEMA_ID_MISMATCH),
        ("undeclared module", '<prompt schema="s"><zz/></prompt>', M.UNDECLARED_MODULE),
        ("undeclared parameter", '<prompt schema="s"><doc y="1"/></prompt>', M.UNDECLARED_PARAMETER),
        ("argument of 4 tokens", '<prompt schema="s"><doc x="1 2 3 4"/></prompt>', M.ARGUMENT_TOO_LONG),
        ("sys twice", '<prompt schema="s"><sys/><sys/></prompt>', M.REPEATED_MODULE),
        ("u1 and u2", '<prompt schema="s"><u1/><u2/></prompt>', M.UNION_CONFLICT),
        ("text in an import", '<prompt schema="s"><sys>x</sys></prompt>', M.CONTENT_IN_IMPORT),
        ("element in an import", '<prompt schema="s"><sys><u1/></sys></prompt>', M.CONTENT_IN_IMPORT),
        ("generation -1", '<prompt schema="s" generation="-1"><sys/></prompt>', M.BAD_NUMBER)]
    out.append(("prompts refused as", [(n, rejection_of(lambda t=t: pc.parse_prompt(t, schema)))
                                       for n, t, _r in prompt_cases], [(n, r) for n, _t, r in prompt_cases]))
    out.append(("an argument of exactly 3 tokens, an empty import, are accepted",
                [len(pc.parse_prompt(t, schema).items) for t in ('<prompt schema="s"><doc x="1 2 3"/></prompt>',
                                                                 '<prompt schema="s"><sys></sys></prompt>')], [2, 1]))
    out.append(("a stale revision, bob's assembly, refused as",
                (rejection_of(lambda: store.revise_schema(schema)),
                 rejection_of(lambda: pc.assemble_markup("bob", prompt, schema, store, ns, "sem", "lay"))),
                (M.STALE_REVISION, P.UNAUTHORIZED_NAMESPACE)))
    return out


def revocation_spec_0x0CE() -> Rows:
    """0x0CE against ``spec/NamespaceRevocation.tla`` (the embedded checker as the oracle): in every state of the
    seed's scenario (t1 publishes, offloads, leases, executes, is revoked in seven steps) and of a few others (an
    unauthorized arrival, a request made stale by a revocation, a block freed after its entry is evicted), the
    reference's enabled steps lead to exactly the spec's successor states, and each invariant twin agrees with the
    spec's invariant, also in states that break them. A refused step is refused by the enabling condition that
    fails (the spec's conjunct)."""
    import attrs

    from kvexact.conformance.machines.revocation import RevocationMachine
    from kvexact.reference import revocation as rv
    from kvexact.reference.labs import revocation as rv_lab
    from kvexact.reference.rejections import rejection_of

    model = RevocationMachine.model()
    e1 = rv.Entry("t1", 0, 1)
    plan = rv_lab.PUBLISH_T1 + [(rv.offload, (e1,))] + rv_lab.LEASE_T1 + [(rv.execute, ("t1",))] + rv_lab.REVOKE_T1
    init = rv.RevState.init()
    states = [rv.play(init, plan[:k])[0] for k in range(len(plan) + 1)]
    published = states[len(rv_lab.PUBLISH_T1)]
    others: rv.Plan = [(rv.arrive, ("t2", "t1")), (rv.arrive, ("t1", "t1")), (rv.authorize, ("t1",)),
                       (rv.revoke_stop_admission, ("t1",)), (rv.revoke_advance_generation, ("t1",))]
    states += [rv.play(init, others[:k])[0] for k in range(1, len(others) + 1)]
    evicted = rv.evict_entry(published, e1)[0]
    states += [evicted, rv.free_block(evicted, 1)[0]]
    states += [rv.play(published, [(rv.arrive, ("t2", "t2")), (rv.authorize, ("t2",)), (rv.lookup, ("t2",)),
                                   (rv.allocate, ("t2", 2))][:k])[0] for k in (3, 4)]
    leased = rv.play(published, rv_lab.LEASE_T1)[0]
    states.append(attrs.evolve(leased, index=frozenset()))  # the leased hit's entry evicted: a stale hit
    hit = rv.play(published, rv_lab.LEASE_T1[:3])[0]
    states.append(attrs.evolve(hit, index=frozenset()))  # a hit whose entry was evicted before its lease

    def key(st: rv.RevState) -> Any:
        return model.key(rv.project_tla(st))

    differ, names = [], set()
    for i, st in enumerate(states):
        steps = rv.enabled_steps(st)
        names |= {n for n, _p, _t in steps}
        ref = {key(take()[0]) for _n, _p, take in steps}
        spec = _spec_successors(model, rv.project_tla(st))
        if ref != spec:
            differ.append(i)
    broken = [attrs.evolve(states[-1], receipts=frozenset({rv.Held("t1", "t1", 0, 1)})),
              attrs.evolve(published, bytes_={1: "t2", 2: rv.NO_TENANT}),
              attrs.evolve(published, req={**published.req, "t2": rv.Req("hit", "t1", 0, 1, False)}),
              attrs.evolve(published, req={**published.req, "t2": rv.Req("leased", "t2", 0, 1, True)}),
              attrs.evolve(published, done={"t1": 1, "t2": 0}),
              attrs.evolve(states[len(plan)], external=frozenset({rv.Copy("t1", 0)})),
              attrs.evolve(states[len(plan)], owner={1: rv.Owner("t1", 0), 2: rv.NO_OWNER}),
              attrs.evolve(states[len(plan)], receipts=frozenset({rv.Held("t1", "t1", 0, 1)}),
                           leases=frozenset({rv.Held("t1", "t1", 0, 1)}))]
    spec_inv = dict(model.invariants)
    disagree = [(i, name) for i, st in enumerate(states + broken) for name, twin in rv.INVARIANTS.items()
                if twin(st) != (spec_inv[name](rv.project_tla(st), None, {}) is True)]
    R = rv.RevocationRejection
    refused = [
        ("free the free block 2", lambda: rv.free_block(published, 2), R.BLOCK_FREE),
        ("free the indexed block 1", lambda: rv.free_block(published, 1), R.BLOCK_INDEXED),
        ("free block 9", lambda: rv.free_block(published, 9), R.UNKNOWN_NAME),
        ("free the leased block 1", lambda: rv.free_block(attrs.evolve(leased, index=frozenset()), 1), R.BLOCK_BUSY),
        ("evict an entry twice", lambda: rv.evict_entry(evicted, e1), R.UNKNOWN_ENTRY),
        ("offload twice", lambda: rv.offload(states[len(rv_lab.PUBLISH_T1) + 1], e1), R.ALREADY_OFFLOADED),
        ("offload an unknown entry", lambda: rv.offload(published, rv.Entry("t2", 0, 2)), R.UNKNOWN_ENTRY),
        ("arrive as t3", lambda: rv.arrive(init, "t3", "t1"), R.UNKNOWN_NAME),
        ("arrive for t3", lambda: rv.arrive(init, "t1", "t3"), R.UNKNOWN_NAME),
        ("authorize t2 for t1", lambda: rv.authorize(states[len(plan) + 1], "t2"), R.UNAUTHORIZED_PRINCIPAL),
        ("reject t1's authorized arrival", lambda: rv.authorization_rejected(
            rv.play(init, [(rv.arrive, ("t1", "t1"))])[0], "t1"), R.AUTHORIZED_REQUEST),
        ("authorize after the stop", lambda: rv.authorize(rv.play(init, [(rv.arrive, ("t1", "t1")),
                                                                          (rv.revoke_stop_admission, ("t1",))])[0],
                                                          "t1"), R.ADMISSION_STOPPED),
        ("look up an idle request", lambda: rv.lookup(init, "t1"), R.WRONG_PHASE),
        ("allocate the owned block 1", lambda: rv.allocate(attrs.evolve(hit, req={**hit.req, "t1": attrs.evolve(
            hit.req["t1"], phase="miss")}), "t1", 1), R.BLOCK_OWNED),
        ("allocate block 7", lambda: rv.allocate(attrs.evolve(hit, req={**hit.req, "t1": attrs.evolve(
            hit.req["t1"], phase="miss")}), "t1", 7), R.UNKNOWN_NAME),
        ("lease an evicted hit", lambda: rv.acquire_lease(attrs.evolve(hit, index=frozenset()), "t1"),
         R.ENTRY_NOT_IN_INDEX),
        ("reject a current valid hit as stale", lambda: rv.stale_request_rejected(hit, "t1"), R.REQUEST_CURRENT),
        ("look up at a retired generation", lambda: rv.lookup(states[len(plan) + len(others)], "t1"),
         R.STALE_GENERATION)]
    return [("states whose successors differ from the spec's", differ, []),
            ("actions enabled somewhere (all 22 of Next)", len(names), 22),
            ("(state, invariant) where the twin disagrees with the spec", disagree, []),
            ("broken states break some invariant", [all(t(b) for t in rv.INVARIANTS.values()) for b in broken],
             [False] * len(broken)),
            ("refused as", [(w, rejection_of(f)) for w, f, _r in refused], [(w, r) for w, _f, r in refused])]


def namespaces_0x06() -> Rows:
    """0x06 "Invalidation Produces A Successor Namespace": a model-affecting invalidation makes generation g + 1
    current with the model generation advanced, an isolation reset keeps the model generation; the retired scope
    admits no lookup and no publication, a future one neither; an entry is visible only under exactly the lookup's
    namespace and generation. A namespace's digest is SHA-256 over its canonical encoding (its fields by name)."""
    import json

    from kvexact.reference import namespaces as nsm
    from kvexact.reference.rejections import rejection_of

    N, Why = nsm.NamespaceRejection, nsm.InvalidationReason
    ns = nsm.CacheIsolationNamespace("dep", "t1", "n1", 0, "salt", 4)
    other = nsm.CacheIsolationNamespace("dep", "t2", "n2", 3, None, 1)
    reg = nsm.create_namespace(nsm.create_namespace(nsm.NamespaceRegistry(), ns), other)
    out: Rows = []
    for why, model in ((Why.WEIGHTS, 5), (Why.ADAPTER, 5), (Why.REPRESENTATION, 5), (Why.ISOLATION_RESET, 4)):
        after, receipt = nsm.invalidate(reg, "n1", why)
        s = after.get("n1")
        out.append((f"invalidate n1 for {why.name}: generation, model generation, salt, retired, n2 kept, receipt",
                    (s.generation, s.model_generation, s.cache_salt, after.retired, after.get("n2") == other,
                     (receipt.retired, receipt.successor, receipt.reason)),
                    (1, model, "salt", frozenset({("n1", 0)}), True, (ns, s, why))))
    given, _ = nsm.invalidate(reg, "n1", Why.WEIGHTS, model_generation=9, cache_salt="new")
    out.append(("a given model generation and salt", (given.get("n1").model_generation, given.get("n1").cache_salt),
                (9, "new")))
    twice, _ = nsm.invalidate(nsm.invalidate(reg, "n1", Why.WEIGHTS)[0], "n1", Why.ISOLATION_RESET)
    out.append(("invalidated twice: generation, model generation, retired", (
        twice.get("n1").generation, twice.get("n1").model_generation, twice.retired),
        (2, 5, frozenset({("n1", 0), ("n1", 1)}))))
    after, _ = nsm.invalidate(reg, "n1", Why.WEIGHTS)
    out.append(("authorized lookup of t1 in n1@1; scope", (nsm.authorize_lookup(after, "t1", "n1", 1).generation,
                                                          after.get("n1").scope), (1, ("n1", 1))))
    refused = [("lookup in n3", lambda: nsm.authorize_lookup(after, "t1", "n3", 0), N.UNKNOWN_NAMESPACE),
               ("t2 in n1", lambda: nsm.authorize_lookup(after, "t2", "n1", 1), N.UNAUTHORIZED_TENANT),
               ("lookup in n1@0", lambda: nsm.authorize_lookup(after, "t1", "n1", 0), N.RETIRED_GENERATION),
               ("lookup in n1@2", lambda: nsm.authorize_lookup(after, "t1", "n1", 2), N.FUTURE_GENERATION),
               ("publish to n1@0", lambda: nsm.authorize_publish(after, ("n1", 0)), N.PUBLISH_TO_RETIRED_GENERATION),
               ("publish to n1@2", lambda: nsm.authorize_publish(after, ("n1", 2)), N.FUTURE_GENERATION),
               ("publish to n3@0", lambda: nsm.authorize_publish(after, ("n3", 0)), N.UNKNOWN_NAMESPACE),
               ("entry of n2 for n1", lambda: nsm.check_entry_scope(ns, ("n2", 0)), N.CROSS_NAMESPACE_ENTRY),
               ("entry of n1@1 for n1@0", lambda: nsm.check_entry_scope(ns, ("n1", 1)), N.STALE_ENTRY_GENERATION),
               ("n1 again", lambda: nsm.create_namespace(reg, ns), N.DUPLICATE_NAMESPACE),
               ("empty tenant", lambda: nsm.CacheIsolationNamespace("dep", "", "n", 0, None, 0), N.BAD_NAMESPACE_FIELD),
               ("generation -1", lambda: nsm.CacheIsolationNamespace("dep", "t", "n", -1, None, 0),
                N.BAD_NAMESPACE_FIELD),
               ("model generation True", lambda: nsm.CacheIsolationNamespace("dep", "t", "n", 0, None, True),
                N.BAD_NAMESPACE_FIELD),
               ("publication policy ''", lambda: nsm.CacheIsolationNamespace("d", "t", "n", 0, None, 0, ""),
                N.BAD_NAMESPACE_FIELD)]
    out.append(("refused as", [(w, rejection_of(f)) for w, f, _r in refused], [(w, r) for w, _f, r in refused]))
    out.append(("accepted: publish to n1@1, entry n1@0 for n1@0", (
        rejection_of(lambda: nsm.authorize_publish(after, ("n1", 1))), rejection_of(lambda: nsm.check_entry_scope(
            ns, ("n1", 0)))), (None, None)))
    out.append(("entry n1@0, n1@1, n2@0 visible to n1@0", [nsm.entry_visible(ns, sc) for sc in (
        ("n1", 0), ("n1", 1), ("n2", 0))], [True, False, False]))
    fields = {"deployment_namespace": "dep", "tenant_id": "t1", "namespace_id": "n1", "generation": 0,
              "cache_salt": "salt", "model_generation": 4, "publication_policy": "publish-full-blocks"}
    out.append(("n1's digest", ns.digest, hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":"))
                                                         .encode()).hexdigest()))
    return out


def sessions_0x0CC() -> Rows:
    """0x0CC: a turn resumes (prefills U) only when every field of the receipt matches it, else it recomputes
    H + U and names the first field that broke; no receipt is a recompute without a reason."""
    import attrs

    from kvexact.reference import sessions as ss

    receipt = ss.SessionReuseReceipt("s", "t", "n", 2, "sem", "lay", (0, 100), "rope", 7, "obj")
    turn = ss.SessionTurn("s", "t", "n", 2, "sem", "lay", "rope", 100, 20, 7)
    R = ss.SessionRejection
    variants = [("session", attrs.evolve(receipt, session_id="x"), R.SESSION_MISMATCH),
                ("tenant", attrs.evolve(receipt, tenant_id="x"), R.TENANT_MISMATCH),
                ("namespace id", attrs.evolve(receipt, namespace_id="x"), R.NAMESPACE_ROTATED),
                ("namespace generation", attrs.evolve(receipt, namespace_generation=1), R.NAMESPACE_ROTATED),
                ("semantic digest", attrs.evolve(receipt, semantic_digest="x"), R.SEMANTIC_CHANGED),
                ("layout digest", attrs.evolve(receipt, layout_digest="x"), R.LAYOUT_CHANGED),
                ("position contract", attrs.evolve(receipt, position_contract="x"), R.POSITION_CONTRACT_CHANGED),
                ("incomplete save", attrs.evolve(receipt, save_complete=False), R.INCOMPLETE_SAVE),
                ("interval [0, 99)", attrs.evolve(receipt, covered_interval=(0, 99)), R.INTERVAL_MISMATCH),
                ("interval [1, 100)", attrs.evolve(receipt, covered_interval=(1, 100)), R.INTERVAL_MISMATCH),
                ("publication 6", attrs.evolve(receipt, publication_generation=6), R.STALE_PUBLICATION),
                ("publication 8", attrs.evolve(receipt, publication_generation=8), R.STALE_PUBLICATION)]
    return [("matching receipt: resume, prefill, reason", ss.plan_turn(receipt, turn), ss.ResumePlan(True, 20)),
            ("no receipt", ss.plan_turn(None, turn), ss.ResumePlan(False, 100 + 20)),
            ("one field changed: plan", [(w, ss.plan_turn(r, turn)) for w, r, _x in variants],
             [(w, ss.ResumePlan(False, 120, x)) for w, _r, x in variants])]


def tables_0x0AB() -> Rows:
    """0x0AB/0x0AC: a dense staging table pads each row with -1 up to the longest (a padding cell is never read as
    a block); the kernel table of allocator blocks [3, 9] at 32 -> 16 tokens is [6, 7, 18, 19] (id q a + i);
    0x0BE: a chunk tree's ranges lie in [0, batch), nest, and cover every sequence."""
    import attrs

    from kvexact.reference import shared_prefix as sp
    from kvexact.reference import traversal as tv
    from kvexact.reference.rejections import rejection_of

    T, S = tv.TraversalRejection, sp.SharedPrefixRejection
    C = sp.TreeChunk
    good = [C("root", 4, 0, 4), C("a", 2, 0, 2), C("b", 2, 2, 4), C("a0", 1, 0, 1)]
    trees = [("[-1, 2)", [C("x", 1, -1, 2)], 3, S.BAD_COVERAGE), ("[0, 4) of 3", [C("x", 1, 0, 4)], 3, S.BAD_COVERAGE),
             ("[2, 2)", [C("r", 1, 0, 3), C("x", 1, 2, 2)], 3, S.BAD_COVERAGE),
             ("[0, 2) then [1, 3)", [C("r", 1, 0, 3), C("x", 1, 0, 2), C("y", 1, 1, 3)], 3, S.NOT_NESTED),
             ("[1, 3) then [0, 2)", [C("r", 1, 0, 3), C("x", 1, 1, 3), C("y", 1, 0, 2)], 3, S.NOT_NESTED),
             ("sequence 2 uncovered", [C("x", 1, 0, 2)], 3, S.UNCOVERED_SEQUENCE),
             ("the good tree", good, 4, None), ("[0, 3) of 3", [C("x", 1, 0, 3)], 3, None)]
    fx = sp.draw_fixture(good, 4, 3, 2, seed=1)  # d_qk 3, d_v 2
    short_q = (*fx.q[:2], fx.q[2][:2], fx.q[3])
    fixtures = [("the drawn fixture", fx, None),
                ("query 2 of width 2", attrs.evolve(fx, q=short_q), S.WIDTH_MISMATCH),
                ("chunk a with 1 K row of 2", attrs.evolve(fx, k=(fx.k[0], fx.k[1][:1], *fx.k[2:])),
                 S.ROW_COUNT_MISMATCH),
                ("chunk b with 1 V row of 2", attrs.evolve(fx, v=(*fx.v[:2], fx.v[2][:1], fx.v[3])),
                 S.ROW_COUNT_MISMATCH),
                ("a K row of width 2 in root", attrs.evolve(fx, k=((fx.k[0][0][:2], *fx.k[0][1:]), *fx.k[1:])),
                 S.WIDTH_MISMATCH),
                ("a V row of width 3 in a0", attrs.evolve(fx, v=(*fx.v[:3], ((*fx.v[3][0], 0.0),))),
                 S.WIDTH_MISMATCH),
                ("queries for 3 sequences: root [0, 4) outside", attrs.evolve(fx, q=fx.q[:3]), S.BAD_COVERAGE)]
    dispatch = [(a, (d.outcome, d.kernel_block_tokens)) for a in (16, 48, 24, 64, 12, 4)
                for d in [tv.dispatch_kernel_block(a)]]
    return [("0x0AA/0x0AC dispatch over the pinned (8, 16, 32): P_a 16, 48, 24, 64, 12, 4", dispatch,
             [(16, ("selected", 16)), (48, ("fallback", 16)), (24, ("fallback", 8)), (64, ("fallback", 32)),
              (12, ("rejected", None)), (4, ("rejected", None))]),
            ("dense table of [5, 6, 7], [8], []", tv.dense_staging_table([[5, 6, 7], [8], []]),
             [[5, 6, 7], [8, -1, -1], [-1, -1, -1]]),
            ("dense table of nothing", tv.dense_staging_table([]), []),
            ("dense table of [1, 2, 3, 4], [5], [6, 7] (4 - 1 = 3 and 4 - 2 = 2 pads)",
             tv.dense_staging_table([[1, 2, 3, 4], [5], [6, 7]]), [[1, 2, 3, 4], [5, -1, -1, -1], [6, 7, -1, -1]]),
            ("cells 0 and 1 of [8, -1]", (tv.read_table_cell([8, -1], 0), rejection_of(
                lambda: tv.read_table_cell([8, -1], 1))), (8, T.PADDING_CELL_READ)),
            ("kernel table of [3, 9] at 32 -> 16, at 32 -> 8", (tv.kernel_table([3, 9], 32, 16),
                                                               tv.kernel_table([3], 32, 8)),
             ([6, 7, 18, 19], [12, 13, 14, 15])),
            ("path of sequence 0, 1, 3 in the good tree", [sp.path_of(good, q) for q in (0, 1, 3)],
             [[0, 1, 3], [0, 1], [0, 2]]),
            ("chunk trees refused as", [(w, rejection_of(lambda t=t, n=n: sp.check_tree(t, n))) for w, t, n, _r in trees],
             [(w, r) for w, _t, _n, r in trees]),
            ("fixtures refused as", [(w, rejection_of(lambda f=f: sp.check_fixture(f))) for w, f, _r in fixtures],
             [(w, r) for w, _f, r in fixtures])]


def prefix_admit_0x07() -> Rows:
    """0x07C/0x07D: admitting a hit maps its full blocks into the new request (shared: refcount 2, no copy) and
    appends the rest through the allocator; a partial-tail hit maps only its full blocks and copies the tail's
    valid rows into a fresh block of its own, so the source tail stays private; a receipt taken before the index
    changed is stale. Publishing a request whose length is a whole number of blocks publishes no partial tail."""
    import attrs

    from kvexact.reference import lifecycle
    from kvexact.reference.keys import KeyInputs
    from kvexact.reference.labs import prefix as px_lab
    from kvexact.reference.prefix import PrefixPolicy, PrefixRejection, admit
    from kvexact.reference.rejections import Rejected, rejection_of

    s = px_lab.STREAM
    cache = px_lab.cache_with(s[:50])
    a_ids = [h.block_id for h in cache.alloc.request("A").tables[0]]
    receipt = cache.lookup(px_lab.request("B", s[:50]))
    rec, appends = admit(cache, receipt, s[:50])
    b_ids = [h.block_id for h in rec.tables[0]]
    out: Rows = [("B over A's 50 tokens: context, blocks per group, shared with A, appended rows",
                  (rec.context_tokens, [len(t) for t in rec.tables], b_ids[:3] == a_ids[:3], b_ids[3] in a_ids,
                   len(appends)), (50, [4, 4], True, False, 50 - 48)),
                 ("refcounts of A's first three blocks, of B's new block",
                  ([cache.alloc.pools[0].refcount(b) for b in a_ids[:3]], cache.alloc.pools[0].refcount(b_ids[3])),
                  ([2, 2, 2], 1)),
                 ("B's tokens", cache.alloc.tokens_of("B"), s[:50])]
    tail = PrefixPolicy(partial_tail=True)
    partial = px_lab.cache_with(s[:33], tail)
    a_tail = [h.block_id for h in partial.alloc.request("A").tables[0]]
    b = partial.lookup(px_lab.request("B", s[:25]), tail)
    rec, appends = admit(partial, b, s[:25], tail)
    ids = [h.block_id for h in rec.tables[0]]
    out.append(("0x07D B's 25 tokens over A's tail: hit, copied rows; blocks, shared first, private second, "
                "appended rows, A's tail refcount",
                (b.runtime_hit_tokens, b.copy_valid_partial_rows, len(ids), ids[0] == a_tail[0], ids[1] in a_tail,
                 len(appends), partial.alloc.pools[0].refcount(a_tail[2])), (24, 8, 2, True, False, 25 - 16, 1)))
    out.append(("0x07D B's tokens, A's tail rows kept", (partial.alloc.tokens_of("B"),
                                                        partial.alloc.pools[0].blocks[a_tail[2]].rows),
                (s[:25], s[32:33])))
    short = px_lab.cache_with(s[:20], tail)  # one full block and a 4-row tail
    over = short.lookup(px_lab.request("B", s[:24]), tail)
    out.append(("0x07D B's 24 tokens over A's 20 (16 + a 4-row tail): hit, partial rows, bundles",
                (over.runtime_hit_tokens, over.copy_valid_partial_rows, len(over.matched_group_handles)), (20, 4, 2)))
    stale_cache = px_lab.cache_with(s[:50])
    stale = stale_cache.lookup(px_lab.request("B", s[:50]))
    stale_cache.alloc.allocate("Z", [7, 8, 9])
    out.append(("a receipt from before Z's allocation admitted as", rejection_of(
        lambda: admit(stale_cache, stale, s[:50])), PrefixRejection.STALE_INDEX_SNAPSHOT))
    whole = px_lab.fixture_cache()
    whole.alloc.allocate("W", s[:32])
    keys = whole.publish("W", KeyInputs(s[:32]), px_lab.NAMESPACE, 0, tail)
    odd = px_lab.fixture_cache()
    odd.alloc.allocate("W", s[:33])
    out.append(("published keys of 32 tokens, of 33 tokens, under the partial policy (P=16)",
                (len(keys), len(odd.publish("W", KeyInputs(s[:33]), px_lab.NAMESPACE, 0, tail))), (2, 3)))
    again = whole.publish("W", KeyInputs(s[:32]), px_lab.NAMESPACE, 0, tail)
    out.append(("keys published again; publication generation after two publications",
                (again, whole.publication_generation), ((), 2)))
    one = cache.lookup(px_lab.request("C", s[:1]))  # S_cap = 0: nothing can be reused, one row recomputed
    out.append(("a 1-token prompt with logits: hit, recompute; an empty one refused as",
                (one.runtime_hit_tokens, one.prompt_rows_recomputed, rejection_of(lambda: cache.lookup(
                    px_lab.request("C", ())))), (0, 1, PrefixRejection.EMPTY_PROMPT_WITH_LOGITS)))
    out.append(("an empty prompt without logits: hit, recompute",
                (lambda r: (r.runtime_hit_tokens, r.prompt_rows_recomputed))(
                    cache.lookup(px_lab.request("C", (), requires_logits=False))), (0, 0)))
    other = attrs.evolve(px_lab.request("C", s[:20]), manifest_sha256="ab" * 32)
    try:
        cache.lookup(other)
        detail = ""
    except Rejected as exc:
        detail = str(exc)
    out.append(("another manifest: refused as; naming both digests' first 12 hex digits",
                (rejection_of(lambda: cache.lookup(other)), f"{'ab' * 6} != {px_lab.MANIFEST[:12]}" in detail),
                (PrefixRejection.MANIFEST_MISMATCH, True)))
    lifecycle.release(cache.alloc, "B")
    out.append(("A's blocks after B's release: refcounts", [cache.alloc.pools[0].refcount(x) for x in a_ids[:3]],
                [1, 1, 1]))
    return out


def radix_index_0x08() -> Rows:
    """0x08's request protocol through the normative prefix index (slots 1..8): admission matches the longest
    cached prefix and reserves the lowest free slots for the rest; finishing caches the path; a cancel frees only
    the private slots; eviction frees whole unlocked leaves; a short pool refuses admission and extension without
    changing anything."""
    from kvexact.reference import radix
    from kvexact.reference.index import IndexConfig, RadixIndex, check_index

    ix = RadixIndex(IndexConfig(pool_slots=8))
    root = ix.state.nodes[radix.ROOT]  # the tree is created at clock 0 with an unlocked, empty root
    out: Rows = [("empty: free slots, protocol check", (sorted(ix.free_slot_ids()), check_index(ix)),
                  (list(range(1, 9)), None)),
                 ("empty: clock; root's created, accessed, locks, tokens, parent",
                  (ix.state.clock, root.created_at, root.last_access, root.lock_ref, root.token_ids, root.parent_id),
                  (0, 0, 0, 0, (), None))]
    first = ix.admit("r1", [1, 2, 3])
    rows1 = list(ix.slot_ids("r1"))
    ix.finish("r1")
    second = ix.admit("r2", [1, 2, 3, 4])
    grown = ix.extend("r2", 5)
    rows2 = list(ix.slot_ids("r2"))
    out.append(("r1 then r2 over r1's 3 tokens: matched, rows, extended, free",
                (first, rows1, second, grown, rows2, sorted(ix.free_slot_ids())),
                (0, [1, 2, 3], 3, True, [1, 2, 3, 4, 5], [6, 7, 8])))
    ix.cancel("r2")
    out.append(("after r2's cancel: free slots", sorted(ix.free_slot_ids()), [4, 5, 6, 7, 8]))
    short = ix.admit("r3", list(range(10, 16)))  # 6 new tokens, 5 free slots
    out.append(("6 new tokens with 5 free slots: admitted, free slots after", (short, sorted(ix.free_slot_ids())),
                (None, [4, 5, 6, 7, 8])))
    freed = ix.evict(2)
    out.append(("evicting 2 tokens frees the whole leaf [1, 2, 3]; free after",
                ([list(x) for x in freed], sorted(ix.free_slot_ids())), ([[1, 2, 3]], list(range(1, 9)))))
    ix.self_check()
    full = ix.admit("r4", list(range(20, 28)))
    out.append(("8 tokens into 8 slots: matched, rows; then an extension", (full, list(ix.slot_ids("r4")),
                                                                          ix.extend("r4", 99)),
                (0, list(range(1, 9)), False)))
    return out


def vmm_spec_0x06F() -> Rows:
    """0x06F against ``spec/VirtualMapping.tla``: the seed's 24-operation trace (18 operations and 23 single-row
    writes: 6 + 4 + 1 + 3 + 8 + 1) and a second trace on the same geometry (page of 4 tokens, 3 bundles of 4
    handles) are steps of the spec's actions. The second: E on slot 1 maps 2 pages synchronously for 5 tokens, its
    V1 scalar (t 4, h 1, d 3) lies at u = (4 x 2 x 4 + 1 x 4 + 3) x 2 = 78 B, page 1, delta 14, in handle 7 (bundle
    H4-H7, V1 last); F on slot 2 maps asynchronously, reclaiming E's retained bundles when no free one is left
    (lowest slot first); nothing is ready until awaited; a third request finds no bundle."""
    import attrs

    from kvexact.conformance.machines.vmm_trace import VmmTraceRecorder
    from kvexact.reference import vmm
    from kvexact.reference.labs import vmm as lab
    from kvexact.reference.rejections import rejection_of

    V = vmm.VmmRejection
    rec = VmmTraceRecorder(lab.SEED_CONFIG)
    rec.attach(vmm.VmmState.initial(lab.SEED_CONFIG))
    try:
        lab.seed_trace_0x06F()
    finally:
        rec.detach()
    seed = _validated(rec)
    out: Rows = [("seed trace: valid, steps, actions", (seed.ok, seed.steps, seed.actions),
                  (True, 18 + 23, {"reserve_virtual": 1, "create_handles": 1, "alloc_reqid": 4, "map_bundle": 5,
                                   "write_rows": 23, "free_reqid": 4, "reclaim_inactive": 2, "await_mapping": 1}))]
    s = vmm.VmmState.initial(lab.SEED_CONFIG)
    rec = VmmTraceRecorder(lab.SEED_CONFIG)
    rec.attach(s)
    try:
        s, _ = vmm.reserve_virtual(s)
        s, _ = vmm.create_handles(s)
        s, _ = vmm.alloc_reqid(s, 1, "E")
        s, sync = vmm.step_sync(s, 1, 5)
        s, _ = vmm.write_rows(s, 1, 1, 0, 5)
        out.append(("E's sync receipt: slot, generation, ready pages, covered, handles, ready",
                    (sync.slot, sync.generation, sync.ready_pages, sync.covered_tokens, sync.page_handles,
                     sync.ready_before_use), (1, 1, 2, 8, ((0, 1, 2, 3), (4, 5, 6, 7)), True)))
        out.append(("E's V1 (t 4, h 1, d 3), K0 (t 0, h 0, d 0): handle, delta",
                    (vmm.translate(s, "V", 1, 1, 4, 1, 3), vmm.translate(s, "K", 0, 1, 0, 0, 0)), ((7, 14), (0, 0))))
        used = vmm.require_use(s, 1, 1, 5)
        out.append(("E uses 5 rows: covered; 6 rows, t 8, generation 2 refused as", (used.covered_tokens, [
            rejection_of(f) for f in (lambda: vmm.require_use(s, 1, 1, 6),
                                      lambda: vmm.translate(s, "K", 0, 1, 8, 0, 0),
                                      lambda: vmm.require_use(s, 1, 2, 1))]),
            (8, [V.ROWS_NOT_VALID, V.MAPPING_NOT_READY, V.STALE_GENERATION])))
        s, _ = vmm.free_reqid(s, 1)
        s, _ = vmm.alloc_reqid(s, 2, "F")
        s, pending = vmm.step_async(s, 2, 8)
        out.append(("F's async receipt for 8 tokens: ready pages, covered, ready; E's pages left; a write, a read of "
                    "page 0, of page 1 refused as",
                    (pending.ready_pages, pending.covered_tokens, pending.ready_before_use, len(s.slot(1).pages),
                     rejection_of(lambda: vmm.write_rows(s, 2, 1, 0, 1)),
                     rejection_of(lambda: vmm.translate(s, "K", 0, 2, 0, 0, 0)),
                     rejection_of(lambda: vmm.translate(s, "K", 0, 2, 4, 0, 0))),
                    (0, 0, False, 1, V.MAPPING_NOT_READY, V.MAPPING_NOT_READY, V.MAPPING_NOT_READY)))
        s, ready = vmm.await_mapping(s, 2)
        out.append(("F awaited: ready pages, covered, handles", (ready.ready_pages, ready.covered_tokens,
                                                                ready.page_handles),
                    (2, 8, ((8, 9, 10, 11), (4, 5, 6, 7)))))
        s, _ = vmm.step_async(s, 2, 12)
        s, full = vmm.await_mapping(s, 2)
        s, _ = vmm.alloc_reqid(s, 0, "G")
        out.append(("F at 12 tokens: covered, third bundle; G, F at 13, release with F mapped, refused as",
                    (full.covered_tokens, full.page_handles[2], rejection_of(lambda: vmm.step_async(s, 0, 1)),
                     rejection_of(lambda: vmm.step_async(s, 2, 13)), rejection_of(lambda: vmm.release_handles(s))),
                    (12, (0, 1, 2, 3), V.NO_FREE_HANDLES, V.ROWS_BEYOND_TMAX, V.HANDLES_STILL_MAPPED)))
        s, freed = vmm.free_reqid(s, 2, unmap=True)
        s, _ = vmm.free_reqid(s, 0)
        s, _ = vmm.release_handles(s)
        s, _ = vmm.release_virtual(s)
        out.append(("F freed with unmap: unmaps; end phase, handles", (freed.unmaps, s.phase, s.handles_created),
                    (3, "VA_RELEASED", False)))
    finally:
        rec.detach()
    big = attrs.evolve(lab.SEED_CONFIG, handles=int("300"))  # 75 bundles of 4: counts past the small ints
    b, _ = vmm.create_handles(vmm.reserve_virtual(vmm.VmmState.initial(big))[0])
    out.append(("300 handles created, none mapped: released", rejection_of(lambda: vmm.release_handles(b)), None))
    steps = len(rec.records)
    vmm.alloc_reqid(vmm.create_handles(vmm.reserve_virtual(vmm.VmmState.initial(lab.SEED_CONFIG))[0])[0], 0, "H")
    second = _validated(rec)
    out.append(("second trace: valid, failure; nothing recorded after detach", (second.ok, second.failure,
                                                                                 len(rec.records) == steps),
                (True, None, True)))
    return out


def telemetry_0x0CF_export() -> Rows:
    """0x0CF/0x0BL: the Prometheus text exposition (0.0.4) escapes a backslash and a newline in HELP and a quote in
    a label value, writes an integral value without a decimal point; a live allocator's pool reads as one snapshot
    (blocks by state, recorded = derived references); 0x06F's v23 state observed: 3 bundles of 4 handles mapped, a
    ready frontier of 3 pages x 4 tokens; the funnel formula holds only for non-increasing stage counts."""
    from kvexact.reference import telemetry as tm
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.formulas import evaluate
    from kvexact.reference.formulas_all import load_all
    from kvexact.reference.labs.vmm import seed_trace_0x06F
    from kvexact.reference.pool import GroupConfig
    from kvexact.reference.rejections import rejection_of

    load_all()
    metric = tm.Metric("kvexact_x", "gauge", "a\\b\nc", (({"stage": 'a"b\\c'}, 3.0), ({}, 2.5)))
    text = tm.to_prometheus([metric])
    expected = ("# HELP kvexact_x a\\\\b\\nc\n# TYPE kvexact_x gauge\n"
                'kvexact_x{stage="a\\"b\\\\c"} 3\nkvexact_x 2.5\n')
    alloc = Allocator([GroupConfig(0, 0, 4, 64)], [[10, 11, 12, 13, 14]])
    alloc.allocate("A", [1, 2, 3, 4, 5])  # 5 tokens in blocks of 4: two live blocks
    g = tm.reconcile_pool(tm.allocator_pool_snapshot(alloc, 0))
    counters = tm.GranularityCounters()
    counters.observe_vmm({t.label: t for t in seed_trace_0x06F()}["v23"].state)
    def label(n: int) -> Any:
        return rejection_of(lambda: tm.check_hygiene(tm.Metric("kvexact_y", "gauge", "h", (({"stage": "x" * n}, 1),))))

    funnel = [evaluate("telemetry.funnel_monotone", stage_counts=c) for c in ([5, 4, 4, 1], [5, 4, 6, 1], [5, 6],
                                                                             [3, 3])]
    from kvexact.reference.labs import telemetry as tm_lab

    std = {m.name: m for m in tm.standard_metrics(tm_lab.run_funnel_fixture(), tm.reconcile_pool(tm_lab.POOL_FIXTURE))}
    gauges = {m.name: m.samples for m in counters.metrics()}
    return [("exposition of one gauge", text, expected),
            ("a label value of MAX_LABEL_VALUE characters, of one more", (label(tm.MAX_LABEL_VALUE),
                                                                           label(tm.MAX_LABEL_VALUE + 1)),
             (None, tm.TelemetryRejection.RAW_PROMPT_IN_METRICS)),
            ("0x0CF standard metrics: funnel counts, pool blocks by state, capacity, kinds",
             ([v for _l, v in std["kvexact_reuse_funnel_total"].samples],
              {lab["state"]: v for lab, v in std["kvexact_pool_blocks"].samples},
              std["kvexact_pool_capacity_blocks"].samples, sorted({m.kind for m in std.values()})),
             ([12, 11, 9, 7, 6, 6, 5, 4, 4], {"free": 3, "evictable": 2, "live": 5, "reserved_or_copying": 2},
              (({}, 3 + 2 + 5 + 2),), ["counter", "gauge"])),
            ("0x0BL gauges of v23", (gauges["kvexact_vmm_ready_frontier_tokens"], gauges["kvexact_vmm_mapped_groups"]),
             ((({}, 12),), (({}, 12),))),
            ("allocator pool: blocks, by state, recorded/derived/delta",
             (g.pool_blocks, g.blocks_by_state, (g.refcount_recorded, g.refcount_derived, g.refcount_delta)),
             (5, {"free": 3, "evictable": 0, "live": 2, "reserved_or_copying": 0}, (2, 2, 0))),
            ("v23 observed: page group bytes, mapped handles, ready frontier tokens",
             (counters.ledger["vmm_page_group_bytes"], counters.ledger["vmm_mapped_groups"],
              counters.ledger["vmm_ready_frontier_tokens"]), (64, 3 * 4, 3 * 4)),
            ("funnel monotone: [5, 4, 4, 1], [5, 4, 6, 1], [5, 6], [3, 3]", [bool(x) for x in funnel],
             [True, False, False, True])]


def radix_spec_0x08() -> Rows:
    """0x08 against ``spec/RadixIndex.tla`` (tokens 1..3, the spec model's alphabet): a admits [1, 2, 3, 1] into
    slots 1-4, decodes 2 into slot 5 and finishes; b's [1, 2, 3, 3] matches 3 tokens (splitting a's edge after 3),
    takes slot 6 and finishes; c's [1, 2, 2] matches 2 (another split), takes slot 7 and is cancelled (slot 7 free
    again); evicting 2 tokens frees the least recently used unlocked leaf, a's [1, 2] in slots 4, 5. Every step is a
    step of the spec's action."""
    from kvexact.conformance.machines.radix_trace import RadixTraceRecorder
    from kvexact.reference import radix as rx
    from kvexact.reference.rejections import rejection_of

    st = rx.RadixState.empty(16, first_slot_id=1)
    trace = RadixTraceRecorder(st, 4, 16)
    receipts: dict[str, Any] = {}

    def apply(label: str, op: Any, *args: Any) -> None:
        nonlocal st
        before = st
        st, receipt = op(st, *args)
        trace.step(op.__name__, before, st, args, receipt)
        receipts[label] = receipt

    apply("a match", rx.match_and_lock, "a", 0, [1, 2, 3, 1])
    apply("a reserve", rx.reserve, "a", [1, 2, 3, 4])
    apply("a decode", rx.decode, "a", 2, 5)
    apply("a finish", rx.cache_finished, "a", [1, 2, 3, 1, 2], [1, 2, 3, 4, 5])
    finished_a = st
    apply("b match", rx.match_and_lock, "b", 0, [1, 2, 3, 3])
    b_matched = st
    apply("b reserve", rx.reserve, "b", [6])
    receipts["b reserve state"] = st
    apply("b finish", rx.cache_finished, "b", [1, 2, 3, 3], [1, 2, 3, 6])
    after_a = st
    apply("c match", rx.match_and_lock, "c", 0, [1, 2, 2])
    apply("c reserve", rx.reserve, "c", [7])
    held = st
    apply("c cancel", rx.release_request, "c")
    apply("evict 2", rx.evict, 2)
    verdict = _validated(trace)
    leaf = max(finished_a.nodes)  # a's one edge
    after_lock = rx.lock(after_a, leaf)[0]  # after b's finish nothing is locked
    edges = sorted((n.token_ids, n.slot_ids) for n in st.nodes.values() if n.node_id != rx.ROOT)
    return [("b, c matched; b's prefix slots", (receipts["b match"].matched_tokens, receipts["c match"].matched_tokens,
                                                receipts["b match"].prefix_slot_ids), (3, 2, (1, 2, 3))),
            ("b's receipt verified while b holds it; after b's reserve (a later version, still leased)",
             (rejection_of(lambda: rx.verify_handoff(b_matched, receipts["b match"])),
              rejection_of(lambda: rx.verify_handoff(receipts["b reserve state"], receipts["b match"]))), (None, None)),
            ("evicting 2 tokens: slots freed", receipts["evict 2"].freed_slot_ids, ((4, 5),)),
            ("edges left; free slots", (edges, sorted(st.free_slot_ids)),
             ([((1, 2), (1, 2)), ((3,), (3,)), ((3,), (6,))], [4, 5, *range(7, 17)])),
            ("spec steps: valid, count, failure", (verdict.ok, verdict.steps, verdict.failure), (True, 11, None)),
            ("after a's finish: edges", finished_a.edges(), {(1, 2, 3, 1, 2): (1, 2, 3, 4, 5)}),
            ("c releases slot 7: free, c's private", (lambda t: (7 in t.free_slot_ids, t.private_slot_ids.get("c")))(
                rx.release(held, "c")[0]), (True, None)),
            ("release slot 8 by c, anything by z; unlock the unlocked leaf", (
                rejection_of(lambda: rx.release(held, "c", [8])), rejection_of(lambda: rx.release(held, "z")),
                rejection_of(lambda: rx.unlock(after_a, leaf))),
             (rx.RadixRejection.SLOT_NOT_PRIVATE, rx.RadixRejection.UNKNOWN_REQUEST, rx.RadixRejection.LOCK_UNDERFLOW)),
            ("locks on the leaf's path (2 nodes after b's split) after one lock, then one unlock",
             ([after_lock.nodes[n].lock_ref for n in after_lock.path(leaf)],
              [n.lock_ref for n in rx.unlock(after_lock, leaf)[0].nodes.values()]),
             ([1, 1], [0] * len(after_lock.nodes)))]

def frozen_0x03F() -> Rows:
    """0x03F: A's K row (layer 24, token 16, head 1, lane 5) frozen at 4,311,744,512 + 98,570 re-resolves to that
    address at its table version; a drifted address or another version is refused. 0x08G: a handoff receipt stays
    valid at any tree version it names (here 1,000 versions on), compared by value. 0x10A: a compatibility
    manifest's digest is SHA-256 over its equality-bearing fields (the provenance left out; no namespace given is
    the namespace "" at generation 0)."""
    import json

    import attrs

    from kvexact.reference import manifest as mf
    from kvexact.reference import radix as rx
    from kvexact.reference import translate as tr
    from kvexact.reference.labs.translate import loop4_snapshot
    from kvexact.reference.rejections import rejection_of

    snap = loop4_snapshot()
    doubled = attrs.evolve(snap, pools=(*snap.pools, snap.pools[0]))  # group 0's pool twice: one pool per group
    version = snap.request("A").table_version
    frozen = tr.FrozenAddress("A", version, 16, 24, "K", 1, 5, int("4311744512") + 98_570)
    got = tr.check_frozen_address(snap, frozen)
    out: Rows = [("A's frozen K row: address", got.byte_address, 4_311_744_512 + 98_570),
                 ("drifted by 2 B, at version + 1: refused as", (
                     rejection_of(lambda: tr.check_frozen_address(snap, attrs.evolve(frozen, byte_address=frozen
                                                                                    .byte_address + 2))),
                     rejection_of(lambda: tr.check_frozen_address(snap, attrs.evolve(frozen, table_version=version
                                                                                    + 1)))),
                  (tr.TranslateRejection.FROZEN_ADDRESS_DRIFT, tr.TranslateRejection.STALE_SUCCESSOR_VERSION))]
    out.append(("the 0x03F snapshot, with group 0's pool twice: validated, refused as",
                (rejection_of(lambda: tr.validate_snapshot(snap)), rejection_of(lambda: tr.validate_snapshot(doubled))),
                (None, tr.TranslateRejection.MISSING_GROUP_POOL)))
    st, receipt = rx.match_and_lock(rx.RadixState.empty(8, first_slot_id=1), "a", 0, [1, 2])
    st, _ = rx.release_request(st, "a")  # no lease: the receipt is valid only at the version it names
    later = attrs.evolve(st, version=int(str(st.version + 1000)))
    moved = attrs.evolve(receipt, tree_version=int(str(st.version + 1000)))
    moved = attrs.evolve(moved, receipt_sha256=rx.handoff_fields_sha256(moved))
    out.append(("a released: its receipt at the tree's version 1000 on; one version behind",
                (rejection_of(lambda: rx.verify_handoff(later, moved)),
                 rejection_of(lambda: rx.verify_handoff(attrs.evolve(later, version=later.version + 1), moved))),
                (None, rx.RadixRejection.STALE_VERSION)))
    fields = dict(cache_abi_sha256="abi", cache_layout_sha256="lay", model_generation=3, adapter_identity="",
                  weight_transform_identity="w", position_contract_sha256="pos", covered_token_ids=[5, 6],
                  input_side_data_identity="", cache_isolation_namespace=["", 0], cache_salt=None,
                  publication_generation=0)
    m = mf.CacheCompatibilityManifest("abi", "lay", 3, "", "w", "pos", [5, 6],
                                      provenance=mf.Provenance(request_id="r9"))
    out.append(("manifest digest (provenance left out)", m.digest, hashlib.sha256(
        json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()))
    other = attrs.evolve(m, provenance=mf.Provenance(tokenizer_revision="t2"))
    out.append(("another provenance: same digest, compatible", (other.digest == m.digest,
                                                               mf.semantic_cache_compatible(m, other).compatible),
                (True, True)))
    return out


def telemetry_alerts_0x0CF() -> Rows:
    """0x0CF "Counter Families And Alert Meaning": each alert is a joint predicate over two samples; each fires
    exactly when its conditions hold together and stays silent when one is missing (at the boundary values). The
    reconciliation counts a block whose recorded and derived references differ, from either side."""
    import attrs

    from kvexact.reference import telemetry as tm
    from kvexact.reference.rejections import rejection_of

    base = tm.TelemetrySample(at_s=0, free_blocks=3, evictable_blocks=2, allocation_failures=5,
                              locked_eviction_rejects=5, refcount_recorded=9, refcount_derived=9,
                              refcount_mismatch_age_s=0, required_frontier_tokens=32, ready_frontier_tokens=32,
                              map_wait_age_s=0, candidate_matches=9, compatible_matches=7, generation_rejects=1,
                              cross_namespace_rejects=0, stale_namespace_rejects=0)

    def alerts(**cur: Any) -> tuple[str, ...]:  # the previous sample is ``base``, 10 s earlier
        return tm.evaluate_alerts(base, attrs.evolve(base, at_s=10, **cur), slo_budget_s=5, grace_s=30)

    cases = [
        ("nothing changed", {}, ()),
        ("free 0, evictable 0, failures 5 -> 6", dict(free_blocks=0, evictable_blocks=0, allocation_failures=6),
         ("allocator_exhaustion",)),
        ("free 0, evictable 0, failures steady", dict(free_blocks=0, evictable_blocks=0), ()),
        ("free 1, evictable 0, failures rising", dict(free_blocks=1, evictable_blocks=0, allocation_failures=6), ()),
        ("free 0, evictable 1, locked rejects rising", dict(free_blocks=0, evictable_blocks=1,
                                                           locked_eviction_rejects=6), ("locked_cache_pressure",)),
        ("free 1, evictable 1, locked rejects rising", dict(free_blocks=1, evictable_blocks=1,
                                                           locked_eviction_rejects=6), ()),
        ("free 0, evictable 1, locked rejects steady", dict(free_blocks=0, evictable_blocks=1), ()),
        ("refs 10 vs 9 for 30 s", dict(refcount_recorded=10, refcount_mismatch_age_s=30), ("reference_leak",)),
        ("refs 8 vs 9 for 31 s", dict(refcount_recorded=8, refcount_mismatch_age_s=31), ("reference_leak",)),
        ("refs 10 vs 9 for 29 s", dict(refcount_recorded=10, refcount_mismatch_age_s=29), ()),
        ("required 33 > ready 32, waited 6 s", dict(required_frontier_tokens=33, map_wait_age_s=6), ("mapping_stall",)),
        ("required 33 > ready 32, waited 5 s", dict(required_frontier_tokens=33, map_wait_age_s=5), ()),
        ("required 32 = ready 32, waited 6 s", dict(map_wait_age_s=6), ()),
        ("candidates steady, compatible 7 -> 6", dict(compatible_matches=6), ("compatibility_churn",)),
        ("candidates 9 -> 10, compatible 7 -> 6", dict(candidate_matches=10, compatible_matches=6), ()),
        ("candidates steady, generation rejects 1 -> 2", dict(generation_rejects=2), ("stale_receipt_race",)),
        ("candidates 9 -> 8, generation rejects rising", dict(candidate_matches=8, generation_rejects=2), ()),
        ("cross-namespace rejects 0 -> 1", dict(cross_namespace_rejects=1), ("security_boundary_pressure",)),
        ("stale-namespace rejects 0 -> 1", dict(stale_namespace_rejects=1), ("security_boundary_pressure",)),
        ("free 0 falling from 3, evictable 0, failures rising, compatible falling",
         dict(free_blocks=0, evictable_blocks=0, allocation_failures=6, compatible_matches=6),
         ("allocator_exhaustion", "compatibility_churn"))]
    snap = tm.PoolSnapshot(4, {0: "live", 1: "live", 2: "live", 3: "free"}, {0: 1, 1: 2}, {"r": (0, 1), "s": (1, 2)},
                           {}, 40, 32)
    g = tm.reconcile_pool(snap)  # derived: block 0 once, 1 twice, 2 once (recorded 0): one block differs
    leased = tm.reconcile_pool(attrs.evolve(snap, recorded_refcounts={0: 1, 1: 2, 2: 1, 3: 1},
                                            leases={"l": (2,)}, request_maps={"r": (0, 1), "s": (1,)}))
    return [("alerts", [(w, alerts(**c)) for w, c, _e in cases], [(w, e) for w, _c, e in cases]),
            ("pool: recorded, derived, delta, mismatched blocks, map lag",
             (g.refcount_recorded, g.refcount_derived, g.refcount_delta, g.refcount_mismatched_blocks,
              g.mapping_lag_tokens), (3, 4, -1, 1, 40 - 32)),
            ("leases count as references; block 3 recorded 1, derived 0",
             (leased.refcount_recorded, leased.refcount_derived, leased.refcount_mismatched_blocks), (5, 4, 1)),
            ("ready 40 of 32 required: lag", tm.reconcile_pool(attrs.evolve(snap, ready_frontier_tokens=48))
             .mapping_lag_tokens, 0),
            ("a block id 4 of 4, a state 'lost', 3 blocks of 4 in states: refused as", [rejection_of(lambda m=m: tm
             .reconcile_pool(attrs.evolve(snap, block_states=m))) for m in (
                 {0: "live", 1: "live", 2: "live", 4: "free"}, {0: "live", 1: "live", 2: "live", 3: "lost"},
                 {0: "live", 1: "live", 2: "live"})], [tm.TelemetryRejection.POOL_UNRECONCILED] * 3)]


def _fresh(text: str) -> str:
    """``text`` as a new string object, equal to the literal but not the interned one (built at run time)."""
    return "".join(list(text))


def _big(n: int) -> int:
    """``n`` as a new int object (above 256, outside CPython's small-int cache, so ``is`` and ``==`` differ)."""
    return int(str(n))


def identity_0x06_0x08() -> Rows:
    """Equal but not identical values (ids, generations and lengths above 256; names built at run time) are the
    same to the reference: 0x06 an entry of namespace n@1000 serves a lookup of n@1000; 0x08A an edge of 300
    tokens over 300 slots; 0x07B 300 embedding rows for 300 tokens; 0x08 a request of 300 tokens in a pool of 300
    slots caches its path and a second request over the same tokens matches all 300 (slots 1..300, the lowest
    free), a slot the tree already owns offered again is no duplicate, and a request publishes 300 tokens into its
    300 slots; 0x03H a successor at request generation 1000 is adopted; 0x0CE an entry whose namespace name is built
    at run time is its tenant's hit, and block 1000 under a lease is busy; 0x0CB a schema named at run time is the
    prompt's schema. (Each row kills a cosmic-ray ``==`` -> ``is`` or ``!=`` -> ``is not`` mutant that small ints
    and interned strings let survive.)"""
    import attrs

    from kvexact.reference import formulas_seed as fs
    from kvexact.reference import keys as k
    from kvexact.reference import modules as pm
    from kvexact.reference import namespaces as nsm
    from kvexact.reference import prompt_cache as pc
    from kvexact.reference import radix
    from kvexact.reference import revocation as rv
    from kvexact.reference.formulas import INT_OPS
    from kvexact.reference.index import IndexConfig, RadixIndex, check_index
    from kvexact.reference.labs import revocation as rv_lab
    from kvexact.reference.labs.translate import loop4_snapshot, loop4_successor_snapshot
    from kvexact.reference.rejections import rejection_of
    from kvexact.reference.translate import consume_successor

    lookup = nsm.CacheIsolationNamespace("dep", "tenant", _fresh("ns-one"), _big(1000), None, 0)
    out: Rows = [("entry of ns-one@1000 for ns-one@1000; of ns-one@1001",
                  (rejection_of(lambda: nsm.check_entry_scope(lookup, (_fresh("ns-one"), _big(1000)))),
                   rejection_of(lambda: nsm.check_entry_scope(lookup, (_fresh("ns-one"), _big(1001))))),
                  (None, nsm.NamespaceRejection.STALE_ENTRY_GENERATION)),
                 ("edges of 300 tokens over 300 slots; over 299",
                  (fs.edge_lengths_equal(INT_OPS, edge_tokens=tuple(range(300)), edge_slots=tuple(range(1000, 1300))),
                   fs.edge_lengths_equal(INT_OPS, edge_tokens=tuple(range(300)), edge_slots=tuple(range(1000, 1299)))),
                  (True, False)),
                 ("300 embedding rows for 300 tokens accepted; 299 refused as",
                  (len(k.KeyInputs(tuple(range(300)), prompt_embed_rows=(b"r",) * 300).tokens),
                   rejection_of(lambda: k.KeyInputs(tuple(range(300)), prompt_embed_rows=(b"r",) * 299))),
                  (300, k.KeyRejection.PROMPT_EMBEDS_LENGTH_MISMATCH))]
    ix = RadixIndex(IndexConfig(pool_slots=300))
    first = ix.admit("r1", [_big(1000 + i) for i in range(300)])
    ix.finish("r1")
    second = ix.admit("r2", [_big(1000 + i) for i in range(300)])
    rows2 = list(ix.slot_ids("r2"))
    ix.finish("r2")
    out.append(("300 tokens twice in 300 slots: matched first, second; r2's rows; free; protocol check",
                (first, second, rows2, sorted(ix.free_slot_ids()), check_index(ix)),
                (0, 300, list(range(1, 301)), [], None)))
    # 0x08: slot 1000 reserved by q, published under token 7, then offered again by q for the same token: already
    # the tree's own slot, so no duplicate (not a second owner)
    tree = radix.RadixState.empty(1, first_slot_id=1000)
    tree = radix.reserve(tree, "q", [_big(1000)])[0]
    tree, once = radix.insert(tree, [7], [_big(1000)], "q")
    again = radix.insert(tree, [7], [_big(1000)], "q")[1]
    out.append(("slot 1000 under token 7, then again: cached prefix, duplicates each time",
                (once.prefix_tokens, once.duplicate_slot_ids, again.prefix_tokens, again.duplicate_slot_ids),
                (0, (), 1, ())))
    pool = radix.reserve(radix.RadixState.empty(300, first_slot_id=1), "q", [_big(i) for i in range(1, 301)])[0]
    unfinished = radix.publish_unfinished(pool, "q", [_big(1000 + i) for i in range(300)],
                                         [_big(i) for i in range(1, 301)])[1]
    out.append(("q publishes 300 tokens into its 300 reserved slots: duplicates, tokens already cached",
                (unfinished.duplicate_slot_ids, unfinished.detail["prefix_tokens"]), ((), 0)))
    # 0x03H: C at request generation 1000 (both snapshots) adopts its successor's v3 table; 0x0CE: an entry of t1
    # (the name built at run time) is t1's hit; block 1000 leased is busy
    def gen1000(snap: Any) -> Any:
        return attrs.evolve(snap, requests=tuple(attrs.evolve(r, request_generation=_big(1000))
                                                 for r in snap.requests))

    adopted = consume_successor(gen1000(loop4_snapshot()), gen1000(loop4_successor_snapshot()), "C")
    out.append(("C at generation 1000 adopts the successor: version, generation",
                (adopted.request("C").table_version, adopted.request("C").request_generation), (3, 1000)))
    published = rv.play(rv.RevState.init(), rv_lab.PUBLISH_T1)[0]
    authorized = rv.play(published, rv_lab.LEASE_T1[:2])[0]
    fresh_entry = attrs.evolve(authorized, index=frozenset(rv.Entry(_fresh(e.ns), e.gen, e.block)
                                                           for e in authorized.index))
    after = rv.lookup(fresh_entry, "t1")[0].req["t1"]
    lease = rv.Held("t1", "t1", 0, _big(1000))
    out.append(("t1's lookup of its entry (ns built at run time): phase, block; block 1000 leased is busy",
                (after.phase, after.block, rv._busy(attrs.evolve(published, leases=frozenset({lease})), _big(1000))),
                ("hit", 1, True)))
    name = "schema-long"
    schema = pc.parse_schema(PC_SCHEMA.replace('name="s"', f'name="{name}"', 1))
    ns = pm.Namespace("n", 0, frozenset({"alice"}))
    store = pc.ModuleStore().populate(schema, ["sys"], ns, "sem", "lay")
    prompt = f'<prompt schema="{_fresh(name)}" generation="1"><sys/></prompt>'
    segs = pc.assemble_markup("alice", prompt, schema, store, ns, "sem", "lay")
    out.append(("prompt of schema-long (named at run time): sys from", [(g.module_id, g.source) for g in segs],
                [("sys", "cache")]))
    return out


def identity_0x03_0x0CE() -> Rows:
    """More equal-but-distinct values (issue #25, the seed-41/43 identity survivors the first identity case does not
    reach): 0x07 a root child published in namespace ns-a is no semantic frontier for a lookup in ns-b, and a
    prompt-cap receipt (its path named at run time) claiming all 20 prompt rows is refused (S_runtime <= S_prompt -
    1); 0x06 a lookup of n1@1000 is authorized in n1@1000; 0x0CC a receipt whose position contract is built at run
    time resumes its turn; 0x06F a slot with 300 pages all ready is ready before use, a VA in phase UNRESERVED (named
    at run time) reserves, a handle in neither a page nor the free set breaks the ledger; 0x08 a tree with a node id
    above 256 (parent ids rebuilt equal) is a consistent tree; 0x03 Loop 4 with group g1 renumbered 1000 (each copy
    of the id its own object) resolves A's token 0 in layer 24 to the same slot and address as group 1 does; 0x0CE
    a namespace whose revocation state "none" is built at run time admits and starts its revocation."""
    import attrs

    from kvexact.reference import namespaces as nsm
    from kvexact.reference import radix, vmm
    from kvexact.reference import revocation as rv
    from kvexact.reference import sessions as ss
    from kvexact.reference import translate as tr
    from kvexact.reference.labs import prefix as px_lab
    from kvexact.reference.labs import vmm as vmm_lab
    from kvexact.reference.labs.translate import loop4_snapshot
    from kvexact.reference.prefix import PrefixPolicy, PrefixRejection, verify_receipt
    from kvexact.reference.rejections import Rejected, rejection_of

    s = px_lab.STREAM
    cache = px_lab.cache_with(s[:48])
    cache.registry = nsm.create_namespace(cache.registry, nsm.CacheIsolationNamespace(
        "deploy", px_lab.TENANT, "ns-b", 0, None, 0))
    elsewhere = cache.lookup(attrs.evolve(px_lab.request("B", s[:48]), namespace_id="ns-b"))
    short = cache.lookup(px_lab.request("C", s[:20]))
    capped = px_lab.forge(short, logits_path=_fresh("prompt-cap"), runtime_hit_tokens=20)
    out: Rows = [("ns-b's lookup of ns-a's 48 tokens: semantic, indexed, hit tokens",
                  (elsewhere.semantic_match_tokens, elsewhere.indexed_tokens, elsewhere.runtime_hit_tokens), (0, 0, 0)),
                 ("a prompt-cap receipt claiming 20 of 20 prompt rows refused as",
                  rejection_of(lambda: verify_receipt(capped, PrefixPolicy(), 2)), PrefixRejection.LOGITS_CAP_EXCEEDED)]
    reg = nsm.create_namespace(nsm.NamespaceRegistry(),
                               nsm.CacheIsolationNamespace("dep", "t1", "n1", _big(1000), None, 0))
    out.append(("t1's lookup of n1@1000: generation; a publication to n1@1000 refused as",
                (nsm.authorize_lookup(reg, "t1", "n1", _big(1000)).generation,
                 rejection_of(lambda: nsm.authorize_publish(reg, ("n1", _big(1000))))), (1000, None)))
    receipt = ss.SessionReuseReceipt("s", "t", "n", 2, "sem", "lay", (0, 100), _fresh("rope-long"), 7, "obj")
    turn = ss.SessionTurn("s", "t", "n", 2, "sem", "lay", _fresh("rope-long"), 100, 20, 7)
    out.append(("a receipt with the turn's position contract (built at run time): plan", ss.plan_turn(receipt, turn),
                ss.ResumePlan(True, 20)))
    cfg = vmm_lab.SEED_CONFIG
    init = vmm.VmmState.initial(cfg)
    wide = attrs.evolve(init, slots=(vmm.SlotState(0, active=True, pages=((1,),) * 300, ready_pages=_big(300)),))
    reserved = vmm.reserve_virtual(attrs.evolve(init, phase=_fresh("UNRESERVED")))[0]
    leaked = attrs.evolve(init, handles_created=True, free_handles=frozenset(range(1, cfg.handles)))
    try:
        vmm.check_state(leaked)
        why = ""
    except Rejected as exc:
        why = exc.detail
    out.append(("300 pages, 300 ready: ready before use; UNRESERVED (built at run time) reserved to; handle 0 of 12 "
                "leaked: refused, as handles mapped + free != created",
                (vmm.frontier_receipt(wide, 0).ready_before_use, reserved.phase, why),
                (True, "VA_RESERVED", f"mapped 0 + free {cfg.handles - 1} handles != created {cfg.handles}")))
    tree = radix.reserve(radix.RadixState.empty(4, first_slot_id=1), "q", [1, 2, 3])[0]
    tree = radix.insert(radix.insert(tree, [5, 6], [1, 2], "q")[0], [5, 7], [1, 3], "q")[0]  # [5] -> [6], [7]

    def ren(n: int | None) -> int | None:  # each use its own int object
        return n if n is None or n == radix.ROOT else _big(1000 + n)

    big_tree = attrs.evolve(tree, nodes={ren(i): attrs.evolve(n, node_id=ren(n.node_id), parent_id=ren(n.parent_id),
                                                               children={t: ren(c) for t, c in n.children.items()})
                                         for i, n in tree.nodes.items()})
    out.append(("tree [5] -> [6], [7] with node ids from 1000: split node's children, refused as",
                (sorted(big_tree.nodes[1002].children.values()), rejection_of(lambda: radix.check_state(big_tree))),
                ([1001, 1003], None)))
    snap = loop4_snapshot()

    def regroup(g: int) -> int:
        return _big(1000) if g == 1 else g

    layout = attrs.evolve(snap.layout, cache_groups=tuple(attrs.evolve(g, cache_group_id=regroup(g.cache_group_id))
                                                          for g in snap.layout.cache_groups))
    g1000 = tr.KVSnapshot(layout, tuple(attrs.evolve(p, cache_group_id=regroup(p.cache_group_id))
                                        for p in snap.pools),
                          tuple(attrs.evolve(r, block_tables=tuple(
                              (regroup(g), tuple(attrs.evolve(h, cache_group_id=regroup(h.cache_group_id))
                                                 for h in t)) for g, t in r.block_tables)) for r in snap.requests))
    before = tr.resolve_kv_address(snap, "A", 0, 24, "K", 0, 0)
    after = tr.resolve_kv_address(g1000, "A", 0, 24, "K", 0, 0)
    out.append(("g1 as group 1000: A's token 0, layer 24: slot, address as group 1's; group 1000's layers",
                (after.slot_id, after.byte_address, layout.group(_big(1000)).layer_ids),
                (before.slot_id, before.byte_address, tuple(range(24, 32)))))
    rev = rv.RevState.init()
    fresh = attrs.evolve(rev, rev={k: _fresh("none") for k in rev.rev})
    admitted = rv.authorize(rv.arrive(fresh, "t1", "t1")[0], "t1")[0].req["t1"].phase
    stopped = rv.revoke_stop_admission(fresh, "t1")[0].rev["t1"]
    out.append(("t1 with revocation state none (built at run time): t1's request, after stop-admission",
                (admitted, stopped), ("authorized", "stopped")))
    return out


def bounds_0x03I_0x0CE() -> Rows:
    """Bounds checked by order, not only at their edge (issue #25, the seed-51 survivors). 0x03I: Loop 4's A grown
    to 35 tokens reads tokens 32, 33, 34 of layer 24 (group 1, 16-token blocks): token 32 is row 0 of block 2002,
    which holds 1 row, so it resolves; rows 1 and 2 are not materialized (offset >= valid rows, not only ==).
    0x0AA: every size of the geometry (kernel block, partition, warp, scalar) must be positive, so a negative one
    is refused by name (NON_POSITIVE_SIZE) before any arithmetic; 0x0AB: a request length of -1, or a bool, in a
    ragged ledger's batch is refused (NEGATIVE_LENGTH). 0x0CE (spec/NamespaceRevocation.tla): AuthorizationRejected
    is enabled for an arrived request when ``rev[ns] # "none"``, so t1 arrived at its own namespace while t1's
    revocation is at "advanced" (a state name that sorts before "none") is turned away, back to idle; and
    RevokeStopAdmission needs ``nsGen[n] < MaxGen``: with MaxGen 1000 and t1 at generation 1000 (after 1000
    revocations each generation is a new int object, here built at run time) a further revocation is refused
    (REVOCATION_BOUND), at 999 it starts."""
    import attrs

    from kvexact.reference import revocation as rv
    from kvexact.reference import translate as tr
    from kvexact.reference import traversal as tv
    from kvexact.reference.labs.translate import loop4_snapshot
    from kvexact.reference.rejections import rejection_of

    snap = loop4_snapshot()
    grown = attrs.evolve(snap.request("A"), context_length_tokens=35)
    snap = attrs.evolve(snap, requests=tuple(grown if r.request_id == "A" else r for r in snap.requests))
    rows = [(t, rejection_of(lambda t=t: tr.resolve_kv_address(snap, "A", t, 24, "K", 0, 0))) for t in (32, 33, 34)]
    T = tv.TraversalRejection
    sizes = [("kernel_block_tokens", -16), ("partition_tokens", -512), ("warp_size", -32), ("scalar_bytes", -2)]
    geometry = [(what, rejection_of(lambda what=what, v=v: tv.kernel_geometry(2049, **{"kernel_block_tokens": 16,
                                                                                        what: v})))
                for what, v in sizes]
    ledgers = [rejection_of(lambda b=b: tv.ragged_table_ledger([64, b], 16)) for b in (-1, True)]
    init = rv.RevState.init()
    advanced = rv.play(init, [(rv.arrive, ("t1", "t1")), (rv.revoke_stop_admission, ("t1",)),
                              (rv.revoke_advance_generation, ("t1",))])[0]
    turned_away = rv.authorization_rejected(advanced, "t1")[0]

    def at_generation(g: int) -> rv.RevState:
        return attrs.evolve(init, max_gen=_big(1000), ns_gen={"t1": g, "t2": 0})

    bound = [rejection_of(lambda g=g: rv.revoke_stop_admission(at_generation(g), "t1")) for g in (_big(1000),
                                                                                                  _big(999))]
    return [("A at 35 tokens, layer 24: tokens 32, 33, 34 refused as", rows,
             [(32, None), (33, tr.TranslateRejection.ROW_NOT_MATERIALIZED),
              (34, tr.TranslateRejection.ROW_NOT_MATERIALIZED)]),
            ("kernel geometry at T = 2049 with one negative size refused as", geometry,
             [(what, T.NON_POSITIVE_SIZE) for what, _v in sizes]),
            ("ragged ledger of [64, -1], [64, True] at P_k = 16 refused as", ledgers, [T.NEGATIVE_LENGTH] * 2),
            ("t1 arrived while t1's revocation is at advanced: rev, rejection of turning it away, t1's phase after",
             (advanced.rev["t1"], rejection_of(lambda: rv.authorization_rejected(advanced, "t1")),
              turned_away.req["t1"].phase), ("advanced", None, "idle")),
            ("stop admission of t1 at generation 1000, 999 of MaxGen 1000 refused as", bound,
             [rv.RevocationRejection.REVOCATION_BOUND, None])]


def refusals_0x03_0x08() -> Rows:
    """Refusals no other quick case reached (issue #25, lines no quick check executed). 0x0A: decoding Loop 4's A
    (33 tokens, 3 blocks of 16) in group 1 with its table cut to 2 handles, or with its block 2001 renamed 2009 (no
    descriptor), is refused (TABLE_INDEX_OUT_OF_RANGE, UNKNOWN_PHYSICAL_ID); a snapshot without group 1's pool
    has no pool to read (MISSING_GROUP_POOL). 0x08 (the normative radix index): an empty tree needs a non-negative
    pool size and first slot (MALFORMED_INPUT) and a positive int page size (BAD_PAGE_SIZE); the path of a node
    that is not in the tree is refused (UNKNOWN_NODE); slots are non-negative ints (MALFORMED_INPUT), each once
    in one list (DUPLICATE_INPUT_SLOT); a decode step of a request that holds nothing is UNKNOWN_REQUEST; a
    publication's tokens and slots pair up one to one (TOKEN_SLOT_LENGTH_MISMATCH), its new slots lie in the pool
    (SLOT_OUT_OF_POOL) and are free (OWNED_SLOT_REUSE). After q reserves slots 1, 2, 3 of 1..4 and caches [5, 6]
    in slots 1, 2, the tree owns slots 1, 2 and q's private tail is slot 3. The tree check refuses a root that
    owns an edge (EMPTY_EDGE), a terminal lock on a node not in the tree or with -1 holders (LOCK_COUNT_MISMATCH),
    a node under a parent that is not there (ORPHAN_NODE) and a negative lock count (LOCK_UNDERFLOW); unlocking
    [5] of [5] -> [6], [7] when the one holder ends at [6] is LOCK_UNDERFLOW (no holder ends at [5]). When o has
    cached [5] in slot 1 and q, holding slots 2 and 3, publishes [5] in slot 2, slot 2 is a duplicate and goes
    back to the free slots (with 4), q keeps slot 3 private."""
    import attrs

    from kvexact.reference import radix
    from kvexact.reference import translate as tr
    from kvexact.reference import traversal as tv
    from kvexact.reference.handles import BlockHandle
    from kvexact.reference.labs.translate import loop4_snapshot
    from kvexact.reference.rejections import rejection_of

    snap = loop4_snapshot()
    a = snap.request("A")

    def with_g1(table: tuple[BlockHandle, ...]) -> tr.KVSnapshot:
        changed = attrs.evolve(a, block_tables=((0, a.table(0)), (1, table)))
        return attrs.evolve(snap, requests=tuple(changed if r.request_id == "A" else r for r in snap.requests))

    g1 = a.table(1)
    renamed = (g1[0], attrs.evolve(g1[1], block_id=2009), g1[2])
    no_pool = attrs.evolve(snap, pools=snap.pools[:1])
    T = tr.TranslateRejection
    decode = [rejection_of(lambda s=s: tv.decode_traversal(s, "A", 1)) for s in (with_g1(g1[:2]), with_g1(renamed),
                                                                                 no_pool)]
    R, E = radix.RadixRejection, radix.RadixState.empty
    empties = [rejection_of(f) for f in (lambda: E(-1), lambda: E(4, first_slot_id=-1), lambda: E(4, page_size=0),
                                         lambda: E(4, page_size=True))]
    tree = radix.reserve(E(4, first_slot_id=1), "q", [1, 2, 3])[0]
    tree = radix.insert(tree, [5, 6], [1, 2], "q")[0]
    inputs = [rejection_of(f) for f in (lambda: tree.path(99), lambda: radix.reserve(tree, "p", [4, -1]),
                                        lambda: radix.reserve(tree, "p", [4, True]),
                                        lambda: radix.reserve(tree, "p", [4, 4]),
                                        lambda: radix.decode(tree, "z", 7, 4))]
    fresh = E(4, first_slot_id=1)
    held = radix.reserve(fresh, "o", [1])[0]
    leaf = next(i for i in tree.nodes if i != radix.ROOT)
    nodes, root = dict(tree.nodes), tree.nodes[radix.ROOT]
    corrupt = [attrs.evolve(tree, nodes={**nodes, radix.ROOT: attrs.evolve(root, token_ids=(1,), slot_ids=(4,))}),
               attrs.evolve(tree, terminal_locks={99: 1}), attrs.evolve(tree, terminal_locks={leaf: -1}),
               attrs.evolve(tree, nodes={**nodes, 77: radix.RadixNode(77, 99, (8,), (4,))}),
               attrs.evolve(tree, nodes={**nodes, leaf: attrs.evolve(nodes[leaf], lock_ref=-1)})]
    broken = [rejection_of(lambda t=t: radix.check_state(t)) for t in corrupt]
    split = radix.insert(radix.insert(radix.reserve(fresh, "q", [1, 2, 3])[0], [5, 6], [1, 2], "q")[0],
                         [5, 7], [1, 3], "q")[0]
    upper = next(n.node_id for n in split.nodes.values() if n.token_ids == (5,))
    six = next(n.node_id for n in split.nodes.values() if n.token_ids == (6,))
    unlock_upper = rejection_of(lambda: radix.unlock(radix.lock(split, six)[0], upper))
    cached = radix.publish_unfinished(held, "o", [5], [1])[0]
    dup_state, dup = radix.publish_unfinished(radix.reserve(cached, "q", [2, 3])[0], "q", [5], [2])
    published = [rejection_of(f) for f in (lambda: radix.publish_unfinished(fresh, "q", [1, 2], [1]),
                                           lambda: radix.publish_unfinished(fresh, "q", [1], [9]),
                                           lambda: radix.publish_unfinished(held, "q", [1], [1]))]
    return [("decode A in group 1: table of 2 of 3 blocks; block 2009; without group 1's pool: refused as", decode,
             [T.TABLE_INDEX_OUT_OF_RANGE, T.UNKNOWN_PHYSICAL_ID, T.MISSING_GROUP_POOL]),
            ("empty trees of -1 slots, first slot -1, page size 0, page size True refused as", empties,
             [R.MALFORMED_INPUT, R.MALFORMED_INPUT, R.BAD_PAGE_SIZE, R.BAD_PAGE_SIZE]),
            ("path of node 99; reserve [4, -1], [4, True], [4, 4]; decode for z: refused as", inputs,
             [R.UNKNOWN_NODE, R.MALFORMED_INPUT, R.MALFORMED_INPUT, R.DUPLICATE_INPUT_SLOT, R.UNKNOWN_REQUEST]),
            ("publish 2 tokens in 1 slot; into slot 9 of 1..4; into o's slot 1: refused as", published,
             [R.TOKEN_SLOT_LENGTH_MISMATCH, R.SLOT_OUT_OF_POOL, R.OWNED_SLOT_REUSE]),
            ("after q caches [5, 6] in slots 1, 2 of its 1, 2, 3: tree slots, private slots",
             (sorted(tree.tree_slot_ids()), sorted(tree.all_private_slot_ids())), ([1, 2], [3])),
            ("trees refused by the check: root with an edge; lock on node 99; -1 holders; node 77 under missing 99; "
             "lock_ref -1", broken, [R.EMPTY_EDGE, R.LOCK_COUNT_MISMATCH, R.LOCK_COUNT_MISMATCH, R.ORPHAN_NODE,
                                     R.LOCK_UNDERFLOW]),
            ("[5] -> [6], [7] with one holder ending at [6]: unlock [5] refused as", unlock_upper, R.LOCK_UNDERFLOW),
            ("o caches [5] in slot 1; q (slots 2, 3) publishes [5] in slot 2: duplicates, q's private, free",
             (dup.duplicate_slot_ids, dict(dup_state.private_slot_ids), sorted(dup_state.free_slot_ids)),
             ((2,), {"q": (3,)}, [2, 4]))]


def radix_pages_0x08() -> Rows:
    """0x08 with pages (SGLang's ``page_size``): an insert caches only ``tokens``' whole pages, ``n - n mod P``
    tokens; the unaligned tail's slots stay private to their request. Over slots 0..7, a request q that reserved
    slots 0..n-1 and inserts n tokens: P 4, n 7 caches 4 (q keeps 4, 5, 6); P 3, n 5 caches 3 (q keeps 3, 4);
    P 4, n 8 caches 8 (q keeps nothing); P 4, n 3 caches nothing (no node). A transition prepared against the
    tree's version runs (the version then one higher), against another one is refused STALE_VERSION; the
    versions are ints above 256 built at run time (equal, not identical). A parent files a child edge under its
    first token at page size 1, under its first page (a tuple) above (``selector``'s docstring). A running request
    (``publish_unfinished``, 0x08C) publishes its whole pages only: (1, 2, 3) at page size 2 caches (1, 2) (node 1,
    locked by q, 2 tokens protected) and keeps slot 2 private; passing the tail (3) again with 4 publishes (3, 4)
    (node 2) and moves q's lock there (node 1 stays locked through the path); releasing q drops every lock. The
    state digest covers the page size above 1 only: page size 1 keeps the digest of a tree without pages (the
    canonical JSON of ``state_sha256``'s docstring, computed here by hand), so page sizes 1, 2, 4 differ. A match
    whose query runs out inside an edge splits it there, at the root's edge (1,) or one edge down (1, 2, 3, 4)."""
    import attrs

    from kvexact.reference import radix as rx
    from kvexact.reference.rejections import Rejected

    def inserted(page: int, n: int) -> Any:
        s, _ = rx.reserve(rx.RadixState.empty(8, 0, page_size=page), "q", range(n))
        s, receipt = rx.insert(s, tuple(range(10, 10 + n)), tuple(range(n)), "q")
        return (receipt.prefix_tokens, receipt.new_node_id is None, s.edges(), dict(s.private_slot_ids))

    def version_outcome(fn: Any) -> Any:
        try:
            return fn()[0].version
        except Rejected as exc:
            return exc.reason.name

    s300 = attrs.evolve(rx.RadixState.empty(4), version=_big(300))

    def view(st: Any) -> Any:
        return (st.edges(), dict(st.private_slot_ids),
                {r: (e.last_node_id, e.protected_tokens) for r, e in st.requests.items()},
                {n.node_id: n.lock_ref for n in st.nodes.values()}, sorted(st.free_slot_ids))

    run = rx.publish_unfinished(rx.RadixState.empty(8, 0, page_size=2), "q", [1, 2, 3], [0, 1, 2])[0]
    run2 = rx.publish_unfinished(run, "q", [3, 4], [2, 3])[0]
    running = [view(run), view(run2), view(rx.release_request(run2, "q")[0])]
    keys = []
    for page in (1, 2):
        st, _ = rx.reserve(rx.RadixState.empty(4, 0, page_size=page), "q", range(2))
        keys.append(list(rx.insert(st, (5, 6), (0, 1), "q")[0].nodes[rx.ROOT].children))

    def empty_digest(**paged: int) -> str:  # the digest contract by hand: canonical JSON of the empty tree on 0..3
        body = {**paged, "pool": [0, 1, 2, 3], "nodes": [[0, None, [], [], [], 0]], "free": [0, 1, 2, 3],
                "private": [], "terminal_locks": [], "requests": [], "version": 0}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    digests = [rx.state_sha256(rx.RadixState.empty(4, 0, page_size=p)) for p in (1, 2, 4)]
    # a match ending inside an edge with the query used up: (1, 2) then (3, 4, 5) below it, queried with
    # (1, 2, 3, 4) (ends 2 tokens into the second edge, at offset 2) and (1,) (ends inside (1, 2) at offset 0)
    inner = rx.reserve(rx.RadixState.empty(8), "q", range(5))[0]
    inner = rx.insert(inner, (1, 2), (0, 1), "q")[0]
    inner = rx.insert(inner, (1, 2, 3, 4, 5), (0, 1, 2, 3, 4), "q")[0]
    inner_rows = []
    for query in ((1, 2, 3, 4), (1,), (1, 2, 3, 4, 5, 6)):
        after, got = rx.match(inner, query)
        inner_rows.append((got.matched_tokens, got.prefix_slot_ids, got.split, after.edges()))
    return [("inserts of n tokens at page size P: prefix, no new node, edges, private slots",
             [inserted(4, 7), inserted(3, 5), inserted(4, 8), inserted(4, 3)],
             [(0, False, {(10, 11, 12, 13): (0, 1, 2, 3)}, {"q": (4, 5, 6)}),
              (0, False, {(10, 11, 12): (0, 1, 2)}, {"q": (3, 4)}),
              (0, False, {tuple(range(10, 18)): tuple(range(8))}, {}),
              (0, True, {}, {"q": (0, 1, 2)})]),
            ("the root's child keys after inserting (5, 6) at page size 1, 2; selector of (5, 6, 7) at 1, 2",
             (keys, rx.selector((5, 6, 7), 1), rx.selector((5, 6, 7), 2)), ([[5], [(5, 6)]], 5, (5, 6))),
            ("the empty tree on slots 0..3: digest at page size 1 (no page_size field, the old digest), at 2 (with"
             " it); page sizes 1, 2, 4 give three distinct digests",
             (digests[0] == empty_digest(), digests[1] == empty_digest(page_size=2), len(set(digests))),
             (True, True, 3)),
            ("tree (1, 2) -> (3, 4, 5): matches of (1, 2, 3, 4), (1,), (1, 2, 3, 4, 5, 6): matched, slots, split, edges",
             inner_rows,
             [(4, (0, 1, 2, 3), True, {(1, 2): (0, 1), (3, 4): (2, 3), (5,): (4,)}),
              (1, (0,), True, {(1,): (0,), (2,): (1,), (3, 4, 5): (2, 3, 4)}),
              (5, (0, 1, 2, 3, 4), False, {(1, 2): (0, 1), (3, 4, 5): (2, 3, 4)})]),
            ("page size 2: q publishes (1, 2, 3) on slots 0..2, then (3, 4) on 2, 3, then is released: edges, private,"
             " requests (last node, protected), locks, free",
             running,
             [({(1, 2): (0, 1)}, {"q": (2,)}, {"q": (1, 2)}, {0: 0, 1: 1}, [3, 4, 5, 6, 7]),
              ({(1, 2): (0, 1), (3, 4): (2, 3)}, {}, {"q": (2, 4)}, {0: 0, 1: 1, 2: 1}, [4, 5, 6, 7]),
              ({(1, 2): (0, 1), (3, 4): (2, 3)}, {}, {}, {0: 0, 1: 0, 2: 0}, [4, 5, 6, 7])]),
            ("at version 300: match expecting 300, 299, 301; insert expecting 300 and 299",
             [version_outcome(lambda v=v: rx.match(s300, [1], expected_version=_big(v))) for v in (300, 299, 301)]
             + [version_outcome(lambda v=v: rx.insert(s300, (), (), expected_version=_big(v))) for v in (300, 299)],
             [301, "STALE_VERSION", "STALE_VERSION", 301, "STALE_VERSION"])]


def hybrid_publish_0x07C() -> Rows:
    """0x07C (reference/hybrid.py's invariant): groups of block sizes 2 and 3 align at A = lcm(2, 3) = 6. An 8-token
    prompt published into an empty index adds blocks from its hit 0 up to its A-aligned length 8 - 8 mod 6 = 6:
    prefixes of 2, 4, 6 tokens in the first group and of 3, 6 in the second, one block each. Its lookup then hits
    6 (cap 8 - 1 = 7, aligned down to 6, both groups hold every block below it), so publishing it again adds
    nothing (its own hit reaches its aligned length); a 7-token query hits 6 too, a 6-token one (cap 5) none.
    Evicting drops one holder (never below none; a prefix held by none changes nothing); with group 0's first
    block gone no frontier is common: hit 0. Refusals (the module's rejections): a block size that is not a
    positive int, a window under 2 tokens, no groups, a negative cap. A full group needs blocks 0..L/P - 1, a window
    W group the ceil((W - 1) / P) blocks just before L / P (from 0): 10 at P 4: 0, 1; 12 at P 4, W 5: block 2 (ceil(4 / 4) = 1); W 6:
    blocks 1, 2 (ceil(5 / 4) = 2); 4 at P 4, W 9: block 0."""
    from kvexact.reference import hybrid as hy
    from kvexact.reference.rejections import rejection_of

    t = tuple(range(10, 18))
    once = hy.HybridIndex.empty([hy.CacheGroup(2), hy.CacheGroup(3)]).publish(t)
    twice = once.publish(t)
    expected = ({t[:2]: 1, t[:4]: 1, t[:6]: 1}, {t[:3]: 1, t[:6]: 1})
    H = hy.HybridRejection
    gone = once.evict(0, t[:2])
    bad = [lambda: hy.CacheGroup(0), lambda: hy.CacheGroup(-2), lambda: hy.CacheGroup(2.0),  # type: ignore[arg-type]
           lambda: hy.CacheGroup(2, 1), lambda: hy.CacheGroup(2, 2), lambda: hy.alignment([]),
           lambda: hy.HybridIndex.empty([]), lambda: hy.converged_hit([hy.CacheGroup(2)], [[0]], -1)]
    return [("an 8-token prompt published once: blocks per group; its lookup", (once.counts, once.lookup(t)),
             (expected, 6)),
            ("the same prompt published again: blocks per group", twice.counts, expected),
            ("(1..5) published over block sizes 1 and 2 (A = 2, aligned length 4): blocks per group",
             hy.HybridIndex.empty([hy.CacheGroup(1), hy.CacheGroup(2)]).publish([1, 2, 3, 4, 5]).counts,
             ({(1,): 1, (1, 2): 1, (1, 2, 3): 1, (1, 2, 3, 4): 1}, {(1, 2): 1, (1, 2, 3, 4): 1})),
            ("block size 0, -2, 2.0; window 1, 2; no groups (alignment, index); cap -1: refused as",
             [rejection_of(f) for f in bad], [H.BAD_BLOCK_SIZE] * 3 + [H.BAD_WINDOW, None] + [H.NO_GROUPS] * 2
             + [H.NEGATIVE_CAP]),
            ("group 0's (10, 11) evicted once, twice; (9,) evicted (held by none): holders of (10, 11); counts same",
             (gone.counts[0][t[:2]], gone.evict(0, t[:2]).counts[0][t[:2]], once.evict(1, (9,)).counts == once.counts),
             (0, 0, True)),
            ("the lookup once group 0's (10, 11) is gone; a 7-token query's hit (cap 6); a 6-token one's (cap 5)",
             (gone.lookup(t), once.lookup(t[:7]), once.lookup(t[:6])), (0, 6, 0)),
            ("sizes 2 and 3 holding blocks 0..9 each: hits at caps 8, 7, 5 (the largest multiple of 6 at most the cap)",
             [hy.converged_hit([hy.CacheGroup(2), hy.CacheGroup(3)], [range(10), range(10)], c) for c in (8, 7, 5)],
             [6, 6, 0]),
            ("blocks needed for 10 tokens at P 4; for 12 at P 4 window 5, window 6; for 4 at P 4 window 9; cap 0's hit",
             (list(hy.CacheGroup(4).needed_blocks(10)), list(hy.CacheGroup(4, 5).needed_blocks(12)),
              list(hy.CacheGroup(4, 6).needed_blocks(12)), list(hy.CacheGroup(4, 9).needed_blocks(4)),
              hy.converged_hit([hy.CacheGroup(2)], [[0, 1]], 0)),
             ([0, 1], [2], [1, 2], [0], 0)),
            ("blocks of (1..5) at P 2 held by the prefixes (1, 2), (1, 2, 3, 4), (9, 9); by (1, 2, 3, 4) alone",
             (sorted(hy.cached_blocks(hy.CacheGroup(2), [1, 2, 3, 4, 5], [(1, 2), (1, 2, 3, 4), (9, 9)])),
              sorted(hy.cached_blocks(hy.CacheGroup(2), [1, 2, 3, 4, 5], [(1, 2, 3, 4)]))), ([0, 1], [1]))]


def radix_eviction_0x08E() -> Rows:
    """0x08E/0x08G over slots 1..8 (page size 1; every transition advances the tree's clock by one and stamps the
    nodes it creates or walks through): q reserves slots 1..6 (clock 1); X = (1, 2) on slots 1, 2 (node 1, clock
    2); Y = (3, 4, 5) on slots 3..5 (node 2, clock 3); (1, 2, 9) walks X and adds Z = (9) on slot 6 below it (node
    3, clock 4); a match of (3, 4, 5) touches Y (clock 5). LRU ranks (last access, creation, id): Z (4, 4) before
    X (4, 2 -- a candidate once Z is gone) before Y (5); FIFO ranks (creation, id): Y (3) first. Evicting stops
    once the target is released. ``evict_node`` refuses the root, an inner node and a locked leaf. A handoff of
    h's prompt (3, 4, 5, 7 x 7: 10 tokens) matches 3 (compute 7); a receipt changed without resealing, one
    resealed with a policy decision, with a suffix not starting at the match, ending before it, or with 2 prefix
    slots for 3 matched tokens is refused; h's lock keeps its receipt valid at a later version until a split
    moves its terminal node under a new one (path mismatch); released, the receipt is stale; so is, at a later
    version, h's receipt of another prompt (h's lock ends elsewhere, at a node of a lower or a higher id). A
    whole match (k: (1, 2)) has the empty suffix (2, 2), and is valid. X locked keeps X when Z goes (4 tokens released: Z, Y). A tree whose next node id is 300
    evicts its node 300 named by an equal int built at run time (the root keeps no child). A node's lock count
    must equal the terminal locks on and below it (0x08D): a count below or above them is refused. Prefill at B_row 16,
    P 4: useful 7 x 16 = 112 bytes; blocks ceil(max(7 - tail, 0) / 4) for free tails 0, 2, 3, 9: 2, 2, 1, 0."""
    import attrs

    from kvexact.reference import radix as rx
    from kvexact.reference.rejections import rejection_of

    R = rx.RadixRejection
    st = rx.reserve(rx.RadixState.empty(8, 1), "q", range(1, 7))[0]
    st = rx.insert(st, (1, 2), (1, 2), "q")[0]
    st = rx.insert(st, (3, 4, 5), (3, 4, 5), "q")[0]
    st = rx.insert(st, (1, 2, 9), (1, 2, 6), "q")[0]
    st = rx.match(st, (3, 4, 5))[0]

    def evicted(target: Any, ranking: Any = rx.lru, state: Any = st) -> Any:
        try:
            r = rx.evict(state, target, ranking)[1]
        except Exception:
            return rejection_of(lambda: rx.evict(state, target, ranking))
        return r.released_tokens, r.evicted_node_ids, r.freed_slot_ids

    locked = rx.lock(st, 3)[0]
    x_locked = rx.lock(st, 1)[0]
    held, receipt = rx.match_and_lock(st, "h", 0, (3, 4, 5, *[7] * 7))
    other = rx.match_and_lock(st, "h", 0, (1, 2, 9))[1]  # h's receipt of another prompt: ends at Z, not at Y
    whole = rx.match_and_lock(st, "k", 0, (1, 2))
    bad = [attrs.evolve(receipt, matched_tokens=2), rx._seal(attrs.evolve(receipt, policy_decision="admit")),
           *[rx._seal(attrs.evolve(receipt, **kw)) for kw in ({"suffix_interval": (2, 10)},
                                                              {"suffix_interval": (3, 2)}, {"prefix_slot_ids": (3, 4)})]]
    later = rx.match(held, (1, 2))[0]
    later_z = rx.match(rx.match_and_lock(st, "h", 0, (1, 2, 9))[0], (1, 2))[0]  # h locks Z (node 3), not Y (node 2)
    split = rx.insert(rx.reserve(held, "o", [7])[0], (3, 4, 8), (3, 4, 7), "o")[0]
    released = rx.release_request(held, "h")[0]
    est = [rx.prefill_estimate(receipt, 16, 4, tail) for tail in (0, 2, 3, 9)]
    big = rx.reserve(attrs.evolve(rx.RadixState.empty(2, 1), next_node_id=_big(300)), "q", [1, 2])[0]
    big = rx.insert(big, (1, 2), (1, 2), "q")[0]  # node 300
    gone300 = rx.evict_node(big, _big(300))
    neg = rx.reserve(attrs.evolve(rx.RadixState.empty(2, 1), next_node_id=-5), "q", [1, 2])[0]
    neg = rx.insert(neg, (1, 2), (1, 2), "q")[0]  # node ids are labels: this tree numbers its nodes from -5
    return [("LRU evictions of 0, 1, 3, 100 tokens: released, nodes, slots",
             [evicted(t) for t in (0, 1, 3, 100)],
             [(0, (), ()), (1, (3,), ((6,),)), (3, (3, 1), ((6,), (1, 2))),
              (6, (3, 1, 2), ((6,), (1, 2), (3, 4, 5)))]),
            ("FIFO eviction of 1 token; LRU of 100 with Z locked, with X locked; targets -1, True",
             [evicted(1, rx.fifo), evicted(100, state=locked), evicted(100, state=x_locked), evicted(-1),
              evicted(True)],
             [(3, (2,), ((3, 4, 5),)), (3, (2,), ((3, 4, 5),)), (4, (3, 2), ((6,), (3, 4, 5))),
              R.NEGATIVE_EVICTION_TARGET, R.NEGATIVE_EVICTION_TARGET]),
            ("evict_node of the root, X (inner), Z locked, node 99; Y: released, nodes, slots",
             [rejection_of(lambda n=n, s=s: rx.evict_node(s, n)) for n, s in ((0, st), (1, st), (3, locked), (99, st))]
             + [(lambda r: (r.released_tokens, r.evicted_node_ids, r.freed_slot_ids))(rx.evict_node(st, 2)[1])],
             [R.ROOT_EVICTION, R.INTERNAL_NODE_EVICTION, R.LOCKED_LEAF_EVICTION, R.UNKNOWN_NODE,
              (3, (2,), ((3, 4, 5),))]),
            ("h's receipt: matched, suffix; changed receipts refused as",
             (receipt.matched_tokens, receipt.suffix_interval, [rejection_of(lambda b=b: rx.verify_handoff(held, b))
                                                                for b in bad]),
             (3, (3, 10), [R.RECEIPT_TAMPERED, R.POLICY_DECISION_FORBIDDEN] + [R.SUFFIX_MISMATCH] * 3)),
            ("h's receipt at its version, a later one (locked), after a split, after h's release",
             [rejection_of(lambda s=s: rx.verify_handoff(s, receipt)) for s in (held, later, split, released)],
             [None, None, R.PATH_SLOT_MISMATCH, R.STALE_VERSION]),
            ("at the later version: h's receipt ending at Z (h locks Y); k's receipt of a whole match: suffix, verdict",
             (rejection_of(lambda: rx.verify_handoff(later, other)), whole[1].suffix_interval,
              rejection_of(lambda: rx.verify_handoff(*whole))), (R.STALE_VERSION, (2, 2), None)),
            ("at a later version with h locking Z (node 3): h's receipt ending at Y (node 2, a lower id)",
             rejection_of(lambda: rx.verify_handoff(later_z, receipt)), R.STALE_VERSION),
            ("check_state: Z's terminal lock recorded without its path's counts; the counts without the lock; both; "
             "X not listed by the root; X under a parent 99 that does not exist",
             [rejection_of(lambda t=t: rx.check_state(t)) for t in (
                 attrs.evolve(st, terminal_locks={3: 1}), attrs.evolve(locked, terminal_locks={}), locked,
                 attrs.evolve(st, nodes={**st.nodes, rx.ROOT: attrs.evolve(st.nodes[rx.ROOT], children={
                     k: v for k, v in st.nodes[rx.ROOT].children.items() if v != 1})}),
                 attrs.evolve(st, nodes={**st.nodes, 1: attrs.evolve(st.nodes[1], parent_id=99)}))],
             [R.LOCK_COUNT_MISMATCH, R.LOCK_COUNT_MISMATCH, None, R.ORPHAN_NODE, R.ORPHAN_NODE]),
            ("node 300 evicted by an equal id built at run time: nodes evicted, the root's children, free slots",
             (gone300[1].evicted_node_ids, dict(gone300[0].nodes[rx.ROOT].children), sorted(gone300[0].free_slot_ids)),
             ((300,), {}, [1, 2])),
            ("node -5 (only the root, node 0, is refused): nodes evicted", rx.evict_node(neg, -5)[1].evicted_node_ids,
             (-5,)),
            ("prefill at B_row 16, P 4, tails 0, 2, 3, 9: compute, useful, blocks, capacity",
             [(e.prompt_tokens_to_compute, e.new_useful_kv_bytes, e.new_physical_blocks,
               e.new_physical_capacity_bytes) for e in est],
             [(7, 112, 2, 128), (7, 112, 2, 128), (7, 112, 1, 64), (7, 112, 0, 0)]),
            ("prefill with tail -1, P 0, B_row -1 refused as",
             [rejection_of(lambda a=a: rx.prefill_estimate(receipt, *a)) for a in ((16, 4, -1), (16, 0), (-1, 4))],
             [R.MALFORMED_INPUT] * 3)]


def translate_refusals_0x03I() -> Rows:
    """0x03I's translator on Loop 4's snapshot (reference/labs/translate.py: g0 = layers 0..23, 4 KV heads of 128
    lanes, 16-token blocks, 8 slots, axis order slot, layer, token, head, lane; A is 33 tokens on g0 blocks 1000,
    1001, 1002 (slots 2, 5, 7; 16, 16, 1 valid rows), generation 3, pool 0), checked in the seed's order, the first
    failing step named: visibility (0 <= t < 33), table bounds, the handle's group, pool, id, generation, the row,
    head (0..3), lane (0..127), kind (K or V). A's V scalar at token 16, layer 0, head 0, lane 0 is slot 5, offset
    0: element 5 x (24 x 16 x 4 x 128) = 983,040 of g0's V tensor (base 4 GiB + 3 MiB, 2-byte scalars). A snapshot
    is refused for a slot outside 0..7 or shared, valid rows outside 0..16, overlapping tensors (g0's K and V
    exactly adjacent are not), a table whose length is not ceil(context / 16), one logical block with different
    valid rows in two groups, a group without its one pool; a successor of another request generation, or not of
    a newer table version."""
    import attrs

    from kvexact.reference import translate as tr
    from kvexact.reference.labs.translate import loop4_snapshot, loop4_successor_snapshot
    from kvexact.reference.rejections import rejection_of

    TR = tr.TranslateRejection
    snap = loop4_snapshot()
    a = snap.request("A")

    def with_a(table0: Any = None, context: int = 33) -> Any:
        tables = a.block_tables if table0 is None else ((0, table0), a.block_tables[1])
        grown = attrs.evolve(a, context_length_tokens=context, block_tables=tables)
        return attrs.evolve(snap, requests=tuple(grown if r.request_id == "A" else r for r in snap.requests))

    def read(s: Any, token: int = 0, head: int = 0, lane: int = 0, kind: str = "K", request: str = "A") -> Any:
        return rejection_of(lambda: tr.resolve_kv_address(s, request, token, 0, kind, head, lane))

    h0 = a.table(0)[0]
    handles = [attrs.evolve(h0, cache_group_id=1), attrs.evolve(h0, pool_id=1),
               attrs.evolve(h0, cache_group_id=1, pool_id=1), attrs.evolve(h0, block_id=999),
               attrs.evolve(h0, generation=4)]
    g0, g1 = snap.pools

    def with_desc(i: int, **kw: Any) -> Any:
        d = list(g0.descriptors)
        d[i] = attrs.evolve(d[i], **kw)
        return attrs.evolve(snap, pools=(attrs.evolve(g0, descriptors=d), g1))

    def g1_rows(rows: int) -> Any:
        d = [attrs.evolve(x, valid_rows=rows) if x.block_id == 2002 else x for x in g1.descriptors]
        return attrs.evolve(snap, pools=(g0, attrs.evolve(g1, descriptors=d)))

    snapshots = [with_desc(0, physical_slot=8), with_desc(0, physical_slot=-1), with_desc(0, physical_slot=5),
                 with_desc(1, valid_rows=17), with_desc(1, valid_rows=-1),
                 attrs.evolve(snap, pools=(attrs.evolve(g0, v_base_address=g0.v_base_address - 2), g1)),
                 with_a(context=49), with_a(context=32), g1_rows(2), attrs.evolve(snap, pools=(g0,)),
                 attrs.evolve(snap, pools=(g0, g1, g1)), with_desc(1, valid_rows=16), g1_rows(1)]
    succ = loop4_successor_snapshot()
    c = succ.request("C")

    def with_c(**kw: Any) -> Any:
        return attrs.evolve(succ, requests=tuple(attrs.evolve(c, **kw) if r.request_id == "C" else r
                                                 for r in succ.requests))

    v = tr.resolve_kv_address(snap, "A", 16, 0, "V", 0, 0)
    from kvexact.reference.labs.translate import loop4_layout

    lay = loop4_layout(cache_groups=(attrs.evolve(snap.layout.cache_groups[0], v_scalar_bytes=1),
                                     snap.layout.cache_groups[1]))
    narrow = attrs.evolve(snap, layout=lay)  # g0's V in 1-byte scalars, its K in 2-byte ones
    kv_narrow = [tr.resolve_kv_address(narrow, "A", 16, 0, k, 0, 0) for k in ("K", "V")]
    frozen = [rejection_of(lambda d=d: tr.check_frozen_address(snap, tr.FrozenAddress(
        "A", 5, 16, 0, "V", 0, 0, 4 * 1024 ** 3 + 3 * 1024 ** 2 + 2 * 983_040 + d))) for d in (-2, 0, 2)]
    no_g1 = attrs.evolve(snap, requests=tuple(attrs.evolve(r, block_tables=r.block_tables[:1]) if r.request_id == "A"
                                              else r for r in snap.requests))
    missing = [rejection_of(lambda layer=layer: tr.resolve_kv_address(no_g1, "A", 0, layer, "K", 0, 0))
               for layer in (23, 24)]
    return [("A's tokens -1, 33, 32; request Z", [read(snap, t) for t in (-1, 33, 32)] + [read(snap, request="Z")],
             [TR.TOKEN_NOT_VISIBLE, TR.TOKEN_NOT_VISIBLE, None, TR.UNKNOWN_REQUEST]),
            ("heads -1, 4, 3; lanes -1, 128, 127; kinds Q, V; head 4 + lane 128 + Q; lane 128 + Q; token 33 + head 4",
             [read(snap, head=h) for h in (-1, 4, 3)] + [read(snap, lane=n) for n in (-1, 128, 127)]
             + [read(snap, kind=k) for k in ("Q", "V")]
             + [read(snap, head=4, lane=128, kind="Q"), read(snap, lane=128, kind="Q"), read(snap, 33, head=4)],
             [TR.HEAD_OUT_OF_RANGE, TR.HEAD_OUT_OF_RANGE, None, TR.LANE_OUT_OF_RANGE, TR.LANE_OUT_OF_RANGE, None,
              TR.BAD_KV_KIND, None, TR.HEAD_OUT_OF_RANGE, TR.LANE_OUT_OF_RANGE, TR.TOKEN_NOT_VISIBLE]),
            ("A's first g0 handle in group 1, pool 1, both, id 999, generation 4; token 48 of 49 on 3 blocks",
             [read(with_a((h, *a.table(0)[1:]))) for h in handles] + [read(with_a(context=49), 48)],
             [TR.WRONG_GROUP_HANDLE, TR.WRONG_POOL, TR.WRONG_GROUP_HANDLE, TR.UNKNOWN_PHYSICAL_ID,
              TR.STALE_PHYSICAL_GENERATION, TR.TABLE_INDEX_OUT_OF_RANGE]),
            ("g0's V in 1-byte scalars: A's K and V at token 16, layer 0, head 0, lane 0: byte offsets, addresses",
             [(r.byte_offset, r.byte_address) for r in kv_narrow],
             [(2 * 983_040, 4 * 1024 ** 3 + 2 * 983_040), (983_040, 4 * 1024 ** 3 + 3 * 1024 ** 2 + 983_040)]),
            ("A's V address at token 16 frozen 2 bytes low, exact, 2 bytes high", frozen,
             [TR.FROZEN_ADDRESS_DRIFT, None, TR.FROZEN_ADDRESS_DRIFT]),
            ("A without its group 1 table read at layer 23 (group 0), 24 (group 1)", missing,
             [None, TR.MISSING_GROUP_TABLE]),
            ("A's V at token 16, layer 0, head 0, lane 0: slot id, coordinate, element, byte address",
             (v.slot_id, v.coordinate, v.element_offset, v.byte_address),
             (5 * 16, (5, 0, 0, 0, 0), 5 * 24 * 16 * 4 * 128, 4 * 1024 ** 3 + 3 * 1024 ** 2 + 2 * 983_040)),
            ("snapshots: slot 8, -1, shared; rows 17, -1; V overlapping K; A at 49, 32 tokens; bundle rows 1 vs 2; "
             "one pool, three pools; rows 16; the fixture",
             [rejection_of(lambda x=x: tr.validate_snapshot(x)) for x in snapshots],
             [TR.SLOT_OUT_OF_RANGE, TR.SLOT_OUT_OF_RANGE, TR.SLOT_REUSED, TR.VALID_ROWS_OUT_OF_RANGE,
              TR.VALID_ROWS_OUT_OF_RANGE, TR.OVERLAPPING_TENSOR_RANGES, TR.TABLE_LENGTH_DRIFT, TR.TABLE_LENGTH_DRIFT,
              TR.BUNDLE_MISMATCH, TR.MISSING_GROUP_POOL, TR.MISSING_GROUP_POOL, None, None]),
            ("C's successor at generation 2; at version 2 (C's), 1; at 3",
             [rejection_of(lambda x=x: tr.consume_successor(snap, x, "C"))
              for x in (with_c(request_generation=2), with_c(table_version=2), with_c(table_version=1), succ)],
             [TR.REQUEST_GENERATION_DRIFT, TR.STALE_SUCCESSOR_VERSION, TR.STALE_SUCCESSOR_VERSION, None])]


def traversal_refusals_0x0A() -> Rows:
    """0x0A's decode block loop on Loop 4 (group 1, 16-token blocks: B is 25 tokens on blocks 2000, 2001 of 16
    valid rows; A 33 tokens on 2000, 2001, 2002, the last with 1 valid row): told T tokens it reads ceil(T / 16)
    tiles, the last T mod 16 or 16 rows. B: T 25 -> 16, 9; 16 -> 16; 17 -> 16, 1; 0 -> none; 26 (past B's
    context) READ_PAST_VISIBLE; -1 NEGATIVE_LENGTH. A at 34 tokens reads 2 rows of block 2002, which holds 1:
    READ_PAST_MATERIALIZED; with 2 table entries its third tile is out of the table; a handle of an unknown id, or
    of another generation, is refused. Sizes: 512 % 24 != 0 (PARTITION_NOT_MULTIPLE), 512 % 16 = 0 (a geometry),
    512 % 1024 = 512 (refused); 64 is not launchable
    (pinned 8, 16, 32); an empty batch; a 0-byte entry; 8 suffixes for B = 7 or 9 rows; a shared prefix of -1; a page
    group of 64 KiB + 1 over 2,048-byte rows; 0-byte rows. 0x0BJ: 64 KiB groups hold 32 tokens, so T = 1,025
    needs 33 groups, 33 x 65,536 - 1,025 x 2,048 = 63,488 bytes of tail; T = 0 needs none."""
    import attrs

    from kvexact.reference import traversal as tv
    from kvexact.reference.labs.translate import loop4_snapshot
    from kvexact.reference.rejections import rejection_of
    from kvexact.reference.translate import TranslateRejection as TR

    T = tv.TraversalRejection
    snap = loop4_snapshot()

    def tiles(s: Any, request: str, n: int | None) -> Any:
        try:
            return [(st.handle.block_id, st.rows_read) for st in tv.decode_traversal(s, request, 1, n)]
        except Exception:
            return rejection_of(lambda: tv.decode_traversal(s, request, 1, n))

    a = snap.request("A")

    def with_a(table1: Any = None, context: int = 33) -> Any:
        tables = a.block_tables if table1 is None else (a.block_tables[0], (1, table1))
        grown = attrs.evolve(a, context_length_tokens=context, block_tables=tables)
        return attrs.evolve(snap, requests=tuple(grown if r.request_id == "A" else r for r in snap.requests))

    t1 = a.table(1)
    sizes = [lambda: tv.kernel_geometry(2049, 24), lambda: tv.require_launchable(64), lambda: tv.require_launchable(16),
             lambda: tv.ragged_table_ledger([], 16), lambda: tv.ragged_table_ledger([1], 16, 0),
             lambda: tv.kernel_geometry(2049, 16), lambda: tv.kernel_geometry(2049, 1024),
             lambda: tv.chunk_ledger(16, batch_rows=7), lambda: tv.chunk_ledger(16, batch_rows=9),
             lambda: tv.chunk_ledger(16, shared_tokens=-1),
             lambda: tv.page_group_row(65536 + 1, 1025), lambda: tv.page_group_row(65536, 1025, 0),
             lambda: tv.page_group_row(65536, -1)]
    rows = [tv.page_group_row(65536, t) for t in (1025, 0)]
    return [("B told 25, 16, 17, 0, 26, -1 tokens: tiles (block, rows)",
             [tiles(snap, "B", n) for n in (25, 16, 17, 0, 26, -1)] + [tiles(snap, "B", None)],
             [[(2000, 16), (2001, 9)], [(2000, 16)], [(2000, 16), (2001, 1)], [], T.READ_PAST_VISIBLE,
              T.NEGATIVE_LENGTH, [(2000, 16), (2001, 9)]]),
            ("A: at 33 tokens; at 34; on 2 entries; block 2002 as id 999; as generation 8",
             [tiles(snap, "A", None), tiles(with_a(context=34), "A", None), tiles(with_a(t1[:2]), "A", None),
              tiles(with_a((*t1[:2], attrs.evolve(t1[2], block_id=999))), "A", None),
              tiles(with_a((*t1[:2], attrs.evolve(t1[2], generation=8))), "A", None)],
             [[(2000, 16), (2001, 16), (2002, 1)], T.READ_PAST_MATERIALIZED, TR.TABLE_INDEX_OUT_OF_RANGE,
              TR.UNKNOWN_PHYSICAL_ID, TR.STALE_PHYSICAL_GENERATION]),
            ("sizes refused as", [rejection_of(f) for f in sizes],
             [T.PARTITION_NOT_MULTIPLE, T.UNSUPPORTED_KERNEL_BLOCK, None, T.EMPTY_BATCH, T.NON_POSITIVE_SIZE,
              None, T.PARTITION_NOT_MULTIPLE, T.SUFFIX_COUNT_MISMATCH, T.SUFFIX_COUNT_MISMATCH, T.NEGATIVE_LENGTH, T.PAGE_GROUP_NOT_MULTIPLE, T.NON_POSITIVE_SIZE,
              T.NEGATIVE_LENGTH]),
            ("0x0AA geometry at T 2,049 with the defaults (P_part 512, warp 32, 2-byte scalars), P_k 1, 8, 16, 32, "
             "64, 128: seq blocks, partitions, blocks a partition, thread group, tokens a group, vector, pinned",
             [(g.seq_blocks, g.partitions, g.blocks_per_partition, g.thread_group_size, g.tokens_per_thread_group,
               g.value_vector_width, g.instantiated_by_pinned_v1)
              for g in (tv.kernel_geometry(2049, p) for p in (1, 8, 16, 32, 64, 128))],
             [(-(-2049 // p), -(-2049 // 512), 512 // p, max(32 // p, 1), -(-p // 32), min(16 // 2, p), p in (8, 16, 32))
              for p in (1, 8, 16, 32, 64, 128)]),
            ("64 KiB page groups at T 1,025 and 0: tokens per group, groups, tail bytes",
             [(r.tokens_per_group, r.groups, r.waste_bytes) for r in rows],
             [(32, 33, 33 * 65536 - 1025 * 2048), (32, 0, 0)])]


def _raises(fn: Any) -> str | None:
    try:
        fn()
    except Exception as exc:  # the exception's type is the result compared
        return type(exc).__name__
    return None


INDEX_CASES = {"formulas catalog 0x10A": formulas_catalog_0x10A, "formulas z3 0x10A": formulas_z3_0x10A,
               "keys 0x07B": keys_0x07B, "prompt cache 0x0CB": prompt_cache_0x0CB,
               "revocation spec 0x0CE": revocation_spec_0x0CE,
               "namespaces 0x06": namespaces_0x06, "sessions 0x0CC": sessions_0x0CC, "tables 0x0AB": tables_0x0AB,
               "prefix admit 0x07": prefix_admit_0x07,
               "radix index 0x08": radix_index_0x08,
               "vmm spec 0x06F": vmm_spec_0x06F,
               "telemetry export 0x0CF": telemetry_0x0CF_export,
               "radix spec 0x08": radix_spec_0x08,
               "frozen 0x03F": frozen_0x03F,
               "telemetry alerts 0x0CF": telemetry_alerts_0x0CF,
               "identity 0x06-0x08": identity_0x06_0x08,
               "identity 0x03-0x0CE": identity_0x03_0x0CE,
               "bounds 0x03I-0x0CE": bounds_0x03I_0x0CE,
               "refusals 0x03-0x08": refusals_0x03_0x08,
               "radix pages 0x08": radix_pages_0x08, "hybrid publish 0x07C": hybrid_publish_0x07C,
               "radix eviction 0x08E": radix_eviction_0x08E,
               "translate refusals 0x03I": translate_refusals_0x03I,
               "traversal refusals 0x0A": traversal_refusals_0x0A}
