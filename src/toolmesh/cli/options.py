"""Options shared by the commands that run services: flags with environment defaults.

Secrets (the gateway token, the LLM API key) are best given by environment variable or file:
a flag's value is visible to every user of the machine in the process list, so using one logs
a warning.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toolmesh.config.stdio import ENV as STDIO_ALLOW_ENV
from toolmesh.config.stdio import FLAG as STDIO_ALLOW_FLAG
from toolmesh.errors import ToolmeshError

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable


def log() -> logging.Logger:
    """This module's logger. logging is imported at the first message, not with the module:
    every `toolmesh` command loads this module to build its parser."""
    import logging

    return logging.getLogger("toolmesh.options")


DEFAULT_BUS = "memory://"
TOKEN_ENV = "TOOLMESH_GATEWAY_TOKEN"
TOKEN_FILE_ENV = "TOOLMESH_GATEWAY_TOKEN_FILE"
API_KEY_FILE_ENV = "TOOLMESH_LLM_API_KEY_FILE"
MiB = 1024 * 1024


@dataclass(frozen=True)
class Bound:
    """A numeric limit (a connection cap, a timeout, a size): its flag, the environment
    variable that sets its default (none: only the flag sets it), its type, default and help.
    The flag's ``dest`` is the name of the field it sets in the options object it belongs to
    (:class:`~toolmesh.gateway.bounds.Bounds`, :class:`~toolmesh.agent.loop.AgentOptions`)."""

    flag: str
    env: str | None
    type: type[int] | type[float]
    default: int | float
    help: str
    #: whether the help names ``env`` (three agent flags never did)
    env_in_help: bool = True

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """The flag; a bad value of the environment variable raises :class:`ValueError`."""
        default = self.default if self.env is None else self.type(
            os.environ.get(self.env, self.default))
        named = f"env {self.env}; " if self.env and self.env_in_help else ""
        parser.add_argument(self.flag, type=self.type, default=default,
                            help=f"{self.help} ({named}default: %(default)s)")


#: the default is add_gateway's ``startup_grace``
STARTUP_GRACE = Bound("--startup-grace", "TOOLMESH_STARTUP_GRACE", float, 15.0,
                      "seconds after start during which a request to a service that is not "
                      "consuming yet waits for it (within its deadline) instead of a 503 at once")

#: one per field of :class:`toolmesh.gateway.bounds.Bounds` that a flag sets
GATEWAY_BOUNDS = (
    Bound("--max-body", None, int, 16 * MiB, "largest request body in bytes"),
    Bound("--max-connections", "TOOLMESH_MAX_CONNECTIONS", int, 1024,
          "authenticated connections open at once; more are answered 503"),
    Bound("--idle-timeout", "TOOLMESH_IDLE_TIMEOUT", float, 15,
          "seconds a connection may go without completing a request"),
    Bound("--body-timeout", "TOOLMESH_BODY_TIMEOUT", float, 30,
          "seconds a request body may take to arrive; slower gets 408"),
    Bound("--bodies-in-flight", "TOOLMESH_BODIES_IN_FLIGHT", int, 64 * MiB,
          "bytes of request bodies read at once; more get 503"),
    Bound("--ws-auth-timeout", "TOOLMESH_WS_AUTH_TIMEOUT", float, 5,
          "seconds a WebSocket may take to authenticate when a token is set, from its "
          "upgrade (--auth-timeout, from its connection, applies too)"),
    Bound("--ws-send-timeout", "TOOLMESH_WS_SEND_TIMEOUT", float, 10,
          "seconds a WebSocket client may leave answers unread before it is cut off"),
    # one tenant cannot hold the rest out (toolmesh.gateway.quotas, .throttle); 0: off
    Bound("--ws-idle-timeout", "TOOLMESH_WS_IDLE_TIMEOUT", float, 300,
          "seconds an authenticated WebSocket may go without a request before it is closed"),
    Bound("--token-connections", "TOOLMESH_TOKEN_CONNECTIONS", int, 128,
          "connections one scoped token may hold at once; more get 429"),
    Bound("--workspace-connections", "TOOLMESH_WORKSPACE_CONNECTIONS", int, 256,
          "connections the scoped tokens of one workspace may hold together; more get 429"),
    Bound("--token-requests", "TOOLMESH_TOKEN_REQUESTS", int, 256,
          "requests one scoped token may have in flight at once; more get 429"),
    Bound("--admin-share", "TOOLMESH_ADMIN_SHARE", float, 0.0625,
          "share of --max-connections only the gateway's own token may use"),
    # connections not authenticated yet (toolmesh.gateway.strangers); 0: off
    Bound("--stranger-share", "TOOLMESH_STRANGER_SHARE", float, 0.125,
          "connections not authenticated yet, as a share of --max-connections, held on top "
          "of it; when full, the oldest of the address holding the most is closed for a "
          "newcomer"),
    Bound("--address-strangers", "TOOLMESH_ADDRESS_STRANGERS", int, 0,
          "connections not authenticated yet one client address may hold; more get 429 "
          "(0: no limit but its fair share of --stranger-share)"),
    Bound("--auth-timeout", "TOOLMESH_AUTH_TIMEOUT", float, 3,
          "seconds a connection may take to authenticate (REST: a request with a valid "
          "token; WebSocket: its auth frame) before it is closed"),
    Bound("--auth-failure-rate", "TOOLMESH_AUTH_FAILURE_RATE", float, 2,
          "wrong tokens a second one client address may send, after a burst of "
          "--auth-failure-burst; beyond, every token it sends gets 429"),
    Bound("--auth-failure-burst", "TOOLMESH_AUTH_FAILURE_BURST", int, 8,
          "wrong tokens one client address may send at once"),
    # MCP sessions at /mcp (toolmesh.mcp_endpoint.session_table); 0: off
    Bound("--token-mcp-sessions", "TOOLMESH_TOKEN_MCP_SESSIONS", int, 64,
          "MCP sessions one scoped token may hold at /mcp; beyond, its oldest idle one is "
          "ended, or with none idle the new one gets 429"),
    Bound("--workspace-mcp-sessions", "TOOLMESH_WORKSPACE_MCP_SESSIONS", int, 256,
          "MCP sessions the scoped tokens of one workspace may hold together; the same"),
    Bound("--mcp-sessions", "TOOLMESH_MCP_SESSIONS", int, 2048,
          "MCP sessions everyone together may hold (the gateway's own token included); "
          "beyond, the oldest idle one is ended (a tenant's never the admin's), or 503"),
    Bound("--mcp-session-idle", "TOOLMESH_MCP_SESSION_IDLE", float, 5,
          "minutes an MCP session may go with no request in flight before it is ended"),
)

#: one per field of :class:`toolmesh.agent.loop.AgentOptions` that a flag sets
AGENT_BOUNDS = (
    Bound("--max-iterations", "TOOLMESH_MAX_ITERATIONS", int, 10,
          "ReAct steps before the agent gives up", env_in_help=False),
    Bound("--tool-timeout", "TOOLMESH_TOOL_TIMEOUT", float, 120,
          "seconds a tool may take", env_in_help=False),
    Bound("--tool-max-timeout", "TOOLMESH_TOOL_MAX_TIMEOUT", float, 600,
          "seconds an MCP tool that keeps reporting progress may take; each report grants "
          "--tool-timeout more", env_in_help=False),
    Bound("--max-observation", "TOOLMESH_MAX_OBSERVATION", int, 32768,
          "bytes of a tool's result the LLM sees; a longer result is cut with a note"),
    Bound("--max-step-tokens", "TOOLMESH_MAX_STEP_TOKENS", int, 1024,
          "tokens one LLM step that may call tools may write (a final answer has "
          "--max-answer-tokens); 0: no limit"),
    Bound("--token-budget", "TOOLMESH_TOKEN_BUDGET", int, 100_000,
          "tokens (in and out) a dialog may use before the agent asks for its final answer; "
          "0: no limit"),
    Bound("--parallel-calls", "TOOLMESH_PARALLEL_CALLS", int, 4,
          "tool calls of one LLM reply (native tool calling) that run at once"),
    Bound("--approval-timeout", "TOOLMESH_APPROVAL_TIMEOUT", float, 300,
          "seconds a call that waits for a person's approval waits; unanswered, it is "
          "denied (docs/approvals.md)"),
)

#: the operator's default approval policy (toolmesh.approvals.policy)
APPROVAL_CHOICES = ("never", "always")
#: how agents get tool calls out of a model (docs/tool-calling.md)
TOOL_CALLING_CHOICES = ("auto", "native", "json", "react")
#: the servers of toolmesh.llm.quirks.TABLE (named here: every command builds its parser, and
#: the llm package is not for commands that only talk to the gateway)
LLM_SERVERS = ("llama-cpp-python", "llama.cpp", "ollama", "openai", "vllm")

#: how a stream's pieces are gathered into messages, by the text-completion service and the
#: agent (:class:`toolmesh.llm.coalesce.Coalescing`)
STREAM_BOUNDS = (
    Bound("--stream-window", "TOOLMESH_STREAM_WINDOW", float, 0.01,
          "seconds within which a streamed answer's pieces share a message (the first piece "
          "and the end are never held); 0: a message per piece"),
    Bound("--stream-max-chars", "TOOLMESH_STREAM_MAX_CHARS", int, 4096,
          "characters of a streamed answer held that go out at once, however soon"),
)

#: one per field of :class:`toolmesh.prompt.sandbox.RenderLimits`: what rendering one prompt
#: template may cost (docs/security.md)
PROMPT_BOUNDS = (
    Bound("--prompt-render-timeout", "TOOLMESH_PROMPT_RENDER_TIMEOUT", float, 2.0,
          "seconds a prompt template may take to compile and render; then its worker process "
          "is killed and the request fails with a prompt-error"),
    Bound("--prompt-max-size", "TOOLMESH_PROMPT_MAX_SIZE", int, 2_000_000,
          "characters a rendered prompt may have, and items a string, list or number built in "
          "a template may hold"),
    Bound("--prompt-max-range", "TOOLMESH_PROMPT_MAX_RANGE", int, 10_000,
          "items a range() in a prompt template may have"),
    Bound("--prompt-max-memory", "TOOLMESH_PROMPT_MAX_MEMORY", int, 512,
          "MiB of memory a prompt render worker may take beyond its own; 0: no limit"),
    Bound("--prompt-workers", "TOOLMESH_PROMPT_WORKERS", int, 2,
          "processes rendering prompt templates at once; one workspace may use all but one, "
          "and workspaces whose renders run long all but one together"),
)


def add_prompt(parser: argparse.ArgumentParser) -> None:
    """The prompt service's render limits."""
    add_bounds(parser, PROMPT_BOUNDS)


