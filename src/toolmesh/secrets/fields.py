"""Which parts of a config item are secret, how they read masked, and how a put keeps them.

Secret parts ("slots") of an item:

* ``mcp`` items: ``auth-token``, and every value of ``env`` (where API keys of stdio servers
  live);
* ``tool`` items: a config-param whose name says it holds a secret (``api-key``, ``token``,
  ``password``, ``client-secret``, ... — see :func:`toolmesh.urls.is_secret_name`);
* any item of any type, at any depth: a field that names a credential (``authorization``,
  ``proxy-authorization``, ``cookie``, ``set-cookie``, ``passphrase``, ``password``,
  ``x-api-key``, ``private-key``, ``client-secret``... — see :data:`CREDENTIAL_FIELDS`), or the
  ``value`` of a ``{"name": <such a name>, "value": ...}`` pair (a header list);
* any item of any type: the password and the secret query parameters of every URL in it.

Reading through the API shows each slot as ``***`` (a URL keeps everything but its secrets).
A put that sends a slot back masked keeps the stored value, so read-modify-write round-trips
without the secret ever leaving the system — but only while the secret still goes where it
went: a stored ``auth-token`` is not kept for a new server, nor ``env`` for a new command.
Otherwise the put is refused with a message that asks for the secret itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from toolmesh.config.errors import ConfigError
from toolmesh.schema.json_text import loads
from toolmesh.urls import MASK, URL_IN_TEXT, is_secret_name, mask_urls_in

__all__ = ["MASK", "Slot", "has_masked_url", "keep_secrets", "mask_value", "secret_slots",
           "walk_strings"]

Path = tuple[str | int, ...]

#: the fields of a ``tool`` item that are never config-params (so never secret by name)
TOOL_FIELDS = frozenset({"type", "name", "description", "service", "arguments", "group",
                         "state", "applicable-states", "mcp-tool", "template", "collection",
                         "schema-name", "index-name", "limit"})


#: field names that hold a credential in an item of any type, at any depth (compared
#: lower-cased, ``-`` read as ``_``). Narrower than :func:`toolmesh.urls.is_secret_name`
#: (no bare ``key`` or ``token``): these are never anything else
CREDENTIAL_FIELDS = frozenset({
    "authorization", "proxy_authorization", "cookie", "cookies", "set_cookie", "passphrase",
    "password", "passwd", "client_secret", "private_key", "x_api_key", "api_key", "apikey",
    "access_token", "refresh_token", "auth_token", "id_token", "session_token", "bearer",
    "x_auth_token", "credentials",
})
CREDENTIAL_SUFFIXES = ("_passphrase", "_password", "_secret", "_api_key", "_apikey",
                       "_authorization")


def is_credential_field(name: str) -> bool:
    """Whether a field called ``name`` holds a credential, in any item."""
    n = name.strip().lower().replace("-", "_")
    return n in CREDENTIAL_FIELDS or n.endswith(CREDENTIAL_SUFFIXES)


def _mcp_destination(item: dict[str, Any]) -> Any:
    """Where an ``mcp`` item's token goes: the server's origin (scheme, host, port)."""
    transport = item.get("transport") or "streamable-http"
    url = item.get("url")
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        origin = (parts.scheme.lower(), parts.hostname, parts.port) if parts else None
    except ValueError:
        origin = url
    return (transport, origin)


def _stdio_program(item: dict[str, Any]) -> Any:
    """Who receives an ``mcp`` item's env: the program and its arguments."""
    return (item.get("command"), item.get("args") or [])


def _tool_destination(item: dict[str, Any]) -> Any:
    """Who receives a tool's secret config-params: the tool service it calls."""
    return (item.get("type"), item.get("service"))


