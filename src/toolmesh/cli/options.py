"""Options shared by the commands that run services: flags with environment defaults."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

DEFAULT_BUS = "memory://"


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


def add_gateway(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default=os.environ.get("TOOLMESH_HOST", "127.0.0.1"),
                        help="gateway address (env TOOLMESH_HOST; default: %(default)s)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("TOOLMESH_PORT", "8888")),
                        help="gateway port (env TOOLMESH_PORT; default: %(default)s)")
    parser.add_argument("--token", default=os.environ.get("TOOLMESH_GATEWAY_TOKEN"),
                        help="require this bearer token (env TOOLMESH_GATEWAY_TOKEN)")
    parser.add_argument("--max-body", type=int, default=16 * 1024 * 1024,
                        help="largest request body in bytes (default: %(default)s)")


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
                        help="API key (better: env TOOLMESH_LLM_API_KEY or OPENAI_API_KEY)")


def add_agent(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-iterations", type=int,
                        default=int(os.environ.get("TOOLMESH_MAX_ITERATIONS", "10")),
                        help="ReAct steps before the agent gives up (default: %(default)s)")
    parser.add_argument("--tool-timeout", type=float,
                        default=float(os.environ.get("TOOLMESH_TOOL_TIMEOUT", "120")),
                        help="seconds a tool may take (default: %(default)s)")