def prompt_limits(args: argparse.Namespace) -> dict[str, int | float]:
    """The parsed :data:`PROMPT_BOUNDS` as the fields of ``RenderLimits``."""
    return {bound.dest.removeprefix("prompt_").replace("render_", ""): getattr(args, bound.dest)
            for bound in PROMPT_BOUNDS}


DRAIN_TIMEOUT = Bound("--drain-timeout", "TOOLMESH_DRAIN_TIMEOUT", float, 10,
                      "on SIGTERM, seconds the requests in hand get to finish before they are "
                      "cancelled with an error reply")


def add_bounds(parser: argparse.ArgumentParser, bounds: tuple[Bound, ...]) -> None:
    for bound in bounds:
        bound.add_to(parser)


def bound_values(args: argparse.Namespace, bounds: tuple[Bound, ...]) -> dict[str, int | float]:
    """The parsed ``bounds`` by field name: ``Bounds(**bound_values(args, GATEWAY_BOUNDS))``."""
    return {bound.dest: getattr(args, bound.dest) for bound in bounds}


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
                        help="allow listening beyond loopback without a token, or with a weak "
                             "one (under 16 characters or repetitive; dangerous)")
    parser.add_argument("--no-workbench", action="store_true",
                        default=os.environ.get("TOOLMESH_NO_WORKBENCH", "") in ("1", "true", "yes"),
                        help="do not serve the Workbench web UI at /workbench/ (env "
                             "TOOLMESH_NO_WORKBENCH=1); the API is served either way")
    add_bounds(parser, (dataclasses.replace(STARTUP_GRACE, default=startup_grace),
                        *GATEWAY_BOUNDS))