def _item_destination(item: dict[str, Any]) -> Any:
    """Where a credential field of an item of another type goes, as far as can be told: the
    origins of the URLs in it (a credential is not kept for an item that now points
    elsewhere)."""
    origins = set()
    for _, text in walk_strings(item):
        for match in URL_IN_TEXT.finditer(text):
            try:
                parts = urlsplit(match.group(0))
                origins.add((parts.scheme.lower(), parts.hostname, parts.port))
            except ValueError:
                origins.add((match.group(0), None, None))
    return sorted(origins, key=repr)


def _credential_slots(item: Any, destination: Callable[[dict[str, Any]], Any],
                      path: Path = ()) -> Iterator[Slot]:
    """Every credential field inside ``item`` (see :data:`CREDENTIAL_FIELDS`)."""
    if isinstance(item, dict):
        name = item.get("name")
        if isinstance(name, str) and is_credential_field(name) \
                and isinstance(item.get("value"), str) and item["value"]:
            yield Slot((*path, "value"), destination, f"'{_dotted((*path, name))}'")
        for k, v in item.items():
            if isinstance(v, str):
                if v and is_credential_field(k):
                    yield Slot((*path, k), destination, f"'{_dotted((*path, k))}'")
            else:
                yield from _credential_slots(v, destination, (*path, k))
    elif isinstance(item, list):
        for i, v in enumerate(item):
            yield from _credential_slots(v, destination, (*path, i))


def _dotted(path: Path) -> str:
    return ".".join(str(p) for p in path)


@dataclass(frozen=True, slots=True)
class Slot:
    """One secret value inside an item: where it is, and what it is bound to."""

    path: Path
    #: what must stay the same for a masked value to be replaced by the stored one
    destination: Callable[[dict[str, Any]], Any]
    #: the name shown in errors, e.g. ``'auth-token'`` or ``'env.API_KEY'``
    label: str


def secret_slots(type: str, item: Any) -> list[Slot]:
    """The whole-value secret slots of ``item`` (a parsed ``type`` value) that hold a value.

    URLs are not slots: every string is checked for them (see :func:`walk_strings`).
    """
    if not isinstance(item, dict):
        return []
    slots: list[Slot] = []
    if type == "mcp":
        if item.get("auth-token") not in (None, ""):
            slots.append(Slot(("auth-token",), _mcp_destination, "'auth-token'"))
        env = item.get("env")
        if isinstance(env, dict):
            slots += [Slot(("env", k), _stdio_program, f"'env.{k}'")
                      for k, v in env.items() if v not in (None, "")]
    elif type == "tool":
        slots += [Slot((k,), _tool_destination, repr(k)) for k, v in item.items()
                  if k not in TOOL_FIELDS and is_secret_name(k) and v not in (None, "")
                  and not isinstance(v, (dict, list))]
    destination = {"mcp": _mcp_destination, "tool": _tool_destination}.get(type,
                                                                           _item_destination)
    taken = {slot.path for slot in slots}
    slots += [slot for slot in _credential_slots(item, destination) if slot.path not in taken]
    return slots


def walk_strings(value: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Every string inside a JSON value, with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from walk_strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk_strings(v, (*path, i))


def get_path(value: Any, path: Path) -> Any:
    """The value at ``path``, or ``None`` when there is none."""
    for step in path:
        if isinstance(value, dict) and isinstance(step, str):
            value = value.get(step)
        elif isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value):
            value = value[step]
        else:
            return None
    return value


def set_path(value: Any, path: Path, new: Any) -> Any:
    """``value`` with the element at ``path`` replaced (in place below the root)."""
    if not path:
        return new
    parent = get_path(value, path[:-1])
    parent[path[-1]] = new  # type: ignore[index]
    return value


def has_masked_url(text: str) -> bool:
    """Whether ``text`` holds a URL whose password or a secret parameter reads ``***``."""
    if MASK not in text or "://" not in text:
        return False
    for match in URL_IN_TEXT.finditer(text):
        try:
            parts = urlsplit(match.group(0))
            if parts.password == MASK:
                return True
        except ValueError:
            continue
        for piece in parts.query.split("&"):
            name, _, v = piece.partition("=")
            if v == MASK and is_secret_name(name):
                return True
    return False


