"""What every transport does with a tool call: run it on the service and render its outcome.

The service is the core's `Rypsok` facade; this module only needs the part of it named by
`ToolService`, so tests can hand in a fake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from rypsok import __version__
from rypsok.config.tooling import tool_settings
from rypsok.core import telemetry
from rypsok.core.model import (
    FetchRequest,
    FetchResponse,
    SearchRequest,
    SearchResponse,
    StatusResponse,
    ToolError,
)
from rypsok.mcp.protocol import Call, Dispatcher, build_toolset

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rypsok.config.schema import Config

__all__ = ["ToolService", "execute", "make_dispatcher", "outcome"]


class ToolService(Protocol):
    """What a transport needs of the service: the two calls, and the view of the
    configuration that shapes the tools (the categories it serves, the languages it offers)."""

    @property
    def served_categories(self) -> Sequence[str]: ...

    @property
    def languages(self) -> Sequence[str]: ...

    async def search_as(
        self, caller: str, request: SearchRequest, *, received_at: float | None = None
    ) -> SearchResponse: ...

    async def fetch_as(
        self, caller: str, request: FetchRequest, *, received_at: float | None = None
    ) -> FetchResponse: ...

    async def status_as(self, caller: str) -> StatusResponse: ...


def make_dispatcher(service: ToolService, config: Config) -> Dispatcher:
    """The protocol state for one process (stdio) or session."""
    toolset = build_toolset(
        tool_settings(
            config,
            [str(c) for c in service.served_categories],
            [str(language) for language in service.languages],
        )
    )
    return Dispatcher(
        toolset,
        legacy_enabled=config.service.http.legacy_revisions,
        structured_content=config.service.structured_content,
        server_version=__version__,
    )


async def outcome(
    service: ToolService,
    dispatcher: Dispatcher,
    call: Call,
    caller: str,
    *,
    received_at: float | None = None,
) -> SearchResponse | FetchResponse | StatusResponse | dict[str, Any]:
    """The call's response, or the error reply that answers it instead. Cancellation passes
    through: a cancelled call has no reply. `received_at` (Trio's clock) is when the
    transport read the call, from which its deadlines count."""
    try:
        if isinstance(call.request, SearchRequest):
            return await service.search_as(caller, call.request, received_at=received_at)
        if isinstance(call.request, FetchRequest):
            return await service.fetch_as(caller, call.request, received_at=received_at)
        return await service.status_as(caller)
    except ToolError as error:
        return dispatcher.render_error(call.request_id, call.revision, error)
    except Exception as exc:
        # A defect inside the call: logged (type and place only), answered without detail,
        # and the process serves on.
        telemetry.log_exception("call_failed", exc, tool=call.tool)
        return dispatcher.render_crash(call)


async def execute(
    service: ToolService,
    dispatcher: Dispatcher,
    call: Call,
    caller: str,
    *,
    received_at: float | None = None,
) -> dict[str, Any]:
    """The reply to a call. Cancellation passes through: a cancelled call has no reply."""
    response = await outcome(service, dispatcher, call, caller, received_at=received_at)
    if isinstance(response, dict):
        return response
    return dispatcher.render_response(call, response.to_json())
