"""h2's connection as the listener needs it: a new stream refused alone, and a stop that
loses no answer.

- A stream beyond LIM-H4 is refused alone (RFC 9113 §5.1.2: RST_STREAM REFUSED_STREAM)
  instead of the whole connection ended with PROTOCOL_ERROR, which loses the streams in
  flight.
- Once the shutdown has begun, a new stream is refused the same way (§8.7: REFUSED_STREAM
  tells the client the request was not processed and may be retried elsewhere), so that the
  streams in flight go on; hypercorn's own reset would carry NO_ERROR, which says nothing
  of the kind.
- hypercorn sends GOAWAY (`close_connection`) once the stopped connection's last stream
  is closed on its side, which can come before that stream's final END_STREAM frame has
  been queued by its sending task: h2 then refuses the END_STREAM, and the client loses the
  answer it had almost whole. The GOAWAY waits here until every answer's end is queued
  (`answering`), and goes out in the same chunk as the last; its last stream id is the last
  stream handed on to be processed, never a refused one (§6.8).
- `settled` says whether everything the connection has to say is on the wire: no answer
  unfinished, nothing queued in h2 and every chunk taken from it written (`sent`). The
  listener closes a stopped connection only then (or at the end of the shutdown's grace).

hypercorn makes a plain `H2Connection`; `adopt` changes its class to this one before the
first frame. The h2 internals this leans on are named by `tests/test_http_internals.py`.

Implements LIM-H4's refusal and REQ-OPS-002's stop over HTTP/2.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.stream
import hpack
import hyperframe.frame

if TYPE_CHECKING:
    from collections.abc import Callable

    _Answer = tuple[list[hyperframe.frame.Frame], list[h2.events.Event]]

__all__ = ["ListenerH2Connection", "adopt"]


# A client's stream in these states waits for more of its answer.
_ANSWERING: Final = frozenset(
    {h2.stream.StreamState.OPEN, h2.stream.StreamState.HALF_CLOSED_REMOTE}
)


def _never() -> bool:
    return False


class ListenerH2Connection(h2.connection.H2Connection):
    """h2's server connection with the listener's refusals and stop (the module's list)."""

    # Set by `adopt` (the class changes under an object h2 made, so no __init__ runs).
    stopping: Callable[[], bool] = _never
    last_processed = 0  # the highest stream handed on to hypercorn
    _goaway: tuple[int, bytes | None] | None = None  # a GOAWAY waiting for the streams
    _unsent: deque[bytes]

    def _receive_headers_frame(self, frame: hyperframe.frame.HeadersFrame) -> _Answer:
        stream_id = frame.stream_id
        new = stream_id % 2 == 1 and stream_id > self.highest_inbound_stream_id
        if new and self.stopping():
            return self._refuse(stream_id, frame)
        try:
            answer = super()._receive_headers_frame(frame)
        except h2.exceptions.TooManyStreamsError:
            if not new:
                raise  # not a new stream of the client's: h2's own verdict stands
            return self._refuse(stream_id, frame)
        if new:
            self.last_processed = stream_id
        return answer

    def _refuse(self, stream_id: int, frame: hyperframe.frame.HeadersFrame) -> _Answer:
        """RST_STREAM REFUSED_STREAM for a new stream, nothing of it handed on."""
        try:
            # Decoded and dropped: HPACK's table must follow every header block.
            self.decoder.decode(frame.data, raw=True)
        except hpack.HPACKError as exc:
            raise h2.exceptions.ProtocolError("undecodable header block") from exc
        self.highest_inbound_stream_id = stream_id
        self._closed_streams[stream_id] = h2.stream.StreamClosedBy.SEND_RST_STREAM
        reset = hyperframe.frame.RstStreamFrame(stream_id)
        reset.error_code = h2.errors.ErrorCodes.REFUSED_STREAM
        return [reset], []

    def close_connection(
        self,
        error_code: h2.errors.ErrorCodes | int = 0,
        additional_data: bytes | None = None,
        last_stream_id: int | None = None,
    ) -> None:
        if last_stream_id is None:
            last_stream_id = self.last_processed
        if error_code == h2.errors.ErrorCodes.NO_ERROR and self.answering:
            # A graceful close: after the streams still open have ended (`data_to_send`).
            self._goaway = (last_stream_id, additional_data)
            return
        self._goaway = None
        super().close_connection(error_code, additional_data, last_stream_id)

    def data_to_send(self, amount: int | None = None) -> bytes:
        # Every frame leaves through here: a waiting GOAWAY goes out after the frame that
        # ended the last open stream, in the same chunk.
        if self._goaway is not None and not self.answering:
            last_stream_id, additional_data = self._goaway
            self._goaway = None
            super().close_connection(0, additional_data, last_stream_id)
        data = super().data_to_send(amount)
        if data:
            self._unsent.append(data)
        return data

    def sent(self, data: object) -> None:
        """`data`, a chunk `data_to_send` gave, is written."""
        for index, chunk in enumerate(self._unsent):
            if chunk is data:
                del self._unsent[index]
                return

    @property
    def answering(self) -> bool:
        """Whether a stream of the client's has not had the end of its answer queued (a
        stream whose answer is whole and whose request body still comes is not)."""
        return any(
            stream_id % 2 == 1 and stream.state_machine.state in _ANSWERING
            for stream_id, stream in self.streams.items()
        )

    @property
    def settled(self) -> bool:
        """No answer unfinished, no GOAWAY waiting, and every frame queued written."""
        return (
            self._goaway is None
            and not self.answering
            and not self._data_to_send
            and not self._unsent
        )


def adopt(connection: h2.connection.H2Connection, stopping: Callable[[], bool]) -> None:
    """Make hypercorn's h2 connection a `ListenerH2Connection`; `stopping` says whether the
    shutdown has begun."""
    connection.__class__ = ListenerH2Connection
    assert isinstance(connection, ListenerH2Connection)
    connection.stopping = stopping
    connection._unsent = deque()
    # h2 dispatches frames through methods bound when it was made.
    table = connection._frame_dispatch_table
    table[hyperframe.frame.HeadersFrame] = connection._receive_headers_frame
