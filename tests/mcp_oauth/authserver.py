"""A real OAuth 2.1 authorization server for the tests: the npm package ``oidc-provider``
(Filip Skokan's certified OpenID provider, :data:`VERSION`), installed on demand into a cache
directory and run with Node as a child process bound to 127.0.0.1 (``authserver.mjs``).

    python -m tests.mcp_oauth.authserver --install     # what .ci/run calls; prints the directory

Nobody here wrote it, so toolmesh's OAuth client meets someone else's reading of OAuth: PKCE
(S256) required of every client, resource indicators (RFC 8707: a token names one resource
server, an unknown ``resource`` is refused), open dynamic client registration (RFC 7591),
introspection (RFC 7662), revocation (RFC 7009), RFC 9207 ``iss`` on the redirect, refresh
tokens rotated on use, and devInteractions' login and consent pages (any login name is an
account; the name is its ``sub``): see :mod:`tests.mcp_oauth.browserless`.

Access tokens are opaque (check them by introspection, as :mod:`tests.mcp_oauth.
protected_server` does). Both ``/.well-known/openid-configuration`` and RFC 8414's
``/.well-known/oauth-authorization-server`` serve the metadata. oidc-provider 9 warns on
stderr that it prefers Node 22; it runs on Node 20 all the same.

Faults a test can turn on, at start or with :meth:`AuthServer.configure`: ``no_s256`` (both
metadata documents offer only ``plain`` PKCE), ``wrong_iss`` (the redirect to the client
carries an ``iss`` that is not the issuer).

Controls under ``/test/`` (not OAuth; the methods of :class:`AuthServer` call them):
``POST /test/revoke?sub=NAME`` destroys that account's tokens, codes, grants and sessions
(:meth:`AuthServer.revoke`; a client's own RFC 7009 revocation works too, at
:attr:`AuthServer.revocation_endpoint`), ``POST /test/resources`` accepts one more resource
(:meth:`AuthServer.allow_resource`), ``POST /test/config`` changes settings
(:meth:`AuthServer.configure`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2

from tests.mcp.everything import NodeMissing, executable, missing_node, npm_install

PACKAGE = "oidc-provider"
VERSION = "9.13.3"
CACHE = Path.home() / ".cache" / "toolmesh-tests" / f"npm-oidc-provider-{VERSION}"
SCRIPT = Path(__file__).with_name("authserver.mjs")
#: the scopes a token for a resource server may carry unless told otherwise
DEFAULT_SCOPE = "mcp:tools notes:write"

__all__ = ["AuthServer", "DEFAULT_SCOPE", "NodeMissing", "authserver", "install",
           "missing_node", "running_authserver"]


def package_dir(root: Path = CACHE) -> Path:
    return root / "node_modules" / PACKAGE


def install(root: Path = CACHE) -> Path:
    """The installed package's directory; installed first if it is not there (under a file
    lock, into a scratch directory renamed into place: :func:`tests.mcp.everything.npm_install`)."""
    npm_install(root, f"{PACKAGE}@{VERSION}",
                marker=Path("node_modules", PACKAGE, "package.json"))
    return package_dir(root)


class AuthServer:
    """One oidc-provider on a free loopback port, for ``with``/``async with`` or
    :meth:`start`/:meth:`stop`. Usable from any event loop (or none): the child is watched by
    a thread, and each control call opens its own HTTP client.

    Options (all keyword-only):

    ``resources``
        resource URL -> the space-separated scopes a token for it may carry. An authorization
        or token request naming any other ``resource`` is refused (``invalid_target``). Add
        more at run time with :meth:`allow_resource` (a protected server on a port chosen after
        this one started does).
    ``scopes``
        every scope any resource server's tokens may carry (default: the words of
        :data:`DEFAULT_SCOPE` and of ``resources``): the server lists them in
        ``scopes_supported``, and a client may register (RFC 7591 ``scope``) only with these.
    ``limit_client_scope``
        keep a dynamic registration's ``scope``: oidc-provider then refuses (``invalid_scope``)
        any later request of that client for a scope it did not register, e.g. MCP's step-up.
        By default the fixture drops ``scope`` from registrations, so clients are not limited.
    ``access_token_ttl``, ``refresh_token_ttl``
        seconds (default 300 and 86400).
    ``no_s256``, ``wrong_iss``
        the faults (see the module docstring).
    ``clients``
        static clients in oidc-provider's client metadata format (``client_id``,
        ``client_secret``, ``redirect_uris``, ``grant_types``, ...), besides those registered
        dynamically.
    """

    def __init__(self, *, resources: Mapping[str, str] | None = None,
                 scopes: Iterable[str] | None = None, access_token_ttl: int = 300, refresh_token_ttl: int = 86400,
                 limit_client_scope: bool = False, no_s256: bool = False,
                 wrong_iss: bool = False, clients: list[dict[str, Any]] | None = None, timeout: float = 30) -> None:
        resources = dict(resources or {})
        if scopes is None:
            scopes = dict.fromkeys(" ".join([DEFAULT_SCOPE, *resources.values()]).split())
        self.config: dict[str, Any] = {
            "resources": resources, "scopes": list(scopes), "access_token_ttl": access_token_ttl,
            "refresh_token_ttl": refresh_token_ttl, "limit_client_scope": limit_client_scope,
            "no_s256": no_s256, "wrong_iss": wrong_iss,
            "clients": list(clients or []),
        }
        self.timeout = timeout
        #: what the provider wrote to stderr so far (its warnings, any server_error)
        self.stderr: list[str] = []
        self.issuer = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._threads: list[threading.Thread] = []

    # -- the addresses -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self.issuer.rsplit(":", 1)[1])

    @property
    def openid_configuration_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def metadata_url(self) -> str:
        """RFC 8414 authorization server metadata (the same document as the OpenID one)."""
        return f"{self.issuer}/.well-known/oauth-authorization-server"

    @property
    def authorization_endpoint(self) -> str:
        return f"{self.issuer}/auth"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def registration_endpoint(self) -> str:
        return f"{self.issuer}/reg"

    @property
    def introspection_endpoint(self) -> str:
        return f"{self.issuer}/token/introspection"

    @property
    def revocation_endpoint(self) -> str:
        return f"{self.issuer}/token/revocation"

    # -- the process -------------------------------------------------------------------------

    def start(self) -> AuthServer:
        """Start the provider; return once it printed ``READY <issuer>`` (blocking)."""
        if self.process is not None:
            raise RuntimeError("this AuthServer was started already")
        config = {**self.config, "package": str(install())}
        self.process = subprocess.Popen(
            [executable("node"), str(SCRIPT), json.dumps(config)], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        said = threading.Event()
        self._threads = [
            threading.Thread(target=self._read_stdout, args=(said,), daemon=True,
                             name="authserver-stdout"),
            threading.Thread(target=self._read_stderr, daemon=True, name="authserver-stderr")]
        for thread in self._threads:
            thread.start()
        if not said.wait(self.timeout) or not self.issuer:
            self.stop()
            raise RuntimeError(f"{PACKAGE} did not start within {self.timeout:g} s:\n"
                               + "".join(self.stderr))
        return self

    def _read_stdout(self, said: threading.Event) -> None:
        # The first line is READY; the rest is read (and dropped) so a full pipe never blocks it.
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").strip()
            if not self.issuer and line.startswith("READY "):
                self.issuer = line.split(" ", 1)[1]
                said.set()
        said.set()

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for raw in self.process.stderr:
            self.stderr.append(raw.decode(errors="replace"))

    def stop(self) -> None:
        """Kill the provider (its process group) and reap it; its state is gone with it."""
        process = self.process
        if process is None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 20)):
            if process.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)  # only while unreaped: the id is still ours
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(wait)
        for thread in self._threads:
            thread.join(5)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> AuthServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> AuthServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await asyncio.to_thread(self.stop)

    # -- controls ----------------------------------------------------------------------------

    async def _control(self, path: str, body: Any = None, *,
                       params: dict[str, str] | None = None) -> dict[str, Any]:
        async with httpx2.AsyncClient(timeout=10) as client:
            response = await client.post(f"{self.issuer}{path}", json=body, params=params)
        response.raise_for_status()
        return response.json()

    async def allow_resource(self, resource: str, *, scope: str = DEFAULT_SCOPE) -> None:
        """From now on accept ``resource`` as a resource indicator (tokens for it carry up to
        ``scope``)."""
        await self._control("/test/resources", {"resource": resource, "scope": scope})
        self.config["resources"][resource] = scope

    async def configure(self, **changes: Any) -> dict[str, Any]:
        """Change ``access_token_ttl``, ``refresh_token_ttl``, ``limit_client_scope``,
        ``no_s256`` or ``wrong_iss`` of the running provider (for the requests that follow); returns the settings now."""
        settings = await self._control("/test/config", changes)
        self.config.update(changes)
        return settings

    async def revoke(self, sub: str) -> int:
        """Destroy every access token, refresh token, code, grant and session of account
        ``sub`` (the next use of any of its tokens fails, its next authorization asks it to
        sign in and consent again); how many tokens were destroyed."""
        return int((await self._control("/test/revoke", params={"sub": sub}))["revoked"])

    async def metadata(self, *, rfc8414: bool = True) -> dict[str, Any]:
        """The server's metadata document (RFC 8414's path, or the OpenID one)."""
        url = self.metadata_url if rfc8414 else self.openid_configuration_url
        async with httpx2.AsyncClient(timeout=10) as client:
            response = await client.get(url)
        response.raise_for_status()
        return response.json()

    async def register_client(self, **metadata: Any) -> dict[str, Any]:
        """Register a client dynamically (RFC 7591, as any client may): the server's answer,
        with ``client_id`` and (for a confidential client) ``client_secret``."""
        async with httpx2.AsyncClient(timeout=10) as client:
            response = await client.post(self.registration_endpoint, json=metadata)
        if response.status_code != 201:
            raise RuntimeError(f"registration refused ({response.status_code}): {response.text}")
        return response.json()

    async def introspect(self, token: str, *, client_id: str,
                         client_secret: str) -> dict[str, Any]:
        """RFC 7662 introspection of ``token``, authenticated as a confidential client."""
        async with httpx2.AsyncClient(timeout=10) as client:
            response = await client.post(self.introspection_endpoint, data={"token": token},
                                         auth=(client_id, client_secret))
        response.raise_for_status()
        return response.json()


@contextlib.contextmanager
def authserver(**options: Any) -> Iterator[AuthServer]:
    """An :class:`AuthServer` for a ``with`` block (e.g. a module-scoped sync fixture)."""
    with AuthServer(**options) as server:
        yield server


@contextlib.asynccontextmanager
async def running_authserver(**options: Any) -> AsyncIterator[AuthServer]:
    """An :class:`AuthServer` for an ``async with`` block."""
    async with AuthServer(**options) as server:
        yield server


def main() -> None:
    parser = argparse.ArgumentParser(description=f"{PACKAGE} {VERSION} for the tests")
    parser.add_argument("--install", action="store_true",
                        help=f"install it into {CACHE} if it is not there; print the directory")
    args = parser.parse_args()
    if not args.install:
        parser.error("nothing to do (try --install)")
    try:
        print(install())
    except RuntimeError as e:  # NodeMissing too
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
