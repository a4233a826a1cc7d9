"""Values: canonical encoding (golden bytes, round trips, malformed input)
and the text syntax (parse, repr, errors)."""

import math
import re
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a0py.dataspace import (
    DISCARD,
    Capture,
    DataspaceTypeError,
    DecodeError,
    InvalidValueError,
    ParseError,
    Record,
    _,
    canonical_equal,
    capture,
    decode,
    encode,
    format_term,
    parse,
    value_key,
)
from a0py.errors import A0Error

# ---------------------------------------------------------------- strategies

atoms = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=20).map(lambda b: struct.unpack(">d", (b + bytes(8))[:8])[0]),  # any bits
    st.text(max_size=10),
    st.binary(max_size=10),
)
labels = st.text(min_size=1, max_size=8)
values = st.recursive(
    atoms,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3).map(tuple),
        st.builds(lambda label, fields: Record(label, *fields), labels,
                  st.lists(kids, max_size=3)),
    ),
    max_leaves=12,
)
utf8_values = values.filter(lambda v: _encodable(v))


def _encodable(v):
    try:
        encode(v)
        return True
    except InvalidValueError:
        return False


# ---------------------------------------------------------------- encoding


@pytest.mark.parametrize(
    "value, hexbytes",
    [
        (None, "00"),
        (False, "01"),
        (True, "02"),
        (0, "030100"),
        (127, "03017f"),
        (128, "03020080"),
        (-1, "0301ff"),
        (-128, "030180"),
        (-129, "0302ff7f"),
        (1.0, "043ff0000000000000"),
        (-0.0, "048000000000000000"),
        ("hé", "050368c3a9"),
        (b"\x00\xff", "060200ff"),
        ((), "070000"),
        ((1, "a"), "07000203010105016161"[:-2]),
        (Record("present", "Alice"), "0707" + b"present".hex() + "01" + "0505" + b"Alice".hex()),
        (Record("a", Record("b")), "07016101" + "0701620" + "0"),
    ],
)
def test_encoding_golden_bytes(value, hexbytes):
    assert encode(value).hex() == hexbytes
    assert canonical_equal(decode(bytes.fromhex(hexbytes)), value)


def test_long_lengths_use_multibyte_varints():
    s = "x" * 300
    assert encode(s)[:3] == bytes([0x05, 0xAC, 0x02])
    assert decode(encode(s)) == s


@given(values)
def test_encoding_round_trips_exactly(v):
    try:
        data = encode(v)
    except InvalidValueError:
        return  # a str with a lone surrogate has no UTF-8 encoding
    back = decode(data)
    assert canonical_equal(back, v)
    assert encode(back) == data
    if type(v) is float:
        assert struct.pack(">d", back) == struct.pack(">d", v)


@given(values, values)
def test_equal_bytes_iff_canonically_equal(a, b):
    if not (_encodable(a) and _encodable(b)):
        return
    assert (encode(a) == encode(b)) == canonical_equal(a, b)


def test_one_one_point_zero_and_true_encode_apart():
    assert len({encode(1), encode(1.0), encode(True)}) == 3
    assert encode(0.0) != encode(-0.0)
    assert encode(float("nan")) == encode(float("nan"))


@given(st.binary(max_size=40))
def test_decoding_random_bytes_is_a_value_or_a_decode_error(data):
    try:
        v = decode(data)
    except DecodeError:
        return
    assert encode(v) == data  # only canonical input is accepted


