"""Self-announcing tool services: the sending side (:mod:`~toolmesh.registry.announcer`), the
live registry (:mod:`~toolmesh.registry.registry`), how configured and announced items combine
(:mod:`~toolmesh.registry.merge`) and the wire (:mod:`~toolmesh.registry.wire`,
docs/announcements.md).

Nothing is imported here: the CLI reads the wire's constants to build its parser, and must not
load asyncio and the bus for that.
"""
