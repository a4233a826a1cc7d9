"""The skeleton index: pattern analysis, event traces, pruning, errors.

Every test runs on both builds of the one source (compiled
``a0py.dataspace._compiled`` and interpreted ``a0py.dataspace._interpreted``),
each with its own Record.
"""

import ast
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.dataspace import compiled, interpreted

import a0py.dataspace as ds
from a0py.dataspace import (
    DISCARD,
    DataspaceTypeError,
    InvalidValueError,
    NotAssertedError,
    UnknownHandlerError,
    capture,
    parse,
)
from a0py.errors import A0Error


def test_package_uses_the_compiled_build():
    assert compiled is not None, "a0py.dataspace._compiled is not built"
    assert ds.COMPILED
    assert ds.Index is compiled.Index and ds.Record is compiled.Record
    assert compiled.__file__.endswith(".so")
    # The compiled index lives in the dataspace layer, beside its source.
    assert compiled.__name__ == "a0py.dataspace._compiled"
    assert Path(compiled.__file__).parent == Path(ds.__file__).parent


@pytest.mark.parametrize("first", ["a0py.dataspace._compiled", "a0py.dataspace._interpreted"])
def test_either_build_imports_first_in_a_fresh_interpreter(first):
    """A build imported before anything else of the package loads whole: it
    imports only modules below it. (When the compiled index sat above the
    package and imported from it, importing it first failed half-built.)"""
    script = textwrap.dedent(f"""
        import importlib
        m = importlib.import_module({first!r})
        from a0py.dataspace import parse
        seen = []
        idx = m.Index()
        idx.add_handler(parse("present($x)", record=m.Record), lambda ev, c: seen.append((ev, c)))
        r = m.Record("present", "Alice")
        idx.add_assertion(r)
        print(repr(r), seen)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == """present("Alice") [('+', ('Alice',))]"""


class Trace:
    """Collects events from named handlers; ``take()`` returns them sorted,
    so traces are compared per operation regardless of trie order."""

    def __init__(self, idx):
        self.idx = idx
        self.events = []

    def on(self, name, pattern):
        return self.idx.add_handler(pattern, lambda ev, caps: self.events.append((name, ev, caps)))

    def take(self):
        out = sorted(self.events, key=repr)
        self.events.clear()
        return out


def P(mod, text):
    return parse(text, record=mod.Record)


# ---------------------------------------------------------------- pattern analysis


@pytest.mark.parametrize(
    "text, shape, constants, captures",
    [
        ("A(B($), $)", ("A", 2, ("B", 1, None), None), (), ((0, 0), (1,))),
        ('A(B("x"), $)', ("A", 2, ("B", 1, None), None), (((0, 0), "x"),), ((1,),)),
        ("[_, _]", ("", 2, None, None), (), ()),
        ('["hi", $, $]', ("", 3, None, None, None), (((0,), "hi"),), ((1,), (2,))),
        ("$x:A(B($y), _)", ("A", 2, ("B", 1, None), None), (), ((), (0, 0))),
        ('A($:[1, $], "k")', ("A", 2, ("", 2, None, None), None),
         (((0, 0), 1), ((1,), "k")), ((0,), (0, 1))),
        ("$", None, (), ((),)),
        ("_", None, (), ()),
        ('"hi"', None, (((), "hi"),), ()),
        ("A()", ("A", 0), (), ()),
    ],
)
def test_skeleton_shape_constant_map_and_capture_map(mod, text, shape, constants, captures):
    sk = mod.analyse(P(mod, text))
    assert sk.shape == shape
    assert sk.constants == constants
    assert sk.captures == captures


def test_skeleton_constants_keep_their_type(mod):
    sk = mod.analyse(P(mod, "A(1, 1.0, True)"))
    assert [type(v) for _, v in sk.constants] == [int, float, bool]
    assert mod.format_shape(sk.shape) == "A/3(_, _, _)"


def test_capture_names_are_kept_in_capture_order(mod):
    sk = mod.analyse(P(mod, "speak($who, $:said($what))"))
    assert sk.names == ("who", None, "what")
    assert sk.captures == ((0,), (1,), (1, 0))


def test_analyse_rejects_non_patterns(mod):
    with pytest.raises(InvalidValueError, match="set is not"):
        mod.analyse({1})
    with pytest.raises(InvalidValueError, match="dict is not a pattern"):
        mod.analyse(({},))


# ---------------------------------------------------------------- event traces


def test_nested_records_with_several_handlers_full_trace(mod):
    R = mod.Record
    idx = mod.Index()
    t = Trace(idx)
    t.on("both", P(mod, "A(B($), $)"))
    t.on("x", P(mod, 'A(B("x"), $)'))
    t.on("first", P(mod, "A($, _)"))
    t.on("any", P(mod, "_"))
    assert t.take() == []

    idx.add_assertion(R("A", R("B", "x"), 1))
    assert t.take() == sorted([
        ("both", "+", ("x", 1)),
        ("x", "+", (1,)),
        ("first", "+", (R("B", "x"),)),
        ("any", "+", ()),
    ], key=repr)

    idx.add_assertion(R("A", R("B", "y"), 1))
    assert t.take() == sorted([
        ("both", "+", ("y", 1)),
        ("first", "+", (R("B", "y"),)),
    ], key=repr)

    idx.add_assertion(R("A", R("B", "x"), 2))
    assert t.take() == sorted([("both", "+", ("x", 2)), ("x", "+", (2,))], key=repr)

    idx.add_assertion(R("A", "not a B", 2))  # matches "first" and "any" only
    assert t.take() == [("first", "+", ("not a B",))]

    idx.remove_assertion(R("A", R("B", "x"), 1))
    assert t.take() == sorted([("both", "-", ("x", 1)), ("x", "-", (1,))], key=repr)

    idx.remove_assertion(R("A", R("B", "x"), 2))
    assert t.take() == sorted([
        ("both", "-", ("x", 2)), ("x", "-", (2,)), ("first", "-", (R("B", "x"),)),
    ], key=repr)

    idx.remove_assertion(R("A", R("B", "y"), 1))
    idx.remove_assertion(R("A", "not a B", 2))
    assert t.take() == sorted([
        ("both", "-", ("y", 1)),
        ("first", "-", (R("B", "y"),)),
        ("first", "-", ("not a B",)),
        ("any", "-", ()),
    ], key=repr)
    assert len(idx) == 0


def test_detail_erasing_handler_sees_one_plus_and_one_minus(mod):
    idx = mod.Index()
    t = Trace(idx)
    t.on("pair", P(mod, "[_, _]"))
    idx.add_assertion((1, 2))
    assert t.take() == [("pair", "+", ())]
    idx.add_assertion((3, 4))
    assert t.take() == []
    idx.remove_assertion((1, 2))
    assert t.take() == []
    idx.remove_assertion((3, 4))
    assert t.take() == [("pair", "-", ())]


def test_handler_added_after_assertions_is_told_of_them(mod):
    R = mod.Record
    idx = mod.Index()
    idx.add_assertion(R("present", "Alice"))
    idx.add_assertion(R("present", "Bob"))
    idx.add_assertion(R("speak", "Alice", "hi"))
    t = Trace(idx)
    t.on("who", P(mod, "present($)"))
    assert t.take() == [("who", "+", ("Alice",)), ("who", "+", ("Bob",))]
    t.on("erased", P(mod, "present(_)"))
    assert t.take() == [("erased", "+", ())]
    t.on("alice", P(mod, 'speak("Alice", $)'))
    assert t.take() == [("alice", "+", ("hi",))]
    t.on("bob", P(mod, 'speak("Bob", $)'))
    assert t.take() == []


def test_duplicate_assertions_are_counted(mod):
    R = mod.Record
    idx = mod.Index()
    t = Trace(idx)
    t.on("p", P(mod, "present($)"))
    v = R("present", "Alice")
    idx.add_assertion(v)
    idx.add_assertion(R("present", "Alice"))  # an equal, distinct object
    assert t.take() == [("p", "+", ("Alice",))]
    assert idx.count(v) == 2 and len(idx) == 1
    idx.remove_assertion(v)
    assert t.take() == [] and idx.count(v) == 1
    idx.remove_assertion(v)
    assert t.take() == [("p", "-", ("Alice",))]
    assert idx.count(v) == 0 and v not in idx


def test_messages_of_several_arities_reach_only_their_class(mod):
    R = mod.Record
    idx = mod.Index()
    t = Trace(idx)
    t.on("two", P(mod, "speak($, $)"))
    t.on("one", P(mod, "speak($)"))
    t.on("zero", P(mod, "speak()"))
    t.on("alice", P(mod, 'speak("Alice", $)'))
    t.on("tuple", P(mod, "[$, _]"))
    idx.send_message(R("speak", "Alice", "hi"))
    assert t.take() == sorted([("two", "!", ("Alice", "hi")), ("alice", "!", ("hi",))], key=repr)
    idx.send_message(R("speak", "Bob"))
    assert t.take() == [("one", "!", ("Bob",))]
    idx.send_message(R("speak"))
    assert t.take() == [("zero", "!", ())]
    idx.send_message(R("speak", 1, 2, 3))
    idx.send_message(("a",))
    assert t.take() == []
    idx.send_message(("a", "b"))
    assert t.take() == [("tuple", "!", ("a",))]
    idx.send_message(R("speak", "Alice", "hi"))
    assert t.take() == sorted([("two", "!", ("Alice", "hi")), ("alice", "!", ("hi",))], key=repr)


def test_messages_touch_no_cache(mod):
    R = mod.Record
    idx = mod.Index()
    idx.send_message(R("speak", "Alice", "hi"))
    assert len(idx) == 0
    t = Trace(idx)
    t.on("late", P(mod, "speak($, $)"))
    assert t.take() == []
    idx.add_assertion(R("speak", "Alice", "hi"))
    idx.send_message(R("speak", "Alice", "hi"))
    assert t.take() == sorted([("late", "+", ("Alice", "hi")), ("late", "!", ("Alice", "hi"))],
                              key=repr)
    idx.remove_assertion(R("speak", "Alice", "hi"))  # the message left no count behind
    assert t.take() == [("late", "-", ("Alice", "hi"))]


def test_over_removal_raises_and_changes_nothing(mod):
    R = mod.Record
    idx = mod.Index()
    t = Trace(idx)
    t.on("p", P(mod, "present($)"))
    with pytest.raises(NotAssertedError, match="not asserted"):
        idx.remove_assertion(R("present", "Alice"))
    idx.add_assertion(R("present", "Alice"))
    idx.remove_assertion(R("present", "Alice"))
    with pytest.raises(NotAssertedError):
        idx.remove_assertion(R("present", "Alice"))
    assert isinstance(NotAssertedError("x"), (A0Error, KeyError))
    assert t.take() == [("p", "+", ("Alice",)), ("p", "-", ("Alice",))]
    assert len(idx) == 0


def test_patch_applies_additions_before_removals_so_no_glitch(mod):
    idx = mod.Index()
    t = Trace(idx)
    t.on("one", P(mod, "[_]"))
    t.on("val", P(mod, "[$]"))
    idx.add_assertion((3,))
    assert t.take() == sorted([("one", "+", ()), ("val", "+", (3,))], key=repr)
    idx.patch(additions=[(4,)], removals=[(3,)])
    assert t.take() == sorted([("val", "+", (4,)), ("val", "-", (3,))], key=repr)
    # The same change as two separate steps does glitch:
    idx.remove_assertion((4,))
    idx.add_assertion((5,))
    assert t.take() == sorted([("one", "-", ()), ("one", "+", ()), ("val", "-", (4,)),
                               ("val", "+", (5,))], key=repr)


def test_patch_checks_removals_before_changing_anything(mod):
    idx = mod.Index()
    t = Trace(idx)
    t.on("any", P(mod, "$"))
    with pytest.raises(NotAssertedError):
        idx.patch(additions=[1], removals=[1, 1])
    assert len(idx) == 0 and t.take() == []
    idx.patch(additions=[1], removals=[1])  # covered by its own addition
    assert t.take() == sorted([("any", "+", (1,)), ("any", "-", (1,))], key=repr)
    with pytest.raises(InvalidValueError):
        idx.patch(additions=[2, {3}])
    assert len(idx) == 0


def test_one_one_point_zero_and_true_are_three_values(mod):
    idx = mod.Index()
    t = Trace(idx)
    t.on("all", P(mod, "[$]"))
    t.on("int", P(mod, "[1]"))
    t.on("bool", P(mod, "[True]"))
    t.on("float", P(mod, "[1.0]"))
    for v in ((1,), (1.0,), (True,)):
        idx.add_assertion(v)
    events = t.take()
    assert sorted((e[1], repr(e[2]), type(e[2][0]).__name__) for e in events if e[0] == "all") == [
        ("+", "(1,)", "int"), ("+", "(1.0,)", "float"), ("+", "(True,)", "bool")]
    assert ("int", "+", ()) in events and ("bool", "+", ()) in events
    assert ("float", "+", ()) in events and len(events) == 6
    assert len(idx) == 3
    idx.remove_assertion((True,))
    assert t.take() == sorted([("all", "-", (True,)), ("bool", "-", ())], key=repr)
    assert idx.count((1,)) == 1 and idx.count((1.0,)) == 1 and idx.count((True,)) == 0


def test_float_rule_negative_zero_and_nan(mod):
    R = mod.Record
    idx = mod.Index()
    t = Trace(idx)
    t.on("zero", P(mod, "x(0.0)"))
    t.on("negzero", P(mod, "x(-0.0)"))
    t.on("nan", P(mod, "x(nan)"))
    idx.add_assertion(R("x", -0.0))
    assert t.take() == [("negzero", "+", ())]
    nan1, nan2 = float("nan"), float("nan")
    idx.add_assertion(R("x", nan1))
    idx.add_assertion(R("x", nan2))  # same bits: the same value, counted twice
    assert t.take() == [("nan", "+", ())]
    assert idx.count(R("x", nan2)) == 2
    assert mod.canonical_equal(nan1, nan2) and not mod.canonical_equal(0.0, -0.0)
    other_nan = math.copysign(float("nan"), -1.0)
    assert not mod.canonical_equal(nan1, other_nan)


def test_records_compare_canonically(mod):
    R = mod.Record
    assert R("a", 1) == R("a", 1) and hash(R("a", 1)) == hash(R("a", 1))
    assert R("a", 1) != R("a", True) and R("a", 1) != R("a", 1.0)
    assert R("a", (1,)) != R("a", (True,))
    assert R("a", 0.0) != R("a", -0.0)
    assert R("a", 1) != R("b", 1) and R("a", 1) != R("a", 1, 2)
    assert R("a", 1) != ("a", 1)
    assert len({R("a", 1), R("a", 1.0), R("a", True), R("a", 1)}) == 3
    r = R("speak", "Alice", "hi")
    assert r.label == "speak" and r.fields == ("Alice", "hi")
    if mod is compiled:  # the interpreted build is a plain class
        with pytest.raises(AttributeError):
            r.label = "x"


def test_record_rejects_bad_labels_and_fields(mod):
    R = mod.Record
    with pytest.raises(InvalidValueError, match="label must be a str"):
        R(5)
    with pytest.raises(InvalidValueError, match="reserved for tuples"):
        R("", 1)
    with pytest.raises(InvalidValueError, match="set is not a dataspace value"):
        R("a", {1})
    with pytest.raises(InvalidValueError, match="dict is not"):
        R("a", {})

    class MyInt(int):
        pass

    with pytest.raises(InvalidValueError, match="subclass of int"):
        R("a", MyInt(1))


# ---------------------------------------------------------------- handlers


def test_same_callback_twice_gets_events_twice_and_removal_is_per_handle(mod):
    R = mod.Record
    idx = mod.Index()
    seen = []

    def cb(ev, caps):
        seen.append((ev, caps))

    h1 = idx.add_handler(P(mod, "present($)"), cb)
    h2 = idx.add_handler(P(mod, "present($)"), cb)
    idx.add_assertion(R("present", "A"))
    assert seen == [("+", ("A",)), ("+", ("A",))]
    idx.remove_handler(h1)
    assert not h1.active and h2.active
    idx.remove_assertion(R("present", "A"))
    assert seen[2:] == [("-", ("A",))]


def test_remove_handler_errors(mod):
    idx, other = mod.Index(), mod.Index()
    h = idx.add_handler(P(mod, "_"), lambda ev, caps: None)
    with pytest.raises(UnknownHandlerError, match="another index"):
        other.remove_handler(h)
    idx.remove_handler(h)
    with pytest.raises(UnknownHandlerError, match="already removed"):
        idx.remove_handler(h)
    with pytest.raises(DataspaceTypeError):
        idx.remove_handler("h")


def test_bad_arguments_raise_clear_errors(mod):
    idx = mod.Index()
    with pytest.raises(DataspaceTypeError, match="callable"):
        idx.add_handler(P(mod, "_"), 42)
    with pytest.raises(InvalidValueError, match="pattern"):
        idx.add_assertion(P(mod, "present($)"))
    with pytest.raises(InvalidValueError, match="pattern"):
        idx.send_message((DISCARD,))
    with pytest.raises(InvalidValueError, match="set is not"):
        idx.add_assertion({1})
    with pytest.raises(InvalidValueError, match="object is not"):
        idx.add_assertion(object())
    with pytest.raises(InvalidValueError):
        idx.add_handler(({1},), print)
    assert isinstance(InvalidValueError("x"), TypeError)


def test_removed_handler_gets_nothing_and_structure_is_pruned(mod):
    R = mod.Record
    idx = mod.Index()
    empty = idx.stats()
    t = Trace(idx)
    hs = [t.on(str(i), P(mod, p)) for i, p in enumerate([
        "A(B($), $)", 'A(B("x"), $)', 'A(B("y"), $)', "A(_, $)", "[$, [_, $]]", "_", "$"])]
    for v in (R("A", R("B", "x"), 1), (1, (2, 3))):
        idx.add_assertion(v)
    t.take()
    full = idx.stats()
    assert full["handlers"] == 7 and full["tables"] >= 4
    idx.remove_handler(hs[1])
    s = idx.stats()
    assert s["leaves"] == full["leaves"] - 1 and s["tables"] == full["tables"]
    for h in hs:
        if h.active:
            idx.remove_handler(h)
    assert idx.stats() == dict(empty, assertions=2)
    idx.remove_assertion((1, (2, 3)))
    assert t.take() == []
    # The pruned trie grows back with the right caches.
    t.on("again", P(mod, 'A(B("x"), $)'))
    assert t.take() == [("again", "+", (1,))]


def test_callbacks_may_call_back_into_the_index(mod):
    R = mod.Record
    idx = mod.Index()
    log = []

    def on_present(ev, caps):
        log.append((ev, caps))
        if ev == "+":
            idx.add_assertion(R("greeting", caps[0]))
            idx.add_handler(P(mod, "greeting($)"), lambda e, c: log.append(("g", e, c)))

    idx.add_handler(P(mod, "present($)"), on_present)
    idx.add_assertion(R("present", "Alice"))
    assert log == [("+", ("Alice",)), ("g", "+", ("Alice",))]
    assert R("greeting", "Alice") in idx


def test_a_raising_callback_does_not_starve_the_others(mod):
    R = mod.Record
    idx = mod.Index()
    seen = []

    def bad(ev, caps):
        raise RuntimeError("boom")

    idx.add_handler(P(mod, "present($)"), bad)
    idx.add_handler(P(mod, "present($)"), lambda ev, caps: seen.append(caps))
    with pytest.raises(RuntimeError, match="boom"):
        idx.add_assertion(R("present", "A"))
    assert seen == [("A",)] and R("present", "A") in idx
    # A handler whose callback raises while being told of what is present
    # is not installed: add_handler fails as a whole.
    before = idx.stats()
    with pytest.raises(RuntimeError, match="boom"):
        idx.add_handler(P(mod, "present($)"), bad)
    assert idx.stats() == before
    h = idx.add_handler(P(mod, "present(_)"), lambda ev, caps: None)
    idx.remove_handler(h)

    def bad_later(ev, caps):
        if ev == "-":
            raise ValueError("late")

    idx.add_handler(P(mod, "present($)"), bad_later)
    with pytest.raises(ExceptionGroup) as info:
        idx.remove_assertion(R("present", "A"))
    assert len(info.value.exceptions) == 2
    assert seen == [("A",), ("A",)] and len(idx) == 0


def test_top_level_atoms_and_tuples_are_values(mod):
    idx = mod.Index()
    t = Trace(idx)
    t.on("any", P(mod, "$"))
    t.on("hi", P(mod, '"hi"'))
    for v in ("hi", b"hi", None, 0, False, 0.0, (), ((),)):
        idx.add_assertion(v)
    assert len(idx) == 8
    events = t.take()
    assert ("hi", "+", ()) in events and len(events) == 9
    assert sorted(idx.assertions(), key=repr) == sorted(
        ["hi", b"hi", None, 0, False, 0.0, (), ((),)], key=repr)


@pytest.mark.parametrize(
    "text, exact",
    [
        ("speak($, $)", True),
        ('present("Alice", $)', True),
        ('present("Alice")', True),
        ("$", True),
        ("$:a(_, _)", True),
        ("a($:[_, 1], $)", True),
        ("speak($, _)", False),
        ("_", False),
        ("[_, $]", False),
        ("a($, b(_))", False),
    ],
)
def test_exact_patterns_are_recognised(mod, text, exact):
    """Constants and captures covering every hole make a handler exact: it
    needs no bag, since distinct values give distinct capture tuples."""
    assert mod.analyse(P(mod, text)).exact is exact


def test_exact_and_bagged_handlers_agree(mod):
    R = mod.Record
    idx = mod.Index()
    t = Trace(idx)
    t.on("exact", P(mod, "a($, $)"))
    t.on("bagged", P(mod, "a($, _)"))
    t.on("erasing", P(mod, "a(_, _)"))
    for v in (R("a", 1, 2), R("a", 1, 3), R("a", 1, 2)):
        idx.add_assertion(v)
    assert t.take() == sorted([
        ("exact", "+", (1, 2)), ("exact", "+", (1, 3)), ("bagged", "+", (1,)),
        ("erasing", "+", ())], key=repr)
    idx.remove_assertion(R("a", 1, 2))
    assert t.take() == []
    idx.remove_assertion(R("a", 1, 2))
    assert t.take() == [("exact", "-", (1, 2))]
    idx.remove_assertion(R("a", 1, 3))
    assert t.take() == sorted([("exact", "-", (1, 3)), ("bagged", "-", (1,)),
                               ("erasing", "-", ())], key=repr)


def test_record_is_pattern_when_it_holds_discard_or_capture(mod):
    R = mod.Record
    assert not R("a", 1, (2, R("b", "x"))).is_pattern
    assert R("a", DISCARD).is_pattern
    assert R("a", 1, (2, R("b", capture()))).is_pattern
    assert R("a", [capture(1)]).is_pattern


def test_records_pickle_and_copy(mod):
    import copy
    import pickle

    r = mod.Record("speak", "Alice", (1, 2.5, True), mod.Record("at", None, b"\x00"))
    for back in (pickle.loads(pickle.dumps(r)), copy.deepcopy(r), copy.copy(r)):
        assert back == r and type(back) is mod.Record and hash(back) == hash(r)
    assert pickle.loads(pickle.dumps(P(mod, "a($x:_, _)"))) == P(mod, "a($x:_, _)")


def test_both_builds_compile_the_same_source():
    """The compiled module includes exactly the files the interpreted build
    imports as modules, and both expose the names of the type stub."""
    here = Path(ds.__file__).parent
    included = re.findall(r'^include "(\w+)\.py"$', (here / "_compiled.pyx").read_text(), re.M)
    assert included == ["_canonical", "_skeleton", "_trie", "_index", "_codec"]
    imported = {
        node.module.rpartition(".")[2]
        for node in ast.walk(ast.parse((here / "_interpreted.py").read_text()))
        if isinstance(node, ast.ImportFrom)
    }
    assert imported == {*included, "_values"}
    stub = ast.parse((here / "_compiled.pyi").read_text())
    public = {n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    public |= {n.target.id for n in stub.body
               if isinstance(n, ast.AnnAssign) and n.target.id.isupper() and n.value is None}
    assert public == set(interpreted.__all__)
    assert all(hasattr(compiled, name) for name in public)


def test_lists_are_tuples(mod):
    """The paper writes tuples [3]; a Python list is taken as that tuple."""
    R = mod.Record
    idx = mod.Index()
    t = Trace(idx)
    t.on("one", [DISCARD])
    t.on("val", [capture()])
    idx.add_assertion([3])
    idx.add_assertion([4])
    assert t.take() == sorted([("one", "+", ()), ("val", "+", (3,)), ("val", "+", (4,))],
                              key=repr)
    idx.remove_assertion((3,))
    assert t.take() == [("val", "-", (3,))]
    assert [4] in idx and idx.count((4,)) == 1 and idx.assertions() == [(4,)]
    r = R("a", [1, [2]])
    assert r.fields == ((1, (2,)),) and r == R("a", (1, (2,)))
    assert mod.analyse([1, capture([DISCARD])]).shape == ("", 2, None, ("", 1, None))
    idx.send_message([5])
    assert t.take() == [("one", "!", ()), ("val", "!", (5,))]