def gateway_token(args: argparse.Namespace) -> str | None:
    """The gateway token: ``--token``, ``--token-file``, or the environment."""
    if args.token:
        log().warning("--token makes the token visible to every user of this machine in the "
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


def add_mcp_addresses(parser: argparse.ArgumentParser) -> None:
    """Where MCP servers may be reached (:mod:`toolmesh.mcp.addresses`): read by the gateway
    (when an mcp item is put) and the mcp-tool service (when it connects)."""
    from toolmesh.config import mcp_addresses as addresses

    parser.add_argument(addresses.ALLOW_FLAG, dest="mcp_allow", action="append",
                        metavar="ADDR[,ADDR...]", default=_env_list(addresses.ALLOW_ENV),
                        help="MCP server addresses every item may reach, private ones too: "
                             "10.0.0.0/8, 127.0.0.1:8000, [::1]:8000 or a host name; repeat "
                             f"for more (env {addresses.ALLOW_ENV}; default: none: private, "
                             "loopback and link-local addresses only for items the admin put)")
    parser.add_argument(addresses.DENY_FLAG, dest="mcp_deny", action="append",
                        metavar="ADDR[,ADDR...]", default=_env_list(addresses.DENY_ENV),
                        help="MCP server addresses no item may reach, the admin's neither "
                             f"(same forms; env {addresses.DENY_ENV}; default: none)")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    """A logging level name, any case: the flag's type (a bad one is a usage error, not a
    traceback from the logging module)."""
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return text.upper()


def add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", type=log_level,
                        default=os.environ.get("TOOLMESH_LOG_LEVEL", "INFO"),
                        help="how much to log: DEBUG, INFO, WARNING, ERROR "
                             "(env TOOLMESH_LOG_LEVEL; default: %(default)s)")


