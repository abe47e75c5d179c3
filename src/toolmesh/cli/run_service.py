"""Tool services run as processes (``toolmesh run joke``, ``toolmesh run MODULE:CLASS``):
their options, the built-ins, and importing a service class by name."""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from toolmesh.bus import DEFAULT_CONCURRENCY
from toolmesh.errors import ToolmeshError

if TYPE_CHECKING:
    import logging
    import traceback

    from toolmesh.bus import Bus
    from toolmesh.tools.dedupe import DedupeStore
    from toolmesh.tools.service import DynamicToolService

# DynamicToolService is imported where a class is checked against it, not here: every
# `toolmesh` command loads this module to build its parser, and the tool service brings the
# RPC layer and asyncio along.


def log() -> logging.Logger:
    """This module's logger. logging is imported at the first message, not with the module:
    every `toolmesh` command loads this module to build its parser."""
    import logging

    return logging.getLogger("toolmesh.run-service")


#: built-in services: name -> MODULE:CLASS (their definitions give their topic and id; the
#: joke services share theirs, so every joke process serves one subscription)
BUILTIN = {
    "joke": "toolmesh.tools.services.joke:JokeService",
    "joke-streaming": "toolmesh.tools.services.joke:StreamingJokeService",
}

#: what each built-in does, for ``toolmesh run``'s help
BUILTIN_HELP = {
    "joke": "the built-in joke tool service (topic joke)",
    "joke-streaming": "the joke tool service answering in pieces as it streams (topic joke)",
}


def add_service_options(parser: argparse.ArgumentParser) -> None:
    """The options of a tool service process (flags with environment defaults)."""
    env = os.environ.get
    parser.add_argument("--topic", default=env("TOOLMESH_SERVICE_TOPIC"),
                        help="short topic: queues non-persistent://tg/request/TOPIC and "
                             ".../response/TOPIC (env TOOLMESH_SERVICE_TOPIC; built-ins have one)")
    parser.add_argument("--request-queue", default=env("TOOLMESH_SERVICE_REQUEST_QUEUE"),
                        help="explicit request queue instead of --topic")
    parser.add_argument("--response-queue", default=env("TOOLMESH_SERVICE_RESPONSE_QUEUE"),
                        help="explicit response queue instead of --topic")
    parser.add_argument("--id", default=env("TOOLMESH_SERVICE_ID"),
                        help="service id; replicas with the same id share the work "
                             "(env TOOLMESH_SERVICE_ID; default: the class's)")
    parser.add_argument("--concurrency", type=int,
                        default=int(env("TOOLMESH_SERVICE_CONCURRENCY", str(DEFAULT_CONCURRENCY))),
                        help="requests one process handles at once "
                             "(env TOOLMESH_SERVICE_CONCURRENCY; default: %(default)s)")


def is_tool_service(spec: str) -> bool:
    """Whether ``spec`` names a tool service (a built-in or MODULE:CLASS)."""
    return spec in BUILTIN or ":" in spec


_MISSING = object()


def load_service_class(spec: str) -> type[DynamicToolService]:
    """Import ``MODULE:CLASS`` (or a built-in name) and check it is a tool service; every
    failure is a one-line :class:`ToolmeshError` saying what is wrong.

    The current folder comes first on the import path, as with ``python -m``: a service in
    ``./wordtools.py`` runs as ``toolmesh run wordtools:WordCount``.
    """
    from toolmesh.tools.service import DynamicToolService

    path = BUILTIN.get(spec, spec)
    module_name, sep, class_name = path.partition(":")
    if not sep or not module_name or not class_name:
        raise ToolmeshError(f"service {spec!r} is neither MODULE:CLASS nor a built-in "
                            f"({', '.join(BUILTIN)})", type="usage-error")
    module = import_module(module_name)
    cls = getattr(module, class_name, _MISSING)
    if cls is _MISSING:
        found = service_classes(module)
        defines = (f"it defines: {', '.join(found)}" if found
                   else "it defines no DynamicToolService subclass")
        raise ToolmeshError(f"module {module_name!r} has no class {class_name!r} ({defines})",
                            type="usage-error")
    if not (isinstance(cls, type) and issubclass(cls, DynamicToolService)
            and cls is not DynamicToolService):
        raise ToolmeshError(f"{path!r} is {_what(cls)}, not a DynamicToolService subclass",
                            type="usage-error")
    return cls


def import_module(name: str) -> ModuleType:
    """The module ``name``, imported with the current folder first on the path."""
    here = os.getcwd()
    if sys.path[:1] != [here]:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            where = name.replace(".", "/")
            raise ToolmeshError(
                f"cannot import module {name!r}: no file {where}.py or package {where} in the "
                f"current folder ({here}) or on the Python path", type="usage-error") from None
        raise _import_failure(name, e) from None
    except Exception as e:  # whatever the module raised while it ran: a SyntaxError, ...
        raise _import_failure(name, e) from None


