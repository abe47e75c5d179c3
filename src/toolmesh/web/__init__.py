"""The Workbench: a web UI for the agent's tools, served by the gateway.

It is a static page — HTML, one stylesheet and plain ES modules, no build step — that talks
to the same ``/api/v1`` (REST and WebSocket) as the CLI and TrustGraph's clients, with the
token the user logs in with. The gateway serves the files (:mod:`toolmesh.web.routes`) and
nothing else: there is no server-side session, no private route, and every request the page
makes is admitted, scoped and masked exactly like anyone else's (docs/workbench.md).
"""

from toolmesh.web.routes import WORKBENCH_PATH, add_workbench, is_page_path

__all__ = ["WORKBENCH_PATH", "add_workbench", "is_page_path"]