def port_number(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535: the type of port flags."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)")
    return port


def add_metrics(parser: argparse.ArgumentParser) -> None:
    """``--metrics-port`` and ``--metrics-host``: Prometheus metrics on a port of their own."""
    env = os.environ.get
    parser.add_argument("--metrics-port", type=port_number, metavar="PORT",
                        default=env("TOOLMESH_METRICS_PORT") or None,
                        help="serve Prometheus metrics at http://HOST:PORT/metrics, without a "
                             "token on loopback (see --metrics-token-file; env "
                             "TOOLMESH_METRICS_PORT; default: off; the gateway serves them at "
                             "/metrics on its own port too)")
    parser.add_argument("--metrics-host", metavar="HOST",
                        default=env("TOOLMESH_METRICS_HOST", "127.0.0.1"),
                        help="the address --metrics-port listens on (env TOOLMESH_METRICS_HOST; "
                             "default: %(default)s; beyond loopback it needs a metrics token)")
    parser.add_argument("--metrics-token-file", metavar="PATH",
                        default=env("TOOLMESH_METRICS_TOKEN_FILE"),
                        help="read the bearer token scrapers of --metrics-port must send from "
                             "this file (env TOOLMESH_METRICS_TOKEN_FILE, or the token itself in "
                             "TOOLMESH_METRICS_TOKEN; default: none, loopback only)")


def metrics_token(args: argparse.Namespace) -> str | None:
    """The token scrapers of ``--metrics-port`` must send, if one is set."""
    path = getattr(args, "metrics_token_file", None)
    if path:
        return read_secret_file(path, "--metrics-token-file")
    return os.environ.get("TOOLMESH_METRICS_TOKEN") or None


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
    add_llm_sampling(parser)


def llm_api_key(args: argparse.Namespace) -> str | None:
    """The API key from ``--api-key`` or ``--api-key-file``; ``None``: the environment's."""
    if args.api_key:
        log().warning("--api-key makes the key visible to every user of this machine in the "
                      "process list; prefer TOOLMESH_LLM_API_KEY or --api-key-file")
        return args.api_key
    if args.api_key_file:
        return read_secret_file(args.api_key_file, "--api-key-file")
    return None


