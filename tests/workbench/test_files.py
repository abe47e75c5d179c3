"""How the gateway serves the Workbench's files: without a token (they hold no secret), only
its own files, each with a Content-Security-Policy that lets no injected text run; and how
its scripts are written: text is never parsed as HTML."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.gateway.test_gateway import start_gateway
from toolmesh.gateway import Gateway
from toolmesh.web.routes import FILES, PAGE_POLICY

STATIC = Path(__file__).parents[2] / "src" / "toolmesh" / "web" / "static"


async def test_the_page_and_its_files_are_served_without_a_token_and_walled_by_csp(
        guarded: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.get(guarded.url + "workbench/") as r:
        assert r.status == 200
        assert r.content_type == "text/html"
        page = await r.text()
        assert r.headers["Content-Security-Policy"] == PAGE_POLICY
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
        etag = r.headers["ETag"]
    assert '<script type="module" src="js/main.js">' in page
    async with http.get(guarded.url + "workbench/js/main.js") as r:
        assert (r.status, r.content_type) == (200, "text/javascript")
    async with http.get(guarded.url + "workbench/", headers={"If-None-Match": etag}) as r:
        assert r.status == 304
    # the API itself still needs the token
    async with http.post(guarded.url + "api/v1/config", json={"operation": "list",
                                                              "type": "tool"}) as r:
        assert r.status == 401


async def test_the_root_leads_to_the_workbench(guarded: Gateway,
                                               http: aiohttp.ClientSession) -> None:
    for path in ("", "workbench"):
        async with http.get(guarded.url + path, allow_redirects=False) as r:
            assert (r.status, r.headers["Location"]) == (302, "/workbench/")


@pytest.mark.parametrize("path", ["workbench/nothing.js", "workbench/%2e%2e/pyproject.toml",
                                  "workbench/..%2f..%2fpyproject.toml", "workbench/js/",
                                  "workbench/js/../../routes.py", "workbench/__init__.py"])
async def test_only_the_workbench_files_can_be_named(guarded: Gateway,
                                                     http: aiohttp.ClientSession,
                                                     path: str) -> None:
    async with http.get(guarded.url + path) as r:
        body = await r.text()
        assert r.status in (401, 404), (r.status, body)
        assert "[tool" not in body and "import" not in body


async def test_another_origin_cannot_load_the_files_through_a_script(
        guarded: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.get(guarded.url + "workbench/js/api.js",
                        headers={"Origin": "http://evil.example"}) as r:
        assert r.status == 403


@pytest.fixture
async def no_workbench(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path, workbench=False):
        yield gw


async def test_an_operator_can_turn_the_workbench_off(no_workbench: Gateway,
                                                      http: aiohttp.ClientSession) -> None:
    async with http.get(no_workbench.url + "workbench/") as r:
        assert r.status == 404


def test_every_file_in_the_package_is_served() -> None:
    on_disk = {str(p.relative_to(STATIC)) for p in STATIC.rglob("*") if p.is_file()}
    assert on_disk == set(FILES)
    assert {"index.html", "workbench.css", "js/main.js", "js/api.js", "js/dom.js"} <= set(FILES)


#: what would let text from a server or a config item run as code, or break the CSP
FORBIDDEN = {
    r"\.innerHTML\b": "innerHTML", r"\.outerHTML\b": "outerHTML",
    r"insertAdjacentHTML": "insertAdjacentHTML", r"document\.write": "document.write",
    r"\beval\s*\(": "eval", r"new\s+Function\s*\(": "new Function",
    r"createContextualFragment": "createContextualFragment", r"DOMParser": "DOMParser",
    r"setAttribute\(\s*[\"']on": "an inline handler attribute",
    r"setAttribute\(\s*[\"']style[\"']": "a style attribute (blocked by the CSP)",
}


def test_no_script_parses_text_as_html() -> None:
    for name, found in FILES.items():
        if not name.endswith(".js"):
            continue
        text = found.body.decode()
        for pattern, what in FORBIDDEN.items():
            assert re.search(pattern, text) is None, f"{name} uses {what}"


def test_the_html_has_no_inline_script_or_style() -> None:
    for name, found in FILES.items():
        if not name.endswith(".html"):
            continue
        html = found.body.decode()
        scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.DOTALL)
        assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts)
        assert re.search(r"\son[a-z]+\s*=", html) is None
        assert "<style" not in html and "style=" not in html


#: the DOM's own ways to add children, which write a null as the text "null" (the "nullnull"
#: of an approval card): every script adds children through js/dom.js's append/h instead
NATIVE_APPEND = r"\.(append|prepend|before|after|replaceWith)\("


def test_every_script_adds_children_through_the_one_helper() -> None:
    for name, found in FILES.items():
        if name.endswith(".js"):
            text = found.body.decode()
            assert re.search(NATIVE_APPEND, text) is None, f"{name} calls the DOM's append"
