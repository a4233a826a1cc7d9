"""The nesting limit: values and patterns deeper than ``MAX_DEPTH`` levels are
refused with :class:`InvalidValueError` (bytes with :class:`DecodeError`),
the same way in both builds, in the codec, ``Record`` and every ``Index``
entry point, and nothing recurses far enough to crash the interpreter.

The very deep cases run in a subprocess, so a regression (a C stack overflow
kills the process) shows as a failed test, not as a dead test run.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.dataspace import compiled, interpreted

from a0py.dataspace import (
    MAX_DEPTH,
    DecodeError,
    InvalidValueError,
    capture,
    decode,
    encode,
)
from a0py.errors import A0Error

ROOT = Path(__file__).resolve().parents[2]



def records(mod, depth, inner=None):
    """``a(a(...a(inner)...))``: ``depth`` levels (``a()`` when inner is None)."""
    v = mod.Record("a") if inner is None else mod.Record("a", inner)
    for _i in range(depth - 1):
        v = mod.Record("a", v)
    return v


def tuples(depth, inner=None):
    """``((...(inner,)...),)``: ``depth`` levels (``()`` innermost when inner is None)."""
    v = () if inner is None else (inner,)
    for _i in range(depth - 1):
        v = (v,)
    return v


def mixed(mod, depth):
    """Records and tuples alternating, ``depth`` levels around the atom 1."""
    v = 1
    for i in range(depth):
        v = mod.Record("m", v, "x") if i % 2 else (v, 2)
    return v


def test_limit_is_the_codecs():
    assert MAX_DEPTH == 256
    assert compiled is None or compiled.MAX_DEPTH == MAX_DEPTH
    assert interpreted.MAX_DEPTH == MAX_DEPTH


def test_record_at_the_limit_is_accepted_one_more_is_refused(mod):
    r = records(mod, MAX_DEPTH)
    assert r == records(mod, MAX_DEPTH) and hash(r) == hash(records(mod, MAX_DEPTH))
    assert r != records(mod, MAX_DEPTH, inner=1)
    with pytest.raises(InvalidValueError, match=rf"deeper than MAX_DEPTH \({MAX_DEPTH}\)") as e:
        mod.Record("a", r)
    assert isinstance(e.value, A0Error) and isinstance(e.value, TypeError)
    # Tuples and lists count a level each, as records do.
    mod.Record("a", tuples(MAX_DEPTH - 1))
    with pytest.raises(InvalidValueError, match="deeper"):
        mod.Record("a", tuples(MAX_DEPTH))
    with pytest.raises(InvalidValueError, match="deeper"):
        mod.Record("a", [tuples(MAX_DEPTH - 1)])
    with pytest.raises(InvalidValueError, match="deeper"):
        mod.Record("a", 1, (2, records(mod, MAX_DEPTH - 1)))


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1])
def test_index_encode_and_value_key_agree_on_the_limit(mod, depth):
    built = [tuples(depth), tuples(depth, inner=1.0)]
    if depth <= MAX_DEPTH:
        built += [records(mod, depth), mixed(mod, depth)]
    else:  # a record cannot even be built that deep: wrap one in a tuple
        built += [(records(mod, MAX_DEPTH),), tuples(2, inner=records(mod, MAX_DEPTH - 1))]
    for v in built:
        idx = mod.Index()
        if depth <= MAX_DEPTH:
            assert decode(encode(v), record=mod.Record) == v
            mod.value_key(v)
            assert mod.canonical_equal(v, v) and mod.canonical_hash(v) == mod.canonical_hash(v)
            idx.add_assertion(v)
            assert v in idx and idx.count(v) == 1
            idx.send_message(v)
            idx.remove_assertion(v)
            idx.patch(additions=[v], removals=[v])
            assert len(idx) == 0
            continue
        for call in (encode, mod.value_key, idx.add_assertion, idx.remove_assertion,
                     idx.send_message, idx.count, idx.__contains__,
                     lambda v, idx=idx: idx.patch(additions=[v]),
                     lambda v, idx=idx: idx.patch(removals=[v])):
            with pytest.raises(InvalidValueError, match="deeper"):
                call(v)
        assert len(idx) == 0


def test_patterns_are_held_to_the_limit(mod):
    seen = []
    idx = mod.Index()
    ok = tuples(MAX_DEPTH - 1, inner=capture())  # the capture is level MAX_DEPTH
    idx.add_handler(ok, lambda ev, caps: seen.append(caps))
    idx.add_assertion(tuples(MAX_DEPTH - 1, inner="x"))
    assert seen == [("x",)]
    too_deep = [
        tuples(MAX_DEPTH, inner=capture()),
        [tuples(MAX_DEPTH - 1, inner=capture())],
        capture(tuples(MAX_DEPTH)),
        tuples(MAX_DEPTH + 1),
    ]
    c = capture()
    for _i in range(MAX_DEPTH):  # captures count a level each too
        c = capture(c)
    too_deep.append(c)
    for p in too_deep:
        with pytest.raises(InvalidValueError, match="deeper"):
            idx.add_handler(p, print)
        with pytest.raises(InvalidValueError, match="deeper"):
            mod.analyse(p)
    with pytest.raises(InvalidValueError, match="deeper"):
        mod.Record("p", c)
    assert idx.stats()["handlers"] == 1


def test_decode_refuses_what_record_and_the_index_would(mod):
    inner_none = "070001" * MAX_DEPTH + "00"  # 256 tuples around None
    inner_empty = "070001" * (MAX_DEPTH - 1) + "070000"  # 256 tuples, the last empty
    for hexbytes in (inner_none, inner_empty):
        v = decode(bytes.fromhex(hexbytes), record=mod.Record)
        mod.Index().add_assertion(v)
    record = "07" + "0161" + "01"  # a(...): label "a", arity 1
    v = decode(bytes.fromhex(record * (MAX_DEPTH - 1) + "070161" + "00"), record=mod.Record)
    assert v == records(mod, MAX_DEPTH)
    for hexbytes in ("070001" * MAX_DEPTH + "070000", record * MAX_DEPTH + "070161" + "00"):
        with pytest.raises(DecodeError, match=f"nesting deeper than {MAX_DEPTH}"):
            decode(bytes.fromhex(hexbytes), record=mod.Record)


def test_hashing_and_equality_refuse_too_deep_tuples(mod):
    with pytest.raises(InvalidValueError, match="deeper"):
        mod.Canon(tuples(MAX_DEPTH + 1))
    with pytest.raises(InvalidValueError, match="deeper"):
        mod.canonical_hash(tuples(MAX_DEPTH + 1))
    assert mod.Canon(tuples(MAX_DEPTH, inner=1.0)) == mod.Canon(tuples(MAX_DEPTH, inner=1.0))
    # Tuples around the deepest record: equality stops at the limit instead
    # of recursing through both (which would overflow the interpreted build).
    a = tuples(MAX_DEPTH - 1, inner=records(mod, MAX_DEPTH))
    b = tuples(MAX_DEPTH - 1, inner=records(mod, MAX_DEPTH))
    assert mod.canonical_hash(a) == mod.canonical_hash(b)
    with pytest.raises(InvalidValueError, match="deeper"):
        mod.canonical_equal(a, b)
    with pytest.raises(InvalidValueError, match="deeper"):
        mod.canonical_equal(tuples(MAX_DEPTH + 1, inner=1), tuples(MAX_DEPTH + 1, inner=1))


# Every entry point, on values far deeper than the C stack allows to recurse
# over (100 000 levels crashed the compiled build before the limit).
_DEEP_SCRIPT = textwrap.dedent("""
    import sys
    import a0py.dataspace as ds
    from a0py.dataspace import InvalidValueError, capture, encode
    from a0py.dataspace import _interpreted as interpreted
    from a0py.dataspace import _compiled as compiled

    mod = compiled if sys.argv[1] == "compiled" else interpreted
    N = 100_000
    R = mod.Record
    deep, twin = (), ()
    for _ in range(N):
        deep, twin = (deep,), (twin,)
    deep_list = []
    for _ in range(N):
        deep_list = [deep_list]
    chain = capture()
    for _ in range(N):
        chain = capture(chain)
    rec = R("a")
    built = 1
    try:
        for _ in range(N):
            rec = R("a", rec)
            built += 1
    except InvalidValueError:
        pass
    print("chain", built, flush=True)
    idx = mod.Index()
    checks = {
        "Record(tuple)": lambda: R("a", deep),
        "Record(list)": lambda: R("a", deep_list),
        "Record(capture)": lambda: R("a", chain),
        "Record(record)": lambda: R("a", rec),
        "hash": lambda: mod.canonical_hash(deep),
        "eq": lambda: mod.canonical_equal(deep, twin),
        "Canon": lambda: mod.Canon(deep),
        "value_key": lambda: mod.value_key(deep),
        "encode": lambda: encode(deep),
        "encode(list)": lambda: encode(deep_list),
        "add_assertion": lambda: idx.add_assertion(deep),
        "add_assertion(list)": lambda: idx.add_assertion(deep_list),
        "add_assertion(record)": lambda: idx.add_assertion((rec,)),
        "remove_assertion": lambda: idx.remove_assertion(deep),
        "send_message": lambda: idx.send_message(deep),
        "count": lambda: idx.count(deep),
        "contains": lambda: deep in idx,
        "patch": lambda: idx.patch(additions=[deep]),
        "add_handler(tuple)": lambda: idx.add_handler(deep, print),
        "add_handler(list)": lambda: idx.add_handler(deep_list, print),
        "add_handler(capture)": lambda: idx.add_handler(chain, print),
        "add_handler(capture of tuple)": lambda: idx.add_handler(capture(deep), print),
        "analyse": lambda: mod.analyse(deep),
    }
    for name, call in checks.items():
        try:
            call()
        except InvalidValueError as e:
            assert "deeper" in str(e), (name, str(e))
            print("ok", name, flush=True)
        else:
            print("NOT REFUSED", name, flush=True)
    # The longest chain of records is also compared and asserted fine.
    idx.add_assertion(rec)
    assert rec == mod.Record(rec.label, *rec.fields) and rec in idx
    print("done", flush=True)
""")


@pytest.mark.parametrize("build", ["compiled", "interpreted"])
def test_very_deep_values_are_refused_without_crashing(build):
    proc = subprocess.run(
        [sys.executable, "-c", _DEEP_SCRIPT, build],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"rc {proc.returncode}\n{out}\n{proc.stderr[-3000:]}"
    assert f"chain {MAX_DEPTH}" in out
    assert "NOT REFUSED" not in out, out
    assert out.count("ok ") == 23 and out.rstrip().endswith("done"), out