def _import_failure(name: str, error: Exception) -> ToolmeshError:
    """The module was found, and importing it failed: where, and why, in one line."""
    if isinstance(error, SyntaxError) and error.filename:
        place = f"{_shown(error.filename)} line {error.lineno}: "
        reason = f"{place}{type(error).__name__}: {_one_line(str(error.msg))}"
    else:
        frame = _failing_frame(error)
        place = f" ({_shown(frame.filename)} line {frame.lineno})" if frame else ""
        reason = f"{type(error).__name__}: {_one_line(str(error))}{place}"
    return ToolmeshError(f"importing {name!r} failed: {reason}", type="usage-error")


def _failing_frame(error: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the user's code in ``error``'s traceback (import machinery,
    this module and importlib left out)."""
    import traceback

    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith("<") and f.filename != __file__
              and not f.filename.startswith(os.path.dirname(importlib.__file__))]
    return frames[-1] if frames else None


def _shown(filename: str) -> str:
    """A file's path as the user knows it: relative to the current folder when inside it."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return filename if relative.startswith("..") else relative


def _one_line(text: str) -> str:
    return " ".join(text.split())


def service_classes(module: ModuleType) -> list[str]:
    """The names of the DynamicToolService subclasses ``module`` holds."""
    from toolmesh.tools.service import DynamicToolService

    return sorted(name for name, value in vars(module).items()
                  if isinstance(value, type) and issubclass(value, DynamicToolService)
                  and value is not DynamicToolService)


def _what(value: object) -> str:
    """What ``value`` is, in words: "a function", "a class based on Exception", ..."""
    from toolmesh.tools.service import DynamicToolService

    if value is DynamicToolService:
        return "the DynamicToolService base class itself"
    if isinstance(value, type):
        return f"a class based on {value.__mro__[1].__name__}" if len(value.__mro__) > 1 \
            else "a class"
    if isinstance(value, ModuleType):
        return "a module"
    if inspect.isroutine(value):
        return "a function"
    kind = type(value).__name__
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind} value"


def checked_service_class(spec: str, args: argparse.Namespace) -> type[DynamicToolService]:
    """The class ``spec`` names, once ``args`` are known to suit it: called before anything
    connects, so a bad name or option ends the command in one line with nothing logged."""
    cls = load_service_class(spec)
    explicit = (args.request_queue, args.response_queue)
    if None in explicit and explicit != (None, None):
        raise ToolmeshError("give both --request-queue and --response-queue, or neither",
                            type="usage-error")
    if args.topic is None and explicit == (None, None) and cls.definition is None:
        raise ToolmeshError(
            f"{spec} declares no definition, so it has no queues of its own: give --topic, "
            "or both --request-queue and --response-queue (or give the class a definition: "
            "docs/tool-services.md)", type="usage-error")
    if args.concurrency < 1:
        raise ToolmeshError(f"--concurrency must be at least 1, not {args.concurrency}",
                            type="usage-error")
    from toolmesh.registry.wire import MAX_TTL, MIN_TTL

    if not MIN_TTL <= args.announce_ttl <= MAX_TTL:
        raise ToolmeshError(f"--announce-ttl must be from {MIN_TTL:g} to {MAX_TTL:g} seconds, "
                            f"not {args.announce_ttl:g}", type="usage-error")
    if not args.workspace or not args.workspace.strip():
        raise ToolmeshError("--workspace must not be empty", type="usage-error")
    if not args.no_announcements and cls.definition is not None:
        _check_definition(spec, cls, args)
    return cls


def _check_definition(spec: str, cls: type[DynamicToolService],
                      args: argparse.Namespace) -> None:
    """Refuse, before connecting, a definition that could not be announced."""
    from toolmesh.tools.definition import DefinitionError

    assert cls.definition is not None
    try:
        cls.definition.items(id=args.id, topic=args.topic, request_queue=args.request_queue,
                             response_queue=args.response_queue)
    except DefinitionError as e:
        raise ToolmeshError(f"{spec}: its definition cannot be announced: {e.message}",
                            type="usage-error") from None


def build_tool_service(bus: Bus, spec: str, args: argparse.Namespace, *,
                       dedupe: DedupeStore | None = None) -> DynamicToolService:
    """The tool service ``spec`` names, on ``bus``, configured by ``args``; without
    ``--topic``/``--id`` a class's :attr:`~DynamicToolService.definition` gives them.
    ``dedupe``: where it keeps its completed calls (``None``: ``--dedupe off``), unless the
    class opted out (:attr:`~DynamicToolService.dedupe_calls`)."""
    cls = checked_service_class(spec, args)
    topic, service_id = args.topic, args.id
    once: dict[str, DedupeStore | bool] = {}
    if cls.dedupe_calls:
        once["dedupe"] = dedupe if dedupe is not None else False
    try:
        service = cls(bus, topic=topic, request_queue=args.request_queue,
                      response_queue=args.response_queue, id=service_id,
                      concurrency=args.concurrency, workspace=args.workspace,
                      announce=not args.no_announcements, announce_ttl=args.announce_ttl,
                      **once)
    except (TypeError, ValueError) as e:
        raise ToolmeshError(f"cannot construct {cls.__name__}: {e}", type="usage-error") from None
    log().info("%s (id %s): %s -> %s, %d at once", cls.__name__, service.id,
               service.request_queue.pulsar, service.response_queue.pulsar, args.concurrency)
    return service
