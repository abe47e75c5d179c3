"""The options of running each call once (docs/dialogs.md): where a tool service keeps the
calls it completed, how much it keeps, and how often a service takes one request."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from toolmesh.cli.options import MiB, Bound, add_bounds, bound_values
from toolmesh.errors import ToolmeshError

if TYPE_CHECKING:
    from toolmesh.tools.dedupe import DedupeStore

#: one per field of :class:`toolmesh.tools.dedupe.Limits` (the flag's name without
#: ``dedupe-``)
DEDUPE_BOUNDS = (
    Bound("--dedupe-entries", "TOOLMESH_DEDUPE_ENTRIES", int, 10_000,
          "completed calls a tool service keeps to answer their repeats with (the least "
          "recently used go first)"),
    Bound("--dedupe-ttl", "TOOLMESH_DEDUPE_TTL", float, 3600.0,
          "seconds a completed call's answer is kept for its repeats"),
    Bound("--dedupe-max-result", "TOOLMESH_DEDUPE_MAX_RESULT", int, 256 * 1024,
          "bytes of one call's answer kept; a bigger one is not (a repeat is told the call "
          "ran, and it does not run again)"),
    Bound("--dedupe-max-bytes", "TOOLMESH_DEDUPE_MAX_BYTES", int, 64 * MiB,
          "bytes of answers kept in all"),
)

MAX_DELIVERIES = Bound(
    "--max-deliveries", "TOOLMESH_MAX_DELIVERIES", int, 5,
    "times a service takes one request; a request the broker delivers more often (its "
    "handling cut short each time: a lost connection, a killed process) is answered with a "
    "too-many-deliveries error; 0: no limit")

DEDUPE_ENV = "TOOLMESH_DEDUPE"


def default_dedupe() -> str:
    """``$TOOLMESH_DEDUPE``; else the config store's database when it is PostgreSQL (what
    replicas share); else ``memory``."""
    named = os.environ.get(DEDUPE_ENV)
    if named:
        return named
    store = os.environ.get("TOOLMESH_CONFIG_STORE", "")
    return store if store.lower().startswith(("postgresql://", "postgres://")) else "memory"


def add_dedupe(parser: argparse.ArgumentParser) -> None:
    """Where tool services keep their completed calls, and how much."""
    parser.add_argument("--dedupe", default=default_dedupe(), metavar="STORE",
                        help="where a tool service keeps the calls it completed, so that a "
                             "repeat of one (the same idempotency key) gets its answer "
                             "instead of running again: memory, off, or postgresql://... "
                             "shared by replicas (env TOOLMESH_DEDUPE; default: "
                             "$TOOLMESH_CONFIG_STORE when it is PostgreSQL, else memory)")
    add_bounds(parser, DEDUPE_BOUNDS)


async def dedupe_store(args: argparse.Namespace, stores: list[Any]) -> DedupeStore | None:
    """The process's dedupe store (opened once, shared by its tool services and closed with
    ``stores``); ``None``: ``--dedupe off``. Limits that make no sense are a usage error; a
    store that cannot be opened, a :class:`~toolmesh.tools.dedupe.DedupeError`."""
    if hasattr(args, "dedupe_store"):
        store: DedupeStore | None = args.dedupe_store
        return store
    from toolmesh.tools.dedupe import Limits, open_dedupe

    values = {k.removeprefix("dedupe_"): v for k, v in bound_values(args, DEDUPE_BOUNDS).items()}
    try:
        limits = Limits(**values)  # type: ignore[arg-type]
        store = await open_dedupe(args.dedupe, limits=limits)
    except ValueError as e:  # the limits; an unknown store or database: DedupeError
        raise ToolmeshError(f"--dedupe-*: {e}", type="usage-error") from None
    if store is not None:
        stores.append(store)
    args.dedupe_store = store
    return store
