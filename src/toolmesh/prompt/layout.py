"""Which ``prompt`` config items give a workspace its templates: TrustGraph's layout.

TrustGraph's ``tg-set-prompt`` writes, in config type ``prompt``:

``system``
    JSON text of a string: the system prompt sent with every template. It is a template too,
    rendered with the request's variables.
``template.<id>``
    JSON ``{"prompt": "...", "response-type": "text" | "json", "schema": ...}``: template
    ``<id>``. toolmesh also reads a ``"system"`` field there: that template's own system prompt,
    which wins over the ``system`` item.
``template-index``
    JSON list of the ids: kept by TrustGraph's older clients. toolmesh serves every
    ``template.<id>`` whether it is listed or not (as trustgraph-cli 2.11 lists them), so the
    index is not needed, and never a template.

toolmesh's own earlier items ``<id>`` (same value) keep working as an alias of
``template.<id>``; when both exist, ``template.<id>`` is used and the alias is logged as
ignored. Ids not configured keep the shipped template (:data:`DEFAULT_TEMPLATES`), and without
a ``system`` item the system prompt is :data:`DEFAULT_SYSTEM` (none).

:func:`shipped_items` is the same defaults written as items, for a config service to answer
reads with (so that ``tg-show-prompts`` works on a fresh workspace).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from toolmesh.prompt.defaults import DEFAULT_SYSTEM, DEFAULT_TEMPLATES
from toolmesh.prompt.templates import (
    CONFIG_TYPE,
    INDEX_KEY,
    SYSTEM_KEY,
    TEMPLATE_PREFIX,
    PromptError,
    PromptTemplate,
    compile_check,
    system_from_config,
)

log = logging.getLogger("toolmesh.prompt")


@dataclass(frozen=True, kw_only=True)
class Prompts:
    """One workspace's prompts at one config version."""

    #: the config version they come from (-1: the shipped defaults, no config read)
    version: int = -1
    #: the workspace's system prompt (template source; "" for none)
    system: str = DEFAULT_SYSTEM
    #: id -> the template as configured (or shipped), before the system prompt is applied
    configured: Mapping[str, PromptTemplate] = field(default_factory=lambda: DEFAULT_TEMPLATES)
    #: id -> the template served: ``configured`` with ``system`` where it has none of its own
    templates: Mapping[str, PromptTemplate] = field(default_factory=lambda: DEFAULT_TEMPLATES)


#: what a workspace is served before its config is read
SHIPPED = Prompts()


def template_key(key: str) -> str | None:
    """The template id config key ``prompt/<key>`` gives, or ``None`` for the keys that are
    not templates (``system``, ``template-index``, ``template.`` with no id)."""
    if key in (SYSTEM_KEY, INDEX_KEY):
        return None
    if key.startswith(TEMPLATE_PREFIX):
        return key.removeprefix(TEMPLATE_PREFIX) or None
    return key


def load(items: Mapping[str, str], *, version: int, workspace: str,
         previous: Prompts = SHIPPED,
         check: Callable[[str, str, str], None] = compile_check) -> Prompts:
    """The prompts ``items`` (a workspace's ``prompt`` items) describe.

    A value that does not parse is logged and changes nothing: its template (or the system
    prompt) stays as it was in ``previous``, or as shipped; every other item still applies.
    ``check(owner, part, source)`` compiles each template text, raising :class:`PromptError`
    if it does not: in this process by default; the prompt service passes the outcome of
    compiling them in its render workers, since compiling a hostile template can take seconds.
    """
    system = DEFAULT_SYSTEM
    if SYSTEM_KEY in items:
        try:
            system = system_from_config(items[SYSTEM_KEY], check=check)
        except PromptError as e:
            system = previous.system
            _not_applied(SYSTEM_KEY, version, workspace, "keeping the system prompt it had",
                         e.message)

    sources: dict[str, str] = {}  # template id -> the key it is read from
    for key in sorted(items):
        id = template_key(key)
        if id is None:
            if key.startswith(TEMPLATE_PREFIX):
                _not_applied(key, version, workspace, "no template", "the key names no id")
            continue
        if key == id and f"{TEMPLATE_PREFIX}{id}" in items:
            log.warning("config %s/%s (version %d, workspace %r) is not used: "
                        "%s/%s%s takes its place", CONFIG_TYPE, key, version, workspace,
                        CONFIG_TYPE, TEMPLATE_PREFIX, id)
            continue
        sources[id] = key

    configured = dict(DEFAULT_TEMPLATES)
    for id, key in sources.items():
        try:
            template = PromptTemplate.from_config(id, items[key], checked=True)
            owner = f"template {id!r}"
            check(owner, "system", template.system)
            check(owner, "prompt", template.prompt)
            configured[id] = template
        except PromptError as e:
            kept = previous.configured.get(id)
            if kept is not None:
                configured[id] = kept
            _not_applied(key, version, workspace,
                         "keeping the template it had" if kept else "no such template",
                         e.message)
    # A template's own system prompt wins; the others get the workspace's (checked above).
    templates = {id: t if t.system or not system else replace(t, system=system, checked=True)
                 for id, t in configured.items()}
    return Prompts(version=version, system=system, configured=MappingProxyType(configured),
                   templates=MappingProxyType(templates))


def _not_applied(key: str, version: int, workspace: str, outcome: str, why: str) -> None:
    log.warning("config %s/%s (version %d, workspace %r) not applied, %s: %s", CONFIG_TYPE,
                key, version, workspace, outcome, why)


def shipped_items(stored: Mapping[str, str]) -> dict[str, str]:
    """The ``prompt`` items a workspace holding ``stored`` (its ``prompt`` items) reads as
    TrustGraph's layout, but has not stored: ``system``, ``template.<id>`` of each shipped
    template it configures under neither key, and ``template-index`` (every ``template.<id>``,
    stored or shipped).

    For a config service to answer reads with, under the stored items: a fresh workspace then
    shows the prompts it is served (``tg-show-prompts`` needs ``system``), deleting an item
    shows the shipped one again — as the prompt service serves it — and a stored alias
    ``<id>`` is never hidden behind a shipped ``template.<id>``.
    """
    items: dict[str, str] = {}
    if SYSTEM_KEY not in stored:
        items[SYSTEM_KEY] = json.dumps(DEFAULT_SYSTEM)
    for id, template in DEFAULT_TEMPLATES.items():
        if id in stored or f"{TEMPLATE_PREFIX}{id}" in stored:
            continue
        value = {"id": id, "prompt": template.prompt, "response-type": template.response_type}
        if template.system:
            value["system"] = template.system
        items[f"{TEMPLATE_PREFIX}{id}"] = json.dumps(value, ensure_ascii=False)
    if INDEX_KEY not in stored:
        ids = {k.removeprefix(TEMPLATE_PREFIX) for k in (*stored, *items)
               if k.startswith(TEMPLATE_PREFIX) and k != TEMPLATE_PREFIX}
        items[INDEX_KEY] = json.dumps(sorted(ids), ensure_ascii=False)
    return items