def add_agent(parser: argparse.ArgumentParser) -> None:
    from toolmesh.cli.choice_options import add_choice

    add_bounds(parser, AGENT_BOUNDS)
    add_choice(parser)
    add_step_temperature(parser)
    add_dialogs(parser)
    add_approval(parser)


def add_approval(parser: argparse.ArgumentParser) -> None:
    """The operator's default approval policy: the agent's, and the gateway's for its direct
    routes (give both the same; ``toolmesh serve`` does)."""
    approval = os.environ.get("TOOLMESH_APPROVAL", "never")
    parser.add_argument("--approval", choices=APPROVAL_CHOICES,
                        default=approval if approval in APPROVAL_CHOICES else "never",
                        help="whether calls of tools that set no approval policy (nor their "
                             "MCP server, nor its annotations) wait for a person to approve "
                             "them (env TOOLMESH_APPROVAL; default: %(default)s)")


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
        return value
    return parse


def add_dialogs(parser: argparse.ArgumentParser) -> None:
    """Where the agent records its dialogs (docs/dialogs.md), and for how long."""
    parser.add_argument("--dialogs", default=os.environ.get("TOOLMESH_DIALOGS"), metavar="URL",
                        help="record dialogs in this database: sqlite:///path/file.db or "
                             "postgresql://user@host/db (replicas of the agent must share "
                             "one), or 'off' (env TOOLMESH_DIALOGS; default: the config "
                             "store's database, TOOLMESH_CONFIG_STORE or config.db in "
                             "$TOOLMESH_DATA_DIR or ~/.toolmesh)")
    parser.add_argument("--dialogs-keep", type=_positive(int), metavar="N",
                        default=int(os.environ.get("TOOLMESH_DIALOGS_KEEP", "10000")),
                        help="keep the newest N dialogs, and every running one (env "
                             "TOOLMESH_DIALOGS_KEEP; "
                             "default: %(default)s)")
    parser.add_argument("--dialogs-days", type=_positive(float), metavar="DAYS",
                        default=float(os.environ.get("TOOLMESH_DIALOGS_DAYS", "30")),
                        help="drop finished dialogs older than this (env "
                             "TOOLMESH_DIALOGS_DAYS; default: %(default)g)")
    # the default as text: argparse checks it only when the flag is not given, with a message
    # that names the variable too
    parser.add_argument("--dialogs-max-bytes", type=_dialog_bytes, metavar="BYTES",
                        default=os.environ.get("TOOLMESH_DIALOGS_MAX_BYTES")
                        or str(DIALOGS_MAX_BYTES),
                        help="bytes the journal may take (in SQLite: its file's pages in use); "
                             "beyond, the oldest finished dialogs are dropped, never running "
                             "ones; 0: no bound (env TOOLMESH_DIALOGS_MAX_BYTES; default: "
                             f"{DIALOGS_MAX_BYTES} = {DIALOGS_MAX_BYTES // MiB} MiB)")


#: the default of ``--dialogs-max-bytes`` (toolmesh.dialogs.DEFAULT_MAX_BYTES: every command
#: builds its parser, and the dialogs package is not for commands that do not run an agent)
DIALOGS_MAX_BYTES = 256 * MiB


def _dialog_bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes, 0 or more "
                                         "(--dialogs-max-bytes, or TOOLMESH_DIALOGS_MAX_BYTES)")
    return value


def dialogs_url(args: argparse.Namespace) -> str | None:
    """The dialog journal's URL (``None``: ``--dialogs off``)."""
    url = args.dialogs or getattr(args, "config_store", None) or os.environ.get(
        "TOOLMESH_CONFIG_STORE") or str(data_dir() / "config.db")
    return None if url.strip().lower() == "off" else url


def step_temperature(text: str) -> float | None:
    """``--step-temperature``'s type: a temperature, or ``server`` (the server's default)."""
    if text.strip().lower() == "server":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a temperature (0 or more) nor "
                                         "'server'")
    return value


