"""Options shared by the commands that run services: flags with environment defaults.

Secrets (the gateway token, the LLM API key) are best given by environment variable or file:
a flag's value is visible to every user of the machine in the process list, so using one logs
a warning.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from toolmesh.config.stdio import ENV as STDIO_ALLOW_ENV
from toolmesh.config.stdio import FLAG as STDIO_ALLOW_FLAG
from toolmesh.errors import ToolmeshError

log = logging.getLogger("toolmesh.options")

DEFAULT_BUS = "memory://"
TOKEN_ENV = "TOOLMESH_GATEWAY_TOKEN"
TOKEN_FILE_ENV = "TOOLMESH_GATEWAY_TOKEN_FILE"
API_KEY_FILE_ENV = "TOOLMESH_LLM_API_KEY_FILE"


def _env_list(name: str) -> list[str]:
    """A list from an environment variable: items separated by commas or spaces."""
    return [v for v in os.environ.get(name, "").replace(",", " ").split() if v]


def read_secret_file(path: str, flag: str) -> str:
    """The secret held in the file at ``path`` (surrounding whitespace removed)."""
    try:
        text = Path(path).expanduser().read_text().strip()
    except OSError as e:
        raise ToolmeshError(f"cannot read {flag} {path!r}: {e.strerror or e}",
                            type="usage-error") from None
    if not text:
        raise ToolmeshError(f"{flag} {path!r} is empty", type="usage-error")
    return text


def data_dir() -> Path:
    """Where the embedded config store lives: ``$TOOLMESH_DATA_DIR`` or ``~/.toolmesh``."""
    return Path(os.environ.get("TOOLMESH_DATA_DIR") or Path.home() / ".toolmesh").expanduser()


def add_bus(parser: argparse.ArgumentParser, default: str = DEFAULT_BUS) -> None:
    parser.add_argument("--bus", default=os.environ.get("TOOLMESH_BUS", default),
                        help="bus URL: memory:// or amqp://user:pass@host:5672/ "
                             "(env TOOLMESH_BUS; default: %(default)s)")


def add_config_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-store", default=os.environ.get("TOOLMESH_CONFIG_STORE"),
                        help="sqlite:///path/config.db or postgresql://user@host/db "
                             "(env TOOLMESH_CONFIG_STORE; default: config.db in "
                             "$TOOLMESH_DATA_DIR or ~/.toolmesh)")


def add_gateway(parser: argparse.ArgumentParser, *, startup_grace: float = 15.0) -> None:
    """The gateway's options; ``startup_grace``: the default of ``--startup-grace`` (0 for
    ``toolmesh serve``, whose parts all start before its gateway listens)."""
    parser.add_argument("--host", default=os.environ.get("TOOLMESH_HOST", "127.0.0.1"),
                        help="gateway address (env TOOLMESH_HOST; default: %(default)s)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("TOOLMESH_PORT", "8888")),
                        help="gateway port (env TOOLMESH_PORT; default: %(default)s)")
    parser.add_argument("--token", default=None,
                        help=f"require this bearer token; better: env {TOKEN_ENV} or "
                             "--token-file (a flag shows in the process list)")
    parser.add_argument("--token-file", default=os.environ.get(TOKEN_FILE_ENV), metavar="PATH",
                        help=f"read the bearer token from this file (env {TOKEN_FILE_ENV})")
    parser.add_argument("--allow-origin", action="append", metavar="ORIGIN",
                        default=_env_list("TOOLMESH_ALLOW_ORIGINS"),
                        help="let web pages of this origin (scheme://host[:port]) call the "
                             "gateway; repeat for more (env TOOLMESH_ALLOW_ORIGINS)")
    parser.add_argument("--allow-host", action="append", metavar="NAME",
                        default=_env_list("TOOLMESH_ALLOW_HOSTS"),
                        help="accept this Host name besides localhost, 127.0.0.1 and [::1] "
                             "(e.g. behind a proxy); repeat for more (env TOOLMESH_ALLOW_HOSTS)")
    parser.add_argument("--insecure", action="store_true",
                        default=os.environ.get("TOOLMESH_INSECURE", "") in ("1", "true", "yes"),
                        help="allow listening beyond loopback without a token (dangerous)")
    parser.add_argument("--startup-grace", type=float,
                        default=float(os.environ.get("TOOLMESH_STARTUP_GRACE", startup_grace)),
                        help="seconds after start during which a request to a service that "
                             "is not consuming yet waits for it (within its deadline) instead "
                             "of a 503 at once (env TOOLMESH_STARTUP_GRACE; default: "
                             "%(default)s)")
    parser.add_argument("--max-body", type=int, default=16 * 1024 * 1024,
                        help="largest request body in bytes (default: %(default)s)")
    parser.add_argument("--max-connections", type=int,
                        default=int(os.environ.get("TOOLMESH_MAX_CONNECTIONS", "1024")),
                        help="connections open at once; more are answered 503 "
                             "(env TOOLMESH_MAX_CONNECTIONS; default: %(default)s)")
    parser.add_argument("--idle-timeout", type=float,
                        default=float(os.environ.get("TOOLMESH_IDLE_TIMEOUT", "15")),
                        help="seconds a connection may go without completing a request "
                             "(env TOOLMESH_IDLE_TIMEOUT; default: %(default)s)")
    parser.add_argument("--body-timeout", type=float,
                        default=float(os.environ.get("TOOLMESH_BODY_TIMEOUT", "30")),
                        help="seconds a request body may take to arrive; slower gets 408 "
                             "(env TOOLMESH_BODY_TIMEOUT; default: %(default)s)")
    parser.add_argument("--bodies-in-flight", type=int,
                        default=int(os.environ.get("TOOLMESH_BODIES_IN_FLIGHT",
                                                   str(64 * 1024 * 1024))),
                        help="bytes of request bodies read at once; more get 503 "
                             "(env TOOLMESH_BODIES_IN_FLIGHT; default: %(default)s)")
    parser.add_argument("--ws-auth-timeout", type=float,
                        default=float(os.environ.get("TOOLMESH_WS_AUTH_TIMEOUT", "5")),
                        help="seconds a WebSocket may take to authenticate when a token is set "
                             "(env TOOLMESH_WS_AUTH_TIMEOUT; default: %(default)s)")
    parser.add_argument("--ws-send-timeout", type=float,
                        default=float(os.environ.get("TOOLMESH_WS_SEND_TIMEOUT", "10")),
                        help="seconds a WebSocket client may leave answers unread before it is "
                             "cut off (env TOOLMESH_WS_SEND_TIMEOUT; default: %(default)s)")


def gateway_token(args: argparse.Namespace) -> str | None:
    """The gateway token: ``--token``, ``--token-file``, or the environment."""
    if args.token:
        log.warning("--token makes the token visible to every user of this machine in the "
                    "process list; prefer %s or --token-file", TOKEN_ENV)
        return args.token
    if args.token_file:
        return read_secret_file(args.token_file, "--token-file")
    return os.environ.get(TOKEN_ENV) or None


def add_mcp_stdio(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(STDIO_ALLOW_FLAG, dest="mcp_stdio_allow", metavar="CMD[,CMD...]",
                        default=os.environ.get(STDIO_ALLOW_ENV),
                        help="commands that stdio MCP servers configured as mcp items may run, "
                             "e.g. uvx,npx; '*' allows any (env "
                             f"{STDIO_ALLOW_ENV}; default: none)")


def add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default=os.environ.get("TOOLMESH_LOG_LEVEL", "INFO"))


def config_store_url(args: argparse.Namespace) -> str:
    return args.config_store or str(data_dir() / "config.db")


def add_llm(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm", default=os.environ.get("TOOLMESH_LLM_URL"),
                        help="OpenAI-compatible API root, e.g. http://localhost:11434/v1 "
                             "(Ollama), http://localhost:8000/v1 (vLLM), "
                             "https://api.openai.com/v1; or scripted:FILE.json "
                             "(env TOOLMESH_LLM_URL; default: the offline demo model)")
    parser.add_argument("--model", default=os.environ.get("TOOLMESH_LLM_MODEL"),
                        help="model name (env TOOLMESH_LLM_MODEL)")
    parser.add_argument("--api-key", default=None,
                        help="API key; better: env TOOLMESH_LLM_API_KEY or OPENAI_API_KEY, or "
                             "--api-key-file (a flag shows in the process list)")
    parser.add_argument("--api-key-file", default=os.environ.get(API_KEY_FILE_ENV),
                        metavar="PATH",
                        help=f"read the API key from this file (env {API_KEY_FILE_ENV})")


def llm_api_key(args: argparse.Namespace) -> str | None:
    """The API key from ``--api-key`` or ``--api-key-file``; ``None``: the environment's."""
    if args.api_key:
        log.warning("--api-key makes the key visible to every user of this machine in the "
                    "process list; prefer TOOLMESH_LLM_API_KEY or --api-key-file")
        return args.api_key
    if args.api_key_file:
        return read_secret_file(args.api_key_file, "--api-key-file")
    return None


