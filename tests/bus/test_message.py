"""A message body decodes to what ``json.loads`` gives, or to :class:`MalformedMessage`
saying why not — whichever decoder did the work; and what :func:`encode` sends decodes back."""

from __future__ import annotations

import math
import sys

import pytest

from toolmesh import MalformedMessage, Message
from toolmesh.bus.base import encode


@pytest.mark.parametrize(("body", "value"), [
    (b'{"a":1,"b":[true,null,"\\u00e9"]}', {"a": 1, "b": [True, None, "é"]}),
    # integers beyond 64 bits stay integers (orjson alone would make them floats)
    (b"[18446744073709551616,-9223372036854775809]", [2**64, -(2**63) - 1]),
    # a surrogate pair, escaped as TrustGraph's Python peers send non-ASCII text
    (b'{"t":"\\ud83d\\ude00"}', {"t": "😀"}),
    # what json.loads takes and orjson does not: a byte-order mark, UTF-16
    (b"\xef\xbb\xbf[1]", [1]),
    ('{"k": "v"}'.encode("utf-16"), {"k": "v"}),
])
def test_bodies_decode_as_json_loads_decodes_them(body: bytes, value: object) -> None:
    assert Message(body).json() == value


def test_nan_and_infinity_decode_as_json_loads_decodes_them() -> None:
    value = Message(b"[NaN,Infinity,-Infinity]").json()
    assert math.isnan(value[0]) and value[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize(("body", "complaint"), [
    (b"\xff\xfe not json {", "not JSON"),
    (b"", "not JSON"),
    (b'{"s": "\\ud800"}', "lone surrogate"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
    (b"[" + b"1" * (sys.get_int_max_str_digits() + 1) + b"]",
     f"an integer of more than {sys.get_int_max_str_digits()} digits"),
])
def test_what_cannot_be_carried_is_malformed(body: bytes, complaint: str) -> None:
    with pytest.raises(MalformedMessage, match=complaint):
        Message(body).json()


@pytest.mark.parametrize("value", [
    {"error": None, "response": "é😀", "end_of_stream": True},
    {"n": [2**70, -(2**70), 1.5, -0.0]},
    {1: "non-str keys become strings", "deep": [[[[]]]]},
])
def test_what_encode_sends_decodes_back(value: object) -> None:
    expected = {str(k) if not isinstance(k, str) else k: v for k, v in value.items()}  # type: ignore[attr-defined]
    assert Message(encode(value)).json() == expected


def test_a_lone_surrogate_is_sent_escaped_and_refused_at_the_receiver() -> None:
    body = encode({"s": "\ud800"})
    assert body == b'{"s":"\\ud800"}'
    with pytest.raises(MalformedMessage, match="lone surrogate"):
        Message(body).json()
