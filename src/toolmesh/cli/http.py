"""A small synchronous client of the gateway's REST API, for the command-line tools.

Synchronous on purpose: a CLI makes one or two calls, and urllib starts faster than an
event loop with an HTTP client library.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from toolmesh.errors import ToolmeshError
from toolmesh.schema.json_object import json_object
from toolmesh.unreachable import gateway_unreachable
from toolmesh.urls import mask_url

if TYPE_CHECKING:
    import urllib.error

# urllib.request is imported by the first call, not here: it brings ssl, http.client and the
# email package (~20 ms), and every command imports this module, --help and --version too.

DEFAULT_URL = "http://localhost:8888/"


class CliError(ToolmeshError):
    """Ends a command with a one-line message and a non-zero exit status."""

    type = "cli-error"


def default_url() -> str:
    return os.environ.get("TOOLMESH_URL") or os.environ.get("TRUSTGRAPH_URL") or DEFAULT_URL


def default_token() -> str | None:
    """``TOOLMESH_TOKEN``, ``TRUSTGRAPH_TOKEN``, or the gateway's own ``TOOLMESH_GATEWAY_TOKEN``
    (so a CLI run beside the gateway — in its container, say — needs no extra setting)."""
    return (os.environ.get("TOOLMESH_TOKEN") or os.environ.get("TRUSTGRAPH_TOKEN")
            or os.environ.get("TOOLMESH_GATEWAY_TOKEN") or None)


#: seconds the CLI waits beyond the deadline it asked for, so the gateway's 504 (which says
#: what to check) arrives before the CLI gives up on its own
MARGIN = 5.0


class GatewayClient:
    """POSTs JSON to the gateway; raises :class:`CliError` with a readable reason.

    Each call asks the gateway for a deadline (``X-Timeout``): ``timeout`` when given, else the
    gateway's default for the service the path names — the same figures, so a service that
    does not answer ends the command with the gateway's one-line hint, in seconds not minutes.
    """

    def __init__(self, url: str | None = None, *, token: str | None = None,
                 timeout: float | None = None) -> None:
        self.url = (url or default_url()).rstrip("/") + "/"
        self.token = token if token is not None else default_token()
        self.timeout = timeout

    def deadline(self, path: str) -> float:
        """The seconds a call to ``path`` asks the gateway for."""
        if self.timeout is not None:
            return self.timeout
        from toolmesh.gateway.deadlines import Deadlines

        return Deadlines().of(path.rstrip("/").rsplit("/", 1)[-1])

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import urllib.error
        import urllib.request

        deadline = self.deadline(path)
        request = urllib.request.Request(
            self.url + path.lstrip("/"), data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "X-Timeout": f"{deadline:g}",
                     **({"Authorization": f"Bearer {self.token}"} if self.token else {})})
        try:
            with urllib.request.urlopen(request, timeout=deadline + MARGIN) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            raise CliError(self._http_error(e)) from None
        except urllib.error.URLError as e:
            raise CliError(gateway_unreachable(self.url, e.reason)) from None
        except TimeoutError:
            raise CliError(f"the gateway at {self.url} did not answer within "
                           f"{deadline + MARGIN:g} s: is it `toolmesh serve` (or `toolmesh run "
                           "gateway`) that listens there?") from None
        except OSError as e:
            raise CliError(f"the gateway at {self.url} did not answer: {e}") from None
        try:
            result = json.loads(raw)
        except json.JSONDecodeError:
            raise CliError(f"the gateway at {self.url} answered something that is not JSON") from None
        if not isinstance(result, dict):
            raise CliError(f"the gateway at {self.url} answered a JSON {type(result).__name__}")
        error = result.get("error")
        if error:
            raise CliError(_describe(error))
        return result

    def _http_error(self, e: urllib.error.HTTPError) -> str:
        try:
            error = json.loads(e.read()).get("error")
        except (json.JSONDecodeError, AttributeError, OSError):
            error = None
        if e.code == 401:
            return (f"the gateway at {self.url} refused the request (401): "
                    + ("the token is wrong" if self.token else "it needs a token (--token or "
                       "TOOLMESH_TOKEN)"))
        return f"gateway error {e.code}: {_describe(error) if error else e.reason}"


def _describe(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('message', '')}"
    return str(error)


def json_flag(text: str | None, flag: str) -> dict[str, Any]:
    """A command-line flag holding one JSON object (``{}`` when not given)."""
    try:
        return json_object(text, name=flag)
    except ValueError as e:
        raise CliError(str(e)) from None