# -- parsing ---------------------------------------------------------------------------------

_RAW = object()  # marks a value that is not JSON: it is handled as one string


def _parse(text: str) -> Any:
    try:
        # JSON Python cannot decode safely (too deep: RecursionError, here or in walk_strings)
        # is handled as one string too; its URLs are still masked in the text
        return loads(text, what="the value")
    except (TypeError, ValueError):
        return _RAW


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- reading ---------------------------------------------------------------------------------

def _might_hold_secrets(type: str, text: str) -> bool:
    # the cheap test first: most values hold no URL and are not of a type with secret fields
    # (a credential field of another type has a name with one of _CREDENTIAL_WORDS in it)
    if type in ("mcp", "tool") or "://" in text:
        return True
    lowered = text.lower()
    return any(word in lowered for word in _CREDENTIAL_WORDS)


#: a word in the name of every field of :data:`CREDENTIAL_FIELDS` and suffix
_CREDENTIAL_WORDS = ("auth", "cookie", "pass", "secret", "key", "token", "credential", "bearer")


def mask_value(type: str, text: str) -> str:
    """``text`` (the value of an item of ``type``) as the API shows it: secrets ``***``."""
    if not isinstance(text, str) or not _might_hold_secrets(type, text):
        return text
    value = _parse(text)
    if value is _RAW:
        return mask_urls_in(text)
    changed = False
    for slot in secret_slots(type, value):
        set_path(value, slot.path, MASK)
        changed = True
    for path, s in list(walk_strings(value)):
        masked = mask_urls_in(s)
        if masked != s:
            value = set_path(value, path, masked)
            changed = True
    return _dump(value) if changed else text


# -- writing ---------------------------------------------------------------------------------

def _refuse(type: str, key: str, what: str, problem: str) -> ConfigError:
    return ConfigError(f"invalid {type}/{key}: {what} is '{MASK}' (a masked secret), but "
                       f"{problem}; give the secret itself")


def needs_stored(text: str) -> bool:
    """Whether a put of ``text`` may refer to stored secrets (only then is the stored value
    read)."""
    return isinstance(text, str) and MASK in text


def keep_secrets(type: str, key: str, text: str, stored: str | None) -> str:
    """The value to store for a put of ``text``: every masked secret in it replaced by the
    stored one, or :class:`ConfigError` when a masked secret has nothing (or nothing it may
    keep) to stand for."""
    if not needs_stored(text):
        return text
    value = _parse(text)
    old = _parse(stored) if stored is not None else None
    if value is _RAW:
        if not has_masked_url(text):
            return text
        if stored is not None and old is _RAW and mask_urls_in(stored) == text:
            return stored
        raise _refuse(type, key, "a URL in the value", "it is not the stored URL as read")
    changed = False
    # URLs first: an mcp token is kept only for the server it was given for, and the stored
    # URL (with its password) must be back in place to compare the two
    for path, s in list(walk_strings(value)):
        if not has_masked_url(s):
            continue
        before = get_path(old, path) if old not in (None, _RAW) else None
        if isinstance(before, str) and mask_urls_in(before) == s:
            value = set_path(value, path, before)
            changed = True
        else:
            where = ".".join(str(p) for p in path) or "the value"
            raise _refuse(type, key, f"a URL in {where!r}",
                          "it is not the stored URL as read (a stored password or key is "
                          "only kept for the URL it was given with)")
    for slot in secret_slots(type, value):
        if get_path(value, slot.path) != MASK:
            continue
        if not isinstance(old, dict) or get_path(old, slot.path) in (None, ""):
            raise _refuse(type, key, slot.label, "there is no stored value to keep")
        if slot.destination(value) != slot.destination(old):
            raise _refuse(type, key, slot.label,
                          "the item now sends it somewhere else (a stored secret is only kept "
                          "while the server, command or service it goes to stays the same)")
        set_path(value, slot.path, get_path(old, slot.path))
        changed = True
    return _dump(value) if changed else text
