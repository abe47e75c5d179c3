"""A TCP proxy that can be stopped and started again on the same port: to a client behind it,
the broker goes away and comes back, while the real (shared) broker is never touched."""

from __future__ import annotations

import asyncio


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:target_port``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0  # chosen by the first start, kept by the later ones
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Refuse new connections and cut the open ones, as a broker that dies does."""
        assert self._server is not None
        self._server.close()
        for writer in list(self._links):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1",
                                                                      self.target_port)
        except OSError:
            writer.transport.abort()
            return
        links = {writer, upstream}
        self._links |= links
        try:
            await asyncio.gather(_pipe(reader, upstream), _pipe(upstream_reader, writer))
        finally:
            self._links -= links


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.transport.abort()  # one side gone: so is the other
