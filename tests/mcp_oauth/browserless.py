"""The person at the authorization server, played without a browser.

oidc-provider's devInteractions are two HTML forms: sign in (any login name and any password;
the name becomes the account's ``sub``) and consent ("Continue"). :func:`log_in` walks them with
an HTTP client that keeps cookies, as a browser would, and stops at the redirect back to the
client: that URL (the client's ``redirect_uri`` with ``code``, ``state`` and ``iss``, or with
``error``) is what it returns, unrequested. :func:`follow` requests it too.

A second authorization of the same person needs only what the server still wants: pass the
same :class:`httpx2.Cookies` (``cookies=``) to both calls and the second one skips the sign-in
(the provider's session cookie is in the jar) and, for a client already consented to with the
same scopes, the consent too — whichever pages come are answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2

__all__ = ["LoginError", "follow", "log_in", "redirect_params"]

#: more than any sign-in takes: auth -> interaction -> login -> auth -> interaction ->
#: consent -> auth -> client, each at most a page and a redirect
MAX_STEPS = 20


class LoginError(RuntimeError):
    """The authorization server answered something the person cannot go on from."""


@dataclass
class _Form:
    action: str
    method: str
    fields: dict[str, str] = field(default_factory=dict)


class _Forms(HTMLParser):
    """The forms of a page, with the values of their named inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[_Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.forms.append(_Form(found.get("action", ""), found.get("method", "get").lower()))
        elif tag == "input" and self.forms and "name" in found:
            self.forms[-1].fields[found["name"]] = found.get("value", "")


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


async def _walk(client: httpx2.AsyncClient, url: str, username: str, password: str,
                answered: list[str]) -> str:
    """Answer the server's pages until it redirects off its own origin; that redirect's URL."""
    server = _origin(url)
    response = await client.get(url)
    for _ in range(MAX_STEPS):
        if response.is_redirect:
            target = urljoin(str(response.url), response.headers["location"])
            if _origin(target) != server:
                return target
            response = await client.get(target)
            continue
        if response.status_code != 200 or "html" not in response.headers.get("content-type", ""):
            raise LoginError(f"{response.request.method} {response.url} answered "
                             f"{response.status_code}: {response.text[:500]}")
        parser = _Forms()
        parser.feed(response.text)
        form = next((f for f in parser.forms if f.method == "post"), None)
        if form is None:  # an error page of the server, e.g. a refused client or resource
            raise LoginError(f"no form at {response.url}: {response.text[:1000]}")
        data = dict(form.fields)
        if "login" in data:
            data.update(login=username, password=password)
        answered.append(data.get("prompt", "?"))  # devInteractions: "login" or "consent"
        response = await client.post(urljoin(str(response.url), form.action), data=data)
    raise LoginError(f"still at the authorization server after {MAX_STEPS} steps ({url})")


async def log_in(url: str, *, username: str, password: str = "secret",
                 cookies: httpx2.Cookies | None = None, answered: list[str] | None = None,
                 timeout: float = 10) -> str:
    """Open the authorization ``url``, sign in as ``username`` and consent; the URL the server
    then redirects to (not requested).

    ``cookies``: a jar kept across calls, like one browser's (the session it holds is reused:
    sign-in is skipped, whatever ``username``). ``answered``: a list that gets the name of
    each page answered, in order (``"login"``, ``"consent"``)."""
    async with httpx2.AsyncClient(cookies=cookies, follow_redirects=False,
                                  timeout=timeout) as client:
        final = await _walk(client, url, username, password,
                            answered if answered is not None else [])
        if cookies is not None:  # the client copied the jar: copy back what it holds now
            cookies.clear()
            cookies.update(client.cookies)
        return final


async def follow(url: str, *, username: str, password: str = "secret",
                 cookies: httpx2.Cookies | None = None, answered: list[str] | None = None,
                 timeout: float = 10) -> httpx2.Response:
    """:func:`log_in`, then request the redirect it ends with (the client's real callback
    server answers; its redirects are followed) and return that response."""
    target = await log_in(url, username=username, password=password, cookies=cookies,
                          answered=answered, timeout=timeout)
    async with httpx2.AsyncClient(follow_redirects=True, timeout=timeout) as client:
        return await client.get(target)


def redirect_params(url: str) -> dict[str, str]:
    """The query parameters of a redirect (``code``, ``state``, ``iss``, or ``error``...), one
    value each."""
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}
