"""The byte codec's two builds (compiled ``a0py.dataspace._compiled`` and interpreted
``a0py.dataspace._interpreted``, one source: ``_codec.py``) give the same bytes, the same
values and the same errors; the compiled build's C paths (ints that fit 64 bits, floats)
agree with the general ones at their edges."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

import a0py.dataspace as ds
from a0py.dataspace import DataspaceTypeError, DecodeError, InvalidValueError, capture
from a0py.dataspace import _compiled as compiled
from a0py.dataspace import _interpreted as interpreted

BUILDS = [compiled, interpreted]

ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, -(2**64), 2**55, -(2**55) - 1]),
    st.binary(min_size=8, max_size=8).map(lambda b: struct.unpack(">d", b)[0]),  # any bits
    st.text(max_size=10),
    st.binary(max_size=10),
)


def values_of(mod):
    return st.recursive(
        ATOMS,
        lambda kids: st.one_of(
            st.lists(kids, max_size=3).map(tuple),
            st.lists(kids, max_size=3),
            st.builds(lambda label, fields: mod.Record(label, *fields),
                      st.text(min_size=1, max_size=8), st.lists(kids, max_size=3)),
        ),
        max_leaves=12,
    )


def outcome(call, *args, **kwargs):
    try:
        return ("ok", call(*args, **kwargs))
    except (InvalidValueError, DecodeError, DataspaceTypeError) as exc:
        return (type(exc).__name__, str(exc))


def test_the_package_uses_the_compiled_codec():
    assert ds.encode is compiled.encode and ds.decode is compiled.decode


@pytest.mark.parametrize("maker", BUILDS, ids=["compiled-values", "interpreted-values"])
@given(data=st.data())
def test_both_builds_encode_alike(maker, data):
    v = data.draw(values_of(maker))
    results = [outcome(mod.encode, v) for mod in BUILDS]
    assert results[0] == results[1]


def reference_int(v):
    n = (v + (v < 0)).bit_length() // 8 + 1
    return bytes([0x03, n]) + v.to_bytes(n, "big", signed=True)


@pytest.mark.parametrize("mod", BUILDS, ids=["compiled", "interpreted"])
def test_ints_at_the_64_bit_edges(mod):
    edges = [0, 1, -1, 127, 128, -128, -129, 255, 256, 2**31, -(2**31), 2**55 - 1, 2**55, -(2**55),
             2**62, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, -(2**64), 2**100,
             -(2**100)]
    for e in edges:
        for v in (e, e + 1, e - 1):
            assert mod.encode(v) == reference_int(v), v
            back = mod.decode(reference_int(v))
            assert type(back) is int and back == v


@pytest.mark.parametrize("mod", BUILDS, ids=["compiled", "interpreted"])
def test_floats_keep_their_bits(mod):
    for bits in (b"\x80" + bytes(7), b"\x7f\xf8" + bytes(6), b"\xff\xf0" + bytes(6),
                 b"\x7f\xf0\x00\x00\x00\x00\x00\x01", b"\x00" * 7 + b"\x01", b"\x3f\xf0" + bytes(6)):
        x = struct.unpack(">d", bits)[0]
        assert mod.encode(x) == b"\x04" + bits
        assert struct.pack(">d", mod.decode(b"\x04" + bits)) == bits


@given(st.one_of(st.binary(max_size=40),
                 values_of(compiled).map(lambda v: outcome(compiled.encode, v)[1])
                 .filter(lambda b: isinstance(b, bytes)).flatmap(
                     lambda b: st.tuples(st.just(b), st.integers(0, max(len(b) - 1, 0)),
                                         st.integers(0, 255)))
                 .map(lambda t: t[0][:t[1]] + bytes([t[2]]) + t[0][t[1] + 1:])))
def test_both_builds_decode_alike(data):
    got = [outcome(mod.decode, data, record=compiled.Record) for mod in BUILDS]
    if got[0][0] == "ok" and got[1][0] == "ok":
        assert compiled.encode(got[0][1]) == compiled.encode(got[1][1]) == data
    else:
        assert got[0] == got[1]


@pytest.mark.parametrize("mod", BUILDS, ids=["compiled", "interpreted"])
def test_either_build_builds_either_records(mod):
    for other in BUILDS:
        v = other.Record("a", 1, other.Record("b", (2.5, "x")))
        data = mod.encode(v)
        for target in BUILDS:
            back = mod.decode(data, record=target.Record)
            assert type(back) is target.Record and target.encode(back) == data
    assert type(mod.decode(mod.encode(mod.Record("a")))) is mod.Record


@pytest.mark.parametrize("mod", BUILDS, ids=["compiled", "interpreted"])
def test_errors_are_the_same_in_both_builds(mod):
    cases = [mod.Record("a", ds._), capture(), {1}, "\ud800", mod.Record("\ud800"), 1 + 2j]
    for v in cases:
        assert outcome(mod.encode, v) == outcome(compiled.encode, v) != ("ok", None)
    for raw in ("", "09", "0300", "0302007f", "0580", "058000", "05ffffffffffffffffff01",
                "050161ff", "0502c328", "0403", "0701ff00", "070005", "0700" + "0100" * 2):
        data = bytes.fromhex(raw)
        assert outcome(mod.decode, data) == outcome(interpreted.decode, data)
        assert outcome(mod.decode, data)[0] == "DecodeError"
    assert outcome(mod.decode, "07")[0] == "DataspaceTypeError"
