"""JSON text carried inside a message or a config value, decoded into something every later
step can handle.

The standard library's ``json.loads`` raises :class:`RecursionError` on text nested about a
thousand levels deep (how deep depends on the caller's stack), :class:`ValueError` on integers
of more than 4,300 digits, and accepts strings holding lone surrogates (``"\\ud800"``) that no
UTF-8 encoder takes — which then fail wherever the value is encoded again (the bus, an HTTP
header, a subprocess's environment). :func:`loads` turns all of these into one
:class:`JsonTextError` whose message says what was wrong and where, so each boundary can refuse
the value with its own error type instead of failing later with a traceback.

The gateway refuses the same things in request bodies (``toolmesh.gateway.json_body``); this
module is the same rule for JSON text inside string fields, with no dependency on the gateway.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from toolmesh import json_codec

#: nesting levels (objects and arrays) JSON text may use: far beyond any real tool argument or
#: config item, and well below the depth at which decoding would exhaust the stack
MAX_DEPTH = 100


class JsonTextError(ValueError):
    """JSON text that cannot be decoded, or that holds what toolmesh cannot carry.

    A :class:`ValueError`, so callers that already turn ``ValueError`` into their boundary's
    error keep doing so.
    """


class NotJson(JsonTextError):
    """The text is not JSON at all (as opposed to JSON toolmesh refuses): a caller that takes
    non-JSON text as a plain string catches only this."""


def loads(text: str | bytes, *, what: str, max_depth: int = MAX_DEPTH) -> Any:
    """``text`` decoded and checked with :func:`check`; ``what`` names it in the message
    (``"the value"``, ``"'arguments'"``)."""
    try:
        value = json_codec.fast_loads(text)
    except json_codec.Unsure:
        value = _decode_slowly(text, what=what, max_depth=max_depth)
    else:
        # orjson refuses lone surrogates, so what is left to check is the depth, and text
        # too short to hold max_depth + 1 pairs of brackets cannot be nested that deep
        if len(text) < 2 * (max_depth + 1):
            return value
    check(value, what=what, max_depth=max_depth)
    return value


def decode(text: str | bytes, *, what: str, max_depth: int = MAX_DEPTH) -> Any:
    """``text`` decoded, not yet checked: for callers that want the value even when
    :func:`check` refuses it (the gateway still answers a refused frame with its id)."""
    try:
        return json_codec.fast_loads(text)
    except json_codec.Unsure:
        return _decode_slowly(text, what=what, max_depth=max_depth)


def _decode_slowly(text: str | bytes, *, what: str, max_depth: int) -> Any:
    """``json.loads``, for what orjson cannot vouch for; its failures as :class:`JsonTextError`."""
    try:
        value = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NotJson(f"{what} is not valid JSON ({e})") from None
    except RecursionError:
        raise JsonTextError(f"{what} is nested more than {max_depth} levels deep") from None
    except ValueError:
        # the only other ValueError json.loads raises: Python's guard against slow parsing of
        # huge integers; its own message suggests a setting a client cannot change
        raise JsonTextError(f"{what} holds an integer of more than "
                            f"{sys.get_int_max_str_digits()} digits") from None
    return value


def valid_text(s: str) -> bool:
    """True unless ``s`` holds lone surrogates (which no UTF-8 encoder accepts)."""
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: where a value sits in a document: ``None`` for the top, else ``(parent, key or index)``
_Path = tuple[Any, "str | int"] | None


def check(value: Any, *, what: str, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`JsonTextError` for nesting beyond ``max_depth`` or a string (or object
    key) that is not valid Unicode; the message names where, e.g. ``["env"]["KEY"]``.

    Iterative, so no value can exhaust the stack; it visits each container once.
    """
    stack: list[tuple[Any, int, _Path]] = [(value, 0, None)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            if not valid_text(item):
                raise JsonTextError(f"{what} holds a string that is not valid Unicode (a "
                                    f"lone surrogate, like \\ud800){_at(path)}")
            continue
        if not isinstance(item, (dict, list)):
            continue
        if depth >= max_depth:
            raise JsonTextError(f"{what} is nested more than {max_depth} levels deep")
        if isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str) and not valid_text(k):
                    raise JsonTextError(f"{what} holds a key that is not valid Unicode (a "
                                        f"lone surrogate, like \\ud800){_at(path)}")
                stack.append((v, depth + 1, (path, k)))
        else:
            stack.extend((v, depth + 1, (path, i)) for i, v in enumerate(item))


def _at(path: _Path) -> str:
    """`` at ["auth-token"]`` for a path, nothing for the top level."""
    steps: list[str] = []
    while path is not None:
        path, step = path
        # keys are shown JSON-escaped, so a key with a lone surrogate cannot spoil the message
        steps.append(f"[{step}]" if isinstance(step, int) else f"[{json.dumps(step)}]")
    return f" at {''.join(reversed(steps))}" if steps else ""