def add_agent(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-iterations", type=int,
                        default=int(os.environ.get("TOOLMESH_MAX_ITERATIONS", "10")),
                        help="ReAct steps before the agent gives up (default: %(default)s)")
    parser.add_argument("--tool-timeout", type=float,
                        default=float(os.environ.get("TOOLMESH_TOOL_TIMEOUT", "120")),
                        help="seconds a tool may take (default: %(default)s)")
    parser.add_argument("--tool-max-timeout", type=float,
                        default=float(os.environ.get("TOOLMESH_TOOL_MAX_TIMEOUT", "600")),
                        help="seconds an MCP tool that keeps reporting progress may take; "
                             "each report grants --tool-timeout more (default: %(default)s)")
    parser.add_argument("--max-observation", type=int,
                        default=int(os.environ.get("TOOLMESH_MAX_OBSERVATION", "32768")),
                        help="bytes of a tool's result the LLM sees; a longer result is cut "
                             "with a note (env TOOLMESH_MAX_OBSERVATION; default: %(default)s)")


def add_lifecycle(parser: argparse.ArgumentParser) -> None:
    """How a process stops, and which flow its agent or mcp-tool service serves."""
    parser.add_argument("--drain-timeout", type=float,
                        default=float(os.environ.get("TOOLMESH_DRAIN_TIMEOUT", "10")),
                        help="on SIGTERM, seconds the requests in hand get to finish before "
                             "they are cancelled with an error reply (env "
                             "TOOLMESH_DRAIN_TIMEOUT; default: %(default)s)")
    parser.add_argument("--flow", default=os.environ.get("TOOLMESH_FLOW", "default"),
                        help="the flow the agent and mcp-tool parts serve (queues "
                             "request:tg:agent:FLOW, ...); define it with a flow/FLOW config "
                             "item (env TOOLMESH_FLOW; default: %(default)s)")


def add_deadlines(parser: argparse.ArgumentParser) -> None:
    """The gateway's per-service deadlines."""
    from toolmesh.gateway.deadlines import DEFAULT_DEADLINES

    defaults = ", ".join(f"{k}={v:g}" for k, v in DEFAULT_DEADLINES.items())
    parser.add_argument("--deadline", action="append", metavar="SERVICE=SECONDS",
                        default=_env_list("TOOLMESH_DEADLINES"),
                        help="how long the gateway waits for a service, and the most a "
                             "request may ask for with X-Timeout; repeat for more (env "
                             f"TOOLMESH_DEADLINES; defaults: {defaults}; others 60)")
