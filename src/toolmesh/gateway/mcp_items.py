"""The gateway's check of ``mcp`` items put through it: where they may point.

A config put that carries ``mcp`` items passes :func:`admit_mcp_items` after the caller's
capabilities are checked (:meth:`~toolmesh.gateway.access.AccessPolicy.admit`):

* an item put by a caller without the ``admin`` capability gets ``"reach": "public"``,
  whatever the client sent: the mcp-tool service then connects it to public addresses and the
  operator's ``--mcp-allow`` list only (:mod:`toolmesh.mcp.addresses`), however its name
  resolves later;
* the item's URL host is brought to one spelling (:mod:`toolmesh.mcp.host_names`: a trailing
  dot, IDNA, percent-encoding, IPv4 in any spelling), resolved now, and refused if the policy
  would refuse it: at once, with one message whatever the reason (private, loopback,
  link-local, denied, or no host at all), which names the host as the item wrote it, never
  what it resolves to.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from toolmesh.mcp.addresses import (
    ALLOW_FLAG,
    REACH_FIELD,
    AddressPolicy,
    AddressRefused,
    Reach,
    host_port,
    reach_of,
    shown,
)
from toolmesh.schema.json_text import loads

log = logging.getLogger("toolmesh.gateway.access")


async def admit_mcp_items(request: dict[str, Any], *, admin: bool,
                          policy: AddressPolicy) -> dict[str, Any]:
    """``request`` (a config put) with its ``mcp`` items' reach set for a caller that is
    ``admin`` or not; :class:`AddressRefused` if an item's URL may not be used."""
    values = request.get("values")
    if request.get("operation") != "put" or not isinstance(values, list):
        return request
    changed = False
    entries: list[Any] = []
    for entry in values:
        item = _mcp_value(entry)
        if item is None:
            entries.append(entry)
            continue
        if not admin:
            item[REACH_FIELD] = "public"
            entry = {**entry, "value": json.dumps(item, ensure_ascii=False)}
            changed = True
        url = item.get("url")
        if isinstance(url, str) and item.get("transport") != "stdio":
            await _check(f"mcp/{entry.get('key')}", url, reach=reach_of(item), policy=policy)
        entries.append(entry)
    return {**request, "values": entries} if changed else request


def _mcp_value(entry: Any) -> dict[str, Any] | None:
    """The parsed value of a put's entry if it is an ``mcp`` item holding a JSON object."""
    if not (isinstance(entry, dict) and entry.get("type") == "mcp"
            and isinstance(entry.get("value"), str)):
        return None
    try:
        value = loads(entry["value"], what="the value")
    except (TypeError, ValueError):
        return None  # the config service refuses it
    return value if isinstance(value, dict) else None


async def _check(what: str, url: str, *, reach: Reach, policy: AddressPolicy) -> None:
    refused = await policy.check_url(url, reach=reach)
    if refused is None:
        return
    try:
        where = shown(*host_port(url))
    except ValueError:
        where = "its url"
    log.info("config put of %s refused: %s", what, refused)
    raise AddressRefused(
        f"{what} may not point at {where}: it is a private, loopback or link-local address "
        "however spelled (or resolves to one), one the operator denies, or no host at all; "
        f"only an admin's item may use private addresses, and the operator may open one to "
        f"every item with {ALLOW_FLAG}")
