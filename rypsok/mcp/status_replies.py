"""engine_status's answer over HTTP, encoded once for each content it has: the status is
asked far more often than it changes, and its JSON is the same for every call but the id.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from rypsok.mcp.protocol import jsonrpc

if TYPE_CHECKING:
    from rypsok.core.model import StatusResponse
    from rypsok.mcp.protocol import Call, Dispatcher

__all__ = ["StatusReplies"]


class StatusReplies:
    """engine_status's answer, encoded once for each content it has.

    The answer is a function of the `StatusResponse` (a frozen value: each engine's state,
    median latency and reason) and of the revision alone: every dispatcher of the app is made
    from the same configuration. So the last encoding is kept with the value it was made
    from and used again while the core hands out an equal one; any change of an engine's
    state or latency makes an unequal value, which is encoded afresh. Only the JSON-RPC id
    differs between calls: it is written around the kept `result`, in the order
    `jsonrpc.result_response` gives the members.
    """

    __slots__ = ("_key", "_result")

    def __init__(self) -> None:
        self._key: tuple[StatusResponse, str] | None = None
        self._result = b""

    def encode(self, dispatcher: Dispatcher, call: Call, response: StatusResponse) -> bytes:
        key = (response, call.revision)
        if key != self._key:
            reply = dispatcher.render_response(call, response.to_json())
            self._result = jsonrpc.encode(reply["result"])[:-1]  # without the newline
            self._key = key
        head = (_REPLY_HEAD, _id_json(call.request_id), _REPLY_RESULT, self._result, b"}\n")
        return b"".join(head)


_REPLY_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_REPLY_RESULT: Final = b',"result":'


def _id_json(request_id: jsonrpc.RequestId) -> bytes:
    """A JSON-RPC id as `jsonrpc.encode` writes it (an int, or a string kept in UTF-8)."""
    if isinstance(request_id, int):
        return b"%d" % request_id
    return json.dumps(request_id, ensure_ascii=False).encode("utf-8")