@pytest.mark.parametrize(
    "hexbytes, message",
    [
        ("", "truncated: expected a tag at offset 0"),
        ("09", "unknown tag 0x09 at offset 0"),
        ("0300", "int of length 0"),
        ("0302007f", "non-minimal int"),
        ("0302ff80", "non-minimal int"),
        ("0302", "truncated: an int needs 2 bytes, 0 left"),
        ("0580", "truncated: expected a str's length"),
        ("058000", "non-minimal varint"),
        ("05ffffffffffffffffff01", "longer than 9 bytes"),
        ("050161ff", "1 trailing bytes"),
        ("0502c328", "invalid UTF-8 in a str"),
        ("0403", "truncated: a float needs 8 bytes"),
        ("0701ff00", "invalid UTF-8 in a record label"),
        ("070005", "truncated: record of arity 5 cannot fit"),
        ("07008080808001", "cannot fit"),
        ("0700" + "01" * 1 + "00" + "00", "trailing"),
        ("070001" * 300 + "00", "nesting deeper than 256"),
    ],
)
def test_malformed_input_is_a_clear_decode_error(hexbytes, message):
    with pytest.raises(DecodeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        decode(bytes.fromhex(hexbytes))
    assert issubclass(DecodeError, A0Error) and issubclass(DecodeError, ValueError)


def test_decode_accepts_bytes_like_and_rejects_others():
    data = encode(Record("a", 1))
    assert decode(bytearray(data)) == decode(memoryview(data)) == Record("a", 1)
    with pytest.raises(DataspaceTypeError, match="takes bytes"):
        decode("07")


def test_encode_rejects_non_values():
    with pytest.raises(InvalidValueError, match="pattern"):
        encode(Record("a", _))
    with pytest.raises(InvalidValueError, match="pattern"):
        encode(capture())
    with pytest.raises(InvalidValueError, match="set is not"):
        encode({1})
    assert encode([1, [2]]) == encode((1, (2,)))
    with pytest.raises(InvalidValueError, match="lone surrogate"):
        encode("\ud800")
    deep = ()
    for _i in range(300):
        deep = (deep,)
    with pytest.raises(InvalidValueError, match="deeper"):
        encode(deep)


def test_value_key_keeps_one_one_point_zero_and_true_apart():
    keys = {value_key(1), value_key(1.0), value_key(True), value_key(1)}
    assert len(keys) == 3
    assert value_key("s") == "s" and value_key(Record("a")) is not None
    with pytest.raises(InvalidValueError):
        value_key((1, _))


# ---------------------------------------------------------------- text syntax


def test_parse_the_papers_examples():
    assert parse('present("Alice")') == Record("present", "Alice")
    p = parse('speak("Alice", $what)')
    assert p.label == "speak" and p.fields[0] == "Alice"
    assert type(p.fields[1]) is Capture and p.fields[1].name == "what"
    assert p.fields[1].pattern is DISCARD
    assert parse("_") is DISCARD
    assert parse("[_, _]") == (DISCARD, DISCARD)
    assert parse("$who:present(_)") == capture(Record("present", _), name="who")


def test_parse_atoms():
    assert parse("None") is None and parse("True") is True and parse("False") is False
    assert parse("-12") == -12 and parse("0x1f") == 31 and parse("0b101") == 5
    for text, want in [("1.5", 1.5), ("-0.0", -0.0), ("1e3", 1000.0), ("inf", math.inf),
                       ("-inf", -math.inf)]:
        got = parse(text)
        assert type(got) is float and canonical_equal(got, want)
    assert math.isnan(parse("nan"))
    assert parse('"a\\nb\\u00e9"') == "a\nbé"
    assert parse('b"\\x00\\"\\\\a"') == b'\x00"\\a'
    assert parse("[]") == () and parse("[1, [2]]") == (1, (2,))
    assert parse("a(1, 2,)  # comment") == Record("a", 1, 2)
    assert parse('"two words"(1)') == Record("two words", 1)
    assert parse("user-present(x.y())") == Record("user-present", Record("x.y"))


@given(values)
def test_repr_is_the_text_syntax_and_parses_back(v):
    text = format_term(v)
    back = parse(text)
    if _has_odd_nan(v):
        return  # the text has one NaN; the byte encoding keeps every payload
    assert canonical_equal(back, v), text
    if type(v) is Record:
        assert repr(v) == text


def _has_odd_nan(v):
    if type(v) is float:
        return math.isnan(v) and struct.pack(">d", v) != struct.pack(">d", float("nan"))
    if type(v) is tuple:
        return any(_has_odd_nan(x) for x in v)
    if type(v) is Record:
        return any(_has_odd_nan(x) for x in v.fields)
    return False


def test_repr_of_patterns():
    assert repr(parse('speak("Alice", $what, _, $:[$x, 1])')) == \
        'speak("Alice", $what, _, $:[$x, 1])'


def test_repr_of_pattern_terms_alone_is_the_text_syntax():
    assert repr(DISCARD) == format_term(_) == "_"
    assert repr(capture()) == "$"
    assert repr(capture(name="who")) == "$who"
    assert repr(capture(Record("a", "x", b"\x00", (1, 2.5)), name="y")) == \
        '$y:a("x", b"\\x00", [1, 2.5])'
    assert repr(capture(capture("s"))) == format_term(capture(capture("s"))) == '$:$:"s"'
    for text in ("$", "$who", '$y:a("x", b"\\x00", [1, 2.5])', '$:$:"s"'):
        assert repr(parse(text)) == text


@pytest.mark.parametrize(
    "text, message, position",
    [
        ("", "found end of text", 0),
        ('present("Alice"', "expected ',' or ')'", 15),
        ('"abc', "unterminated string", 0),
        ("alice", "bare word 'alice' is not a value", 0),
        ("$x(1)", "subpattern follows a colon", 2),
        ("a(1) b", "after the end of the term", 5),
        ('""(1)', "empty label is reserved", 0),
        ('b"\\q"', "unknown escape", 2),
        ('b"é"', "printable ASCII", 2),
        ("[1 2]", "expected ',' or ']'", 3),
        ("@", "unexpected character '@'", 0),
    ],
)
def test_parse_errors_name_the_problem_and_the_place(text, message, position):
    with pytest.raises(ParseError, match=re.escape(message)) as info:
        parse(text)
    assert info.value.position == position
    assert issubclass(ParseError, A0Error) and issubclass(ParseError, ValueError)


def test_parse_rejects_non_text():
    with pytest.raises(DataspaceTypeError):
        parse(b"a()")


def test_parse_nesting_limit():
    with pytest.raises(ParseError, match="nesting deeper"):
        parse("[" * 300 + "]" * 300)
    with pytest.raises(ParseError, match="nesting deeper"):
        parse("$:" * 300 + "1")
    assert parse("[" * 150 + "]" * 150) is not None


def test_capture_requires_a_str_name():
    with pytest.raises(DataspaceTypeError, match="name"):
        capture(name=3)
    assert capture(1, name="n") == capture(1, name="n") != capture(True, name="n")
