"""Hypothesis strategies for fuzzing the gateway (used by ``test_fuzz.py``).

JSON of every shape a client can send, including what Python's ``json`` module accepts but
nothing downstream can carry: strings with lone surrogates (``"\\ud800"`` escapes), nesting
up to ~1,000 levels, integers longer than Python's 4,300-digit conversion limit, NaN and
Infinity; request bodies that are not JSON at all (non-UTF-8 bytes, empty, truncated); and
request objects for each service with every field of a wrong type.

Deep nesting and over-long integers are :class:`Raw` fragments, spliced into the JSON text by
:func:`dumps`, so no Python object (and no recursion) is ever that deep on the test side.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

TOKEN = "fuzz-t0ken"

#: the tool service, tool and MCP item the module's server is given (see fuzz_harness.py)
JOKE_SERVICE = "joke-service"
FUZZ_MCP = "fuzz-mcp"
#: keys the config fuzzing may write or delete: never one the other tests rely on
CONFIG_KEY_PREFIX = "fuzz-cfg-"

CONFIG_OPERATIONS = ("get", "list", "getvalues", "config", "put", "delete")
#: validated types, types with consumers (prompt), and types nobody reads
CONFIG_TYPES = ("fuzz", "tool", "mcp", "tool-service", "prompt")


@dataclass(frozen=True)
class Raw:
    """JSON text inserted as it is (deep nesting, long integers, NaN...)."""

    text: str

    def __repr__(self) -> str:
        return f"Raw({compact(self.text)})"


def dumps(value: Any) -> str:
    """``value`` as JSON text (ASCII: lone surrogates become ``\\udXXX`` escapes), with every
    :class:`Raw` in it spliced in verbatim."""
    fragments: list[str] = []

    def swap(v: Any) -> Any:
        if isinstance(v, Raw):
            fragments.append(v.text)
            return f"\x00raw{len(fragments) - 1}\x00"
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    text = json.dumps(swap(value), ensure_ascii=True)
    for i, fragment in enumerate(fragments):
        text = text.replace(json.dumps(f"\x00raw{i}\x00"), fragment, 1)
    return text


_RUN = re.compile(r"(.{1,6}?)\1{9,}", re.S)


def compact(data: Any, limit: int = 700) -> str:
    """``repr(data)`` with long runs written once with a count (``«[×1000»``) and the
    middle of anything still too long cut out: readable reproducers."""
    text = _RUN.sub(lambda m: f"«{m.group(1)}×{len(m.group(0)) // len(m.group(1))}»",
                    repr(data))
    return text if len(text) <= limit else f"{text[:limit - 150]} …{len(text)} chars… " \
                                           f"{text[-120:]}"


class Body(bytes):
    """A request body, shown compactly in Hypothesis's reports."""

    def __repr__(self) -> str:
        return f"Body({compact(bytes(self))})"


def has_surrogate(s: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in s)


def weighted(*options: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, picked with the given weights (shrinking towards the first)."""
    total = sum(weight for weight, _ in options)

    @st.composite
    def pick(draw: st.DrawFn) -> Any:
        n = draw(st.integers(0, total - 1))
        for weight, strategy in options:
            if n < weight:
                return draw(strategy)
            n -= weight
        raise AssertionError("unreachable")

    return pick()


# -- leaves ------------------------------------------------------------------------------

lone_surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)

#: text with a lone surrogate somewhere in it
surrogate_strings = st.builds(lambda a, s, b: a + s + b, st.text(max_size=4), lone_surrogates,
                              st.text(max_size=4))

interesting_strings = st.sampled_from([
    "", " ", "\x00", "\x00\x01\x1f", "\x7f", "default", "*", "joke", "tell-joke", "null",
    "true", "0", "-1", "1e400", "NaN", "\u00e9", "\u202e\u2066", "\U0001d11e", "\ufeff", "\uffff",
    "\U0010ffff", "../../etc/passwd", "%2F", "a/b", "x://y", "request:tg:config", ":",
    "\\ud800", "{{ 7*7 }}", "{% for x in range(10) %}x{% endfor %}", "a" * 1000,
    "\u00e9" * 300,
])

strings = st.one_of(st.text(max_size=12), interesting_strings, surrogate_strings)


def digits(n: int) -> Raw:
    return Raw("1" + "0" * (n - 1))


#: numbers Python's json parses but cannot turn into an int (over 4,300 digits), and others
#: at the edges of what decoders agree on
raw_numbers = st.one_of(
    st.integers(4301, 6000).map(digits),
    st.integers(4301, 6000).map(lambda n: Raw("-" + digits(n).text)),
    st.sampled_from([Raw("1e400"), Raw("-1e400"), Raw("1e-400"), Raw("NaN"), Raw("Infinity"),
                     Raw("-Infinity"), Raw("-0"), Raw("0.0000000000000000000000000001"),
                     Raw("1." + "9" * 5000)]),
)

numbers = st.one_of(
    st.integers(), st.integers(-(2 ** 64), 2 ** 64), st.floats(),
    st.sampled_from([0, -1, 1, 2 ** 31, 2 ** 63, -(2 ** 63) - 1, 10 ** 30, 1e308, -1e308,
                     5e-324, 0.5]),
)

leaves = st.one_of(st.none(), st.booleans(), numbers, strings)


#: the gateway refuses bodies nested over 100 levels; Python's json gives up near 1,000
DEPTH_EDGES = (1, 2, 99, 100, 101, 500, 980, 990, 999, 1000, 1001, 1100, 2000, 5000)


@st.composite
def deep(draw: st.DrawFn, min_depth: int = 1, max_depth: int = 1000) -> Raw:
    """Nesting ``depth`` levels deep: arrays, objects or both, around a leaf."""
    edges = [d for d in DEPTH_EDGES if min_depth <= d <= max_depth]
    depth = draw(st.one_of(st.sampled_from(edges), st.integers(min_depth, max_depth)))
    shape = draw(st.sampled_from(["list", "dict", "mixed"]))
    leaf = dumps(draw(st.one_of(st.none(), st.integers(), st.text(max_size=3))))
    if shape == "list":
        return Raw("[" * depth + leaf + "]" * depth)
    if shape == "dict":
        return Raw('{"a": ' * depth + leaf + "}" * depth)
    opening = "".join('[' if i % 2 else '{"a": ' for i in range(depth))
    closing = "".join(']' if i % 2 else '}' for i in reversed(range(depth)))
    return Raw(opening + leaf + closing)


keys = st.one_of(st.text(max_size=8), interesting_strings, surrogate_strings)

#: any JSON value: shallow structures of odd leaves, very deep ones, over-long numbers
any_json = weighted(
    (4, leaves),
    (4, st.recursive(leaves, lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
        max_leaves=8)),
    (1, deep()),
    (1, raw_numbers),
)

non_strings = any_json.filter(lambda v: not isinstance(v, str))


@st.composite
def json_text(draw: st.DrawFn) -> str:
    """A string holding JSON text (TrustGraph sends ``arguments``/``config``/``parameters``
    and config values this way): of any value, very deep, with over-long numbers, with
    lone-surrogate escapes, or not JSON at all."""
    kind = draw(st.sampled_from(["deep"] * 3 + ["number", "surrogate"] * 2 + ["value",
                                                                              "object"] * 2
                                + ["broken"]))
    if kind == "value":
        return dumps(draw(any_json))
    if kind == "object":
        return dumps(draw(st.dictionaries(keys, any_json, max_size=3)))
    if kind == "deep":
        return draw(deep(min_depth=90, max_depth=5000)).text
    if kind == "number":
        return '{"a": ' + draw(raw_numbers).text + "}"
    if kind == "surrogate":
        return dumps({draw(st.sampled_from(["a", "topic", "style"])): draw(surrogate_strings)})
    return draw(st.sampled_from(["{", "[1,", '{"a": }', "nul", "'x'", '{"a": 1} x', "\x00"]))


#: one value of each JSON type (truthy ones too: ``x or default`` lets falsy ones through)
WRONG_TYPES = (1, -1, 1.5, True, False, None, "x", [], [1], {}, {"a": 1})
wrong_types = st.sampled_from(WRONG_TYPES)


def field(*good: Any) -> st.SearchStrategy[Any]:
    """A field's value: mostly one of the ``good`` ones, else a value of each type, anything
    at all, or JSON text."""
    if not good:
        return weighted((1, wrong_types), (1, any_json), (1, json_text()))
    return weighted((6, st.sampled_from(good)), (2, wrong_types), (1, any_json),
                    (1, json_text()))


@st.composite
def objects(draw: st.DrawFn, fields: dict[str, tuple[int, st.SearchStrategy[Any]]]
            ) -> dict[str, Any]:
    """An object with each of ``fields`` present with its chance (in tenths), plus now and
    then a field nobody asked for."""
    body: dict[str, Any] = {}
    for name, (chance, strategy) in fields.items():
        if draw(st.integers(0, 9)) < chance:
            body[name] = draw(strategy)
    if draw(st.integers(0, 9)) == 0:
        body[draw(keys)] = draw(any_json)
    return body


# -- request objects per service ---------------------------------------------------------

config_keys = weighted(
    (6, st.builds(lambda s: CONFIG_KEY_PREFIX + s, st.text(max_size=6))),
    (1, st.builds(lambda s: CONFIG_KEY_PREFIX + s, surrogate_strings)),
    (1, st.just(CONFIG_KEY_PREFIX + "\x00")),
    (2, non_strings),
)
config_types = weighted((7, st.sampled_from(CONFIG_TYPES)),
                        (2, strings.filter(lambda s: s not in CONFIG_TYPES)), (1, non_strings))

#: config values: JSON text of all kinds (objects shaped like the validated types' items now
#: and then), or values that are not strings at all
config_values = weighted(
    (4, json_text()),
    (2, deep(min_depth=900, max_depth=5000).map(lambda raw: raw.text)),
    (2, st.builds(lambda d: dumps(d), st.fixed_dictionaries({}, optional={
        "type": field("tool-service", "prompt"), "name": strings, "url": field("http://x/"),
        "id": strings, "prompt": field("p"), "request-queue": field("request:tg:fuzz"),
        "response-queue": field("response:tg:fuzz"), "service": strings,
        "auth-token": strings, "arguments": any_json})).filter(
        lambda text: '"request-queue": "request:tg:fuzz"' not in text)),
    (3, any_json),
)

#: a put whose items are well formed but whose values are any JSON text (or not text)
config_puts = st.builds(
    lambda items: {"operation": "put", "values": items},
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(CONFIG_TYPES),
                                    "key": st.builds(lambda s: CONFIG_KEY_PREFIX + s,
                                                     st.text(max_size=4)),
                                    "value": config_values}), min_size=1, max_size=2))

key_items = weighted((8, st.fixed_dictionaries({"type": config_types, "key": config_keys})),
                     (2, any_json))
value_items = weighted(
    (8, st.fixed_dictionaries({"type": config_types, "key": config_keys,
                               "value": config_values})),
    (2, any_json),
)
config_fields = {
    "keys": weighted((8, st.lists(key_items, min_size=1, max_size=3)), (2, any_json)),
    "values": weighted((8, st.lists(value_items, min_size=1, max_size=2)), (2, any_json)),
    "type": config_types,
    "workspace": field("default", "fuzz-ws"),
    "id": any_json,
}
#: the fields each operation uses
CONFIG_NEEDS = {"get": ("keys",), "delete": ("keys",), "list": ("type",),
                "getvalues": ("type",), "put": ("values",), "config": ()}


@st.composite
def config_requests(draw: st.DrawFn) -> dict[str, Any]:
    operation = draw(weighted((4, st.just("put")), (4, st.sampled_from(CONFIG_OPERATIONS)),
                              (1, any_json), (1, json_text())))
    needs = CONFIG_NEEDS.get(operation, ()) if isinstance(operation, str) else ()
    body = draw(objects({name: (9 if name in needs else 2, strategy)
                         for name, strategy in config_fields.items()}))
    return {"operation": operation, **body}


history_steps = weighted(
    (7, objects({"thought": (7, field("I think")), "action": (7, field("tell-joke", "")),
                 "arguments": (7, field({"topic": "food"}, {})),
                 "observation": (7, field("ok", ""))})),
    (3, any_json),
)

agent_requests = objects({
    "question": (9, field("tell me a joke about food", "hi", "")),
    "state": (3, field("s1")), "group": (3, field(["default"], "*", [])),
    "history": (6, weighted((6, st.lists(history_steps, max_size=3)), (2, wrong_types),
                            (2, any_json))),
    "user": (3, field("fuzz-user")), "streaming": (3, field(True, False)),
    "workspace": (2, field("default")),
})

mcp_requests = objects({
    "name": (9, field(FUZZ_MCP, "fuzz-no-such-mcp")),
    "parameters": (7, field({}, {"a": 1})),
    "operation": (4, field("invoke", "describe", "call")),
    "timeout": (3, field(0.5, 2)),
    "workspace": (2, field("default")),
})

tool_service_ids = weighted(
    (7, st.sampled_from([JOKE_SERVICE, "fuzz-no-such-service"])),
    (2, strings.filter(lambda s: not s.startswith("fuzz"))), (1, non_strings))

tool_service_requests = objects({
    "id": (9, tool_service_ids),
    "config": (6, field({}, {"style": "pun"})),
    "arguments": (7, field({"topic": "food"}, {})),
    "user": (3, field("fuzz-user")),
    "timeout": (3, field(1, 5, 0.001)),
    "streaming": (4, field(True, False)),
    "workspace": (2, field("default", "fuzz-ws")),
})


# -- raw bodies --------------------------------------------------------------------------

@st.composite
def bodies(draw: st.DrawFn, objects: st.SearchStrategy[dict[str, Any]]) -> bytes:
    """A request body: mostly a request object of the route's shape, sometimes any JSON at
    all, random bytes, nothing, or a request object with some of its bytes replaced."""
    kind = draw(st.sampled_from(["object"] * 12 + ["json", "bytes", "empty"] + ["mutated"] * 2))
    if kind == "object":
        return Body(dumps(draw(objects)).encode())
    if kind == "json":
        return Body(dumps(draw(any_json)).encode())
    if kind == "bytes":
        return Body(draw(st.binary(max_size=40)))
    if kind == "empty":
        return Body(b"")
    raw = dumps(draw(objects)).encode()
    at = draw(st.integers(0, len(raw)))
    cut = draw(st.integers(0, 4))
    return Body(raw[:at] + draw(st.binary(min_size=1, max_size=4)) + raw[at + cut:])


# -- headers -----------------------------------------------------------------------------

#: bytes a header value may hold (RFC 9110: visible ASCII, space, tab and obs-text); control
#: characters are refused by aiohttp's HTTP parser before the gateway sees the request
header_bytes = st.binary(max_size=30).map(
    lambda b: bytes(c for c in b if c in (9, 32) or 33 <= c <= 126 or c >= 128))

authorizations = st.one_of(
    header_bytes,
    st.builds(lambda b: b"Bearer " + b, header_bytes),
    st.builds(lambda a, b: b"Bearer " + a + TOKEN.encode() + b, header_bytes, header_bytes),
    st.sampled_from([
        b"Bearer " + TOKEN.encode(), b"bearer " + TOKEN.encode(), b"BEARER   " + TOKEN.encode(),
        b"Bearer " + TOKEN.upper().encode(), b"Bearer " + TOKEN.encode() + b"\xff",
        b"Bearer \xff" + TOKEN.encode(), b"\xff\xfe", "Bearer \u00e9".encode("latin-1"),
        "Bearer \u00e9".encode(), b"Bearer \xed\xa0\x80", b"Bearer", b"Bearer ", b"",
        b"Basic " + TOKEN.encode(), TOKEN.encode(),
    ]),
)

content_types = st.one_of(
    st.builds(lambda b: b"application/json;" + b, header_bytes),
    st.sampled_from([
        b"application/json", b"application/json; charset=utf-8",
        b"application/json; charset=klingon", b"application/json; charset=\xff",
        b'application/json; a="b', b"application/json;;;", b"APPLICATION/JSON",
        b"application/json; charset*=utf-8''%ff", b"application/json ; q=0",
        b"application/json; boundary=" + b"x" * 2000,
    ]),
)

origins = st.one_of(header_bytes, st.sampled_from([
    b"null", b"http://evil.example", b"http://127.0.0.1", b"http://[::1", b"http://\xff",
    b"http://localhost:99999", b"file://", b"http://user@localhost",
]))


# -- WebSocket frames --------------------------------------------------------------------

@dataclass(frozen=True)
class Frame:
    """One frame to send: text (JSON or not) or binary."""

    data: str | bytes

    def __repr__(self) -> str:
        return f"Frame({compact(self.data)})"


REQUESTS_BY_SERVICE: dict[str, st.SearchStrategy[Any]] = {
    "config": config_requests(),
    "agent": agent_requests,
    "mcp-tool": mcp_requests,
    "tool-service": tool_service_requests,
}

ids = st.one_of(st.text(max_size=8), st.integers(), st.integers(-(2 ** 70), 2 ** 70), any_json)
#: flows for services that exist only in flow "default" (any other flow is tested apart)
default_flows = st.one_of(st.none(), st.just("default"), st.just(""), non_strings)
any_flows = st.one_of(default_flows, strings)


@st.composite
def request_frames(draw: st.DrawFn) -> Frame:
    service = draw(weighted((8, st.sampled_from(sorted(REQUESTS_BY_SERVICE) + ["nonsense"])),
                            (2, any_json)))
    frame: dict[str, Any] = {}
    if draw(st.integers(0, 9)) > 0:
        frame["id"] = draw(ids)
    if draw(st.integers(0, 9)) > 0:
        frame["service"] = service
    request = REQUESTS_BY_SERVICE.get(service) if isinstance(service, str) else None
    if draw(st.integers(0, 9)) > 0:
        frame["request"] = draw(request if request is not None else any_json)
    flows = default_flows if service in ("agent", "mcp-tool") else any_flows
    if draw(st.booleans()):
        frame["flow"] = draw(flows)
    if draw(st.booleans()):
        frame["workspace"] = draw(field("default", "fuzz-ws"))
    if draw(st.integers(0, 4)) == 0:
        frame["type"] = draw(any_json.filter(lambda t: t != "auth"))
    return Frame(dumps(frame))


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    kind = draw(st.sampled_from(["request"] * 7 + ["json", "text", "binary", "deep", "number"]))
    if kind == "request":
        return draw(request_frames())
    if kind == "json":
        return Frame(dumps(draw(any_json.filter(
            lambda v: not (isinstance(v, dict) and v.get("type") == "auth")))))
    if kind == "text":
        return Frame(draw(st.one_of(st.text(max_size=20), st.sampled_from(
            ["", "nope", "{", '{"id": 1', "[" * 100000, "\x00"]))))
    if kind == "binary":
        return Frame(draw(st.binary(max_size=20)))
    if kind == "deep":
        # a request frame whose request is nested too deep (but parses: < ~1,000 levels)
        nested = draw(deep(min_depth=95, max_depth=900))
        return Frame('{"id": "deep-' + str(len(nested.text)) + '", "service": "config", '
                     '"request": {"operation": "config", "x": ' + nested.text + "}}")
    number = draw(raw_numbers)
    return Frame('{"id": "number", "service": "config", "request": {"operation": "list", '
                 '"type": "fuzz", "n": ' + number.text + "}}")


auth_tokens = st.one_of(
    any_json,
    st.sampled_from([TOKEN + " ", " " + TOKEN, TOKEN.upper(), TOKEN + "\x00", "Bearer " + TOKEN,
                     TOKEN[:-1], TOKEN + "\ud800", "\ud800", ""]),
)
