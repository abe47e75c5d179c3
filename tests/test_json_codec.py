"""The wire's JSON codec gives the standard library's answers, whichever of orjson and json
does the work: bodies decode to what ``json.loads`` gives (or say they cannot be vouched for,
so the caller asks ``json.loads``), and values encode to JSON that decodes to what
``json.dumps`` would have sent."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolmesh.json_codec import Unsure, dumps, fast_loads

#: every value JSON can carry, and what json.dumps also takes: NaN and the infinities,
#: integers of any size, lone surrogates, non-str keys
scalars = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(st.characters(codec=None)) | st.text(st.characters(codec="utf-8")))
values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=4)
                   | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4)),
    max_leaves=20)


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, and ints and floats never equal to each other."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def reference(value: Any) -> bytes:
    """What the bus sent before orjson: json.dumps, ASCII-escaped if it is not UTF-8."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


@settings(max_examples=400, deadline=None)
@given(values)
def test_dumps_sends_what_json_dumps_sent(value: Any) -> None:
    assert same(json.loads(dumps(value)), json.loads(reference(value)))


@settings(max_examples=400, deadline=None)
@given(values, st.booleans())
def test_fast_loads_answers_as_json_loads_or_says_it_cannot(value: Any, ascii_: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_)
    for data in (text, text.encode("utf-8", "surrogatepass")):
        try:
            decoded = fast_loads(data)
        except Unsure:
            continue
        assert same(decoded, json.loads(data))


@pytest.mark.parametrize(("value", "sent"), [
    # orjson writes these as null; json writes what TrustGraph's Python peers read back
    ({"error": None, "x": float("nan")}, b'{"error":null,"x":NaN}'),
    ([None, [float("inf"), float("-inf")]], b'[null,[Infinity,-Infinity]]'),
    # orjson refuses these; json encodes them
    ({"big": 2**64, "neg": -(2**63) - 1},
     b'{"big":18446744073709551616,"neg":-9223372036854775809}'),
    ({1: "one", None: "none"}, b'{"1":"one","null":"none"}'),
    # a lone surrogate cannot be UTF-8: it travels escaped, for the receiver to refuse
    ({"s": "a\ud800b", "t": "é"}, b'{"s":"a\\ud800b","t":"\\u00e9"}'),
    # and what both write alike, orjson writes: compact, UTF-8
    ({"t": "é😀", "n": [1, 2.5, True]}, '{"t":"é😀","n":[1,2.5,true]}'.encode()),
])
def test_dumps_edge_cases(value: Any, sent: bytes) -> None:
    assert dumps(value) == sent


def test_dumps_nests_as_deep_as_json_does() -> None:
    deep: list[Any] = []
    for _ in range(400):  # past orjson's own limit of 254 levels
        deep = [deep]
    assert dumps(deep) == b"[" * 401 + b"]" * 401


def test_dumps_refuses_what_json_refuses() -> None:
    @dataclasses.dataclass
    class Point:
        x: int

    with pytest.raises(TypeError):
        dumps({"p": Point(1)})
    with pytest.raises(TypeError):
        dumps({"s": {1, 2}})


@pytest.mark.parametrize("data", [
    b"18446744073709551616", b'{"n":-9223372036854775809}', "[123456789012345678901]",
    b"NaN", b"[Infinity]", b'"\\ud800"', b'{"k":"\\udfff"}',
    "\"\ud800\"".encode("utf-8", "surrogatepass"), "\"\ud800\"", b"\xef\xbb\xbf{}",
    b"[" * 2000 + b"]" * 2000, b"{broken", b"",
])
def test_fast_loads_leaves_to_json_what_orjson_would_answer_otherwise(data: bytes | str) -> None:
    with pytest.raises(Unsure):
        fast_loads(data)


def test_fast_loads_takes_bytes_text_and_views() -> None:
    body = b'{"a":[1,2.5,"\xc3\xa9",null,true],"emoji":"\\ud83d\\ude00"}'
    expected = {"a": [1, 2.5, "é", None, True], "emoji": "😀"}
    assert fast_loads(body) == fast_loads(body.decode()) == fast_loads(memoryview(body)) == expected
    assert fast_loads(bytearray(body)) == expected