def add_step_temperature(parser: argparse.ArgumentParser) -> None:
    """``--step-temperature``: the temperature of the agent's steps."""
    parser.add_argument("--step-temperature", type=step_temperature, dest="temperature_of_steps",
                        metavar="T",
                        default=step_temperature(os.environ.get("TOOLMESH_STEP_TEMPERATURE",
                                                                "0")),
                        help="the temperature the agent's steps are asked at, or 'server' for "
                             "the server's default (env TOOLMESH_STEP_TEMPERATURE; default: 0, "
                             "so that the choice of a tool is not a roll of the dice)")


def add_tool_calling(parser: argparse.ArgumentParser) -> None:
    """``--tool-calling``: how agents ask the LLM for tool calls."""
    default = os.environ.get("TOOLMESH_TOOL_CALLING", "auto")
    parser.add_argument("--tool-calling", choices=TOOL_CALLING_CHOICES,
                        default=default if default in TOOL_CALLING_CHOICES else "auto",
                        help="how the agent gets tool calls out of the LLM: native (OpenAI "
                             "tools), json (one schema-constrained JSON object per step), "
                             "react (TrustGraph's text protocol), or auto: detect what the LLM "
                             "supports, in that order (env TOOLMESH_TOOL_CALLING; "
                             "default: %(default)s)")


def add_llm_sampling(parser: argparse.ArgumentParser) -> None:
    """``--temperature``: how the LLM samples (the server's default when not given)."""
    value = os.environ.get("TOOLMESH_LLM_TEMPERATURE")
    parser.add_argument("--temperature", type=float, default=float(value) if value else None,
                        help="the LLM's sampling temperature (env TOOLMESH_LLM_TEMPERATURE; "
                             "default: the server's)")
    parser.add_argument("--llm-server", choices=LLM_SERVERS,
                        default=os.environ.get("TOOLMESH_LLM_SERVER") or None,
                        help="which OpenAI-compatible server --llm is, for its quirks "
                             "(docs/tool-calling.md); default: recognised from its /models "
                             "(env TOOLMESH_LLM_SERVER)")


def add_streaming(parser: argparse.ArgumentParser) -> None:
    """How the text-completion service and the agent gather a stream's pieces."""
    add_bounds(parser, STREAM_BOUNDS)


def add_lifecycle(parser: argparse.ArgumentParser) -> None:
    """How a process stops, and which flow its agent or mcp-tool service serves."""
    DRAIN_TIMEOUT.add_to(parser)
    add_flow(parser)


def add_flow(parser: argparse.ArgumentParser) -> None:
    """The flow an agent or mcp-tool service serves."""
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


def add_announcements(parser: argparse.ArgumentParser, *, what: str) -> None:
    """``--no-announcements``: the process takes no part in self-announcing tool services
    (docs/announcements.md); ``what`` says what that means for this part."""
    parser.add_argument("--no-announcements", action="store_true",
                        default=os.environ.get("TOOLMESH_NO_ANNOUNCEMENTS", "") not in ("", "0"),
                        help=f"{what} (env TOOLMESH_NO_ANNOUNCEMENTS=1)")


def add_announcing(parser: argparse.ArgumentParser) -> None:
    """Where and how a tool service announces itself."""
    from toolmesh.registry.wire import DEFAULT_TTL, MAX_TTL, MIN_TTL

    env = os.environ.get
    parser.add_argument("-w", "--workspace", default=env("TOOLMESH_SERVICE_WORKSPACE", "default"),
                        help="the workspace whose agents offer its tools while it runs "
                             "(env TOOLMESH_SERVICE_WORKSPACE; default: %(default)s)")
    parser.add_argument("--announce-ttl", type=float, metavar="SECONDS",
                        # a string default goes through `type`: a bad env value is a
                        # usage error, not a crash while the parser is built
                        default=env("TOOLMESH_ANNOUNCE_TTL", f"{DEFAULT_TTL:g}"),
                        help=f"seconds agents keep offering its tools after its last heartbeat "
                             f"(it beats every third; {MIN_TTL:g} to {MAX_TTL:g}; env "
                             "TOOLMESH_ANNOUNCE_TTL; default: %(default)s)")
    add_announcements(parser, what="do not announce: agents offer its tools only through "
                                    "config items (toolmesh tool-service register)")
