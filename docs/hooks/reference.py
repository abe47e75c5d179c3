"""MkDocs hook (``hooks:`` in mkdocs.yml): the generated reference pages.

How: each generated page is committed as a short hand-written introduction plus one marker
line, ``<!-- generated: NAME -->``; when MkDocs reads the page, :func:`on_page_markdown`
replaces the marker with what the generator NAME makes from the code at that moment. So the
pages are as current as the build, and the committed Markdown stays short and readable on
GitHub (which shows the introduction; the marker is an HTML comment).

* ``cli`` (docs/reference/cli.md): every ``toolmesh`` command from the argparse parser
  (reference_cli.py);
* ``rest-api`` (docs/reference/rest-api.md): every route of the gateway's OpenAPI document
  (reference_rest.py).

A page of :data:`PAGES` without its marker, or a marker of an unknown generator, fails the
build: a reference page must not silently lose its generated part. docs/reference/config.md is
written by hand (the validation that defines config items is code, not a schema);
tests/docs/test_config_reference.py checks it names every field the validation reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# The hook's folder is on sys.path while MkDocs imports this file, so its siblings import.
import reference_cli
import reference_rest

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)


def _cli() -> str:
    from toolmesh.cli.main import build_parser

    return reference_cli.markdown(build_parser())


def _rest_api() -> str:
    from toolmesh.gateway.openapi import document

    return reference_rest.markdown(document())


#: generator name -> what replaces its marker
GENERATORS: dict[str, Callable[[], str]] = {"cli": _cli, "rest-api": _rest_api}

#: page (relative to docs/) -> the generator its marker must name
PAGES = {"reference/cli.md": "cli", "reference/rest-api.md": "rest-api"}


class GeneratedPageError(RuntimeError):
    """A generated page is missing its marker, or names a generator there is none of."""


def expand(markdown: str, *, page: str) -> str:
    """``markdown`` with each marker replaced by its generator's Markdown."""
    wanted = PAGES.get(page)
    names = MARKER.findall(markdown)
    if wanted is not None and wanted not in names:
        raise GeneratedPageError(f"{page} has lost its marker '<!-- generated: {wanted} -->'; "
                                 "the hook docs/hooks/reference.py replaces it with the "
                                 "generated reference")
    for name in names:
        if name not in GENERATORS:
            raise GeneratedPageError(f"{page}: no generator {name!r} (known: "
                                     + ", ".join(GENERATORS) + ")")
    return MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown)


def on_page_markdown(markdown: str, *, page: Any, config: Any, files: Any) -> str:
    """MkDocs' event: the page's Markdown before it is rendered."""
    return expand(markdown, page=page.file.src_uri)
