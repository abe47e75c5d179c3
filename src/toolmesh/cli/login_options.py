"""The options of MCP sign-ins (docs/mcp-oauth.md): where people's browsers reach the gateway,
and where the mcp-tool service keeps the grants they give."""

from __future__ import annotations

import argparse
import os
from typing import Any

from toolmesh.errors import ToolmeshError

PUBLIC_URL_ENV = "TOOLMESH_PUBLIC_URL"
LOGINS_ENV = "TOOLMESH_MCP_LOGINS"


def add_public_url(parser: argparse.ArgumentParser) -> None:
    """``--public-url``: the gateway's address as browsers reach it."""
    parser.add_argument(
        "--public-url", default=os.environ.get(PUBLIC_URL_ENV), metavar="URL",
        help="where people's browsers reach the gateway, e.g. https://toolmesh.example.com: "
             "an MCP server's sign-in comes back to URL/api/v1/mcp-oauth/callback, and with "
             "https the gateway serves its client metadata document (env TOOLMESH_PUBLIC_URL; "
             "default for `toolmesh serve`: http://127.0.0.1:PORT)")


def add_mcp_logins(parser: argparse.ArgumentParser) -> None:
    """``--mcp-logins``: where the mcp-tool service keeps people's grants."""
    parser.add_argument(
        "--mcp-logins", default=os.environ.get(LOGINS_ENV), metavar="STORE",
        help="where sign-ins to MCP servers are kept, encrypted: memory, a SQLite file, or "
             "postgresql://... shared by replicas (needs TOOLMESH_SECRET_KEY) (env "
             "TOOLMESH_MCP_LOGINS; default: $TOOLMESH_CONFIG_STORE when it is PostgreSQL and "
             "TOOLMESH_SECRET_KEY is set, "
             "else mcp-logins.db in the data folder)")


def public_url(args: argparse.Namespace) -> str | None:
    """``--public-url``, checked; for ``serve`` (which has ``--port``) its own address when
    not given."""
    url = getattr(args, "public_url", None)
    if url:
        if not url.startswith(("http://", "https://")):
            raise ToolmeshError(f"--public-url {url!r} must be an http(s) URL, such as "
                                "https://toolmesh.example.com", type="usage-error")
        return str(url).rstrip("/")
    port = getattr(args, "port", None)
    if not port:
        return None
    return local_url(getattr(args, "host", "127.0.0.1"), port)


def local_url(host: str, port: int) -> str:
    """The gateway's address for a browser on this machine."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # a browser on this machine; others need --public-url
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def logins_url(args: argparse.Namespace) -> str:
    """The grant store ``--mcp-logins`` names, or the default (see its help)."""
    named = getattr(args, "mcp_logins", None)
    if named:
        return str(named)
    store = getattr(args, "config_store", None) or os.environ.get("TOOLMESH_CONFIG_STORE", "")
    if store.lower().startswith(("postgresql://", "postgres://")):
        if os.environ.get("TOOLMESH_SECRET_KEY") or os.environ.get("TOOLMESH_SECRET_KEY_FILE"):
            return store
        # grants in a shared database must be encrypted with a key every replica has: without
        # one they stay on this machine (encrypted with a key of its own), and it says so
        import logging  # here: building the parser must not load it (tests/cli)

        logging.getLogger("toolmesh.serve").warning(
            "MCP sign-ins are kept in %s on this machine, not in the config store's "
            "PostgreSQL: set TOOLMESH_SECRET_KEY (the same on every replica) to keep them "
            "there, shared", data_dir() / "mcp-logins.db")
    return str(data_dir() / "mcp-logins.db")


def data_dir() -> Any:
    from toolmesh.cli.options import data_dir as folder

    return folder()


async def open_logins(args: argparse.Namespace, stores: list[Any]) -> Any:
    """The grant store of this process's mcp-tool service, opened (closed with ``stores``)."""
    from toolmesh.files import private_dir
    from toolmesh.mcp_oauth import open_grants

    if not getattr(args, "mcp_logins", None):
        private_dir(data_dir())  # the data folder holds the grants: ours alone
    store = await open_grants(logins_url(args))
    stores.append(store)
    return store
