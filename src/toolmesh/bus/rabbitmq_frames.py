"""AMQP 0-9-1 frames the RabbitMQ bus marshals itself, on every publish and acknowledgement:
the bytes pamqp writes for the same frames, a good deal faster (tests/bus/test_rabbitmq_publishing.py
compares them)."""

from __future__ import annotations

import struct
from collections.abc import Mapping

import pamqp.frame
from pamqp import commands as spec
from pamqp.header import ContentHeader

#: AMQP frame types and the frame end octet (AMQP 0-9-1, 4.2.3)
METHOD, BODY, FRAME_END = 1, 3, b"\xce"
#: a method frame settling one delivery: type, channel, size 13, class 60 (basic), method,
#: delivery tag, flags
_SETTLE = struct.Struct(">BHIHHQB")
ACK, REJECT = 80, 90
BODY_HEADER = struct.Struct(">BHI")


def settle_frame(channel: int, method: int, delivery_tag: int, flags: int) -> bytes:
    return _SETTLE.pack(METHOD, channel, 13, 60, method, delivery_tag, flags) + FRAME_END


#: a content header frame's start (type 2, channel, size) and its fixed fields (class 60,
#: weight 0, body size, property flags)
_HEADER_FRAME = struct.Struct(">BHI")
_HEADER_FIELDS = struct.Struct(">HHQH")
_LONG = struct.Struct(">I")
#: property flags: content-type, headers, delivery-mode, message-id
_HAS_CONTENT_TYPE, _HAS_HEADERS, _HAS_DELIVERY_MODE, _HAS_MESSAGE_ID = 0x8000, 0x2000, 0x1000, 0x80
_CONTENT_TYPE = b"\x10application/json"


def content_header(channel: int, body_size: int, headers: Mapping[str, str] | None,
                   delivery_mode: int, message_id: str | None = None) -> bytes:
    """The content header frame of a toolmesh message, marshalled: JSON, ``headers`` (string
    values), ``delivery_mode``, and ``message_id`` if given — the bytes pamqp writes for the
    same properties, a good deal faster (it is on every publish)."""
    flags = _HAS_CONTENT_TYPE | _HAS_DELIVERY_MODE
    parts = [b"", _CONTENT_TYPE]
    if headers:
        items: list[bytes] = []
        for key, value in sorted(headers.items()):
            name = key.encode()
            if len(name) > 128:  # pamqp truncates long names (with a warning): let it
                return pamqp.frame.marshal(ContentHeader(body_size=body_size, properties=(
                    spec.Basic.Properties(content_type="application/json", headers=dict(headers),
                                          delivery_mode=delivery_mode, message_id=message_id))),
                    channel)
            text = value.encode()
            items += (bytes((len(name),)), name, b"S", _LONG.pack(len(text)), text)
        table = b"".join(items)
        parts += (_LONG.pack(len(table)), table)
        flags |= _HAS_HEADERS
    parts.append(bytes((delivery_mode,)))
    if message_id is not None:
        mid = message_id.encode()
        parts += (bytes((len(mid),)), mid)
        flags |= _HAS_MESSAGE_ID
    parts[0] = _HEADER_FIELDS.pack(60, 0, body_size, flags)
    payload = b"".join(parts)
    return _HEADER_FRAME.pack(2, channel, len(payload)) + payload + FRAME_END
