"""The sans-I/O MCP layer: JSON-RPC messages, the two eras, the method table, the tools.

No Trio and no sockets here: the transports (`rypsok.mcp.stdio`, later HTTP) feed it parsed
lines and carry out what it returns.
"""

from rypsok.mcp.protocol.dispatch import Call, Cancel, Dispatcher, Nothing, Reply
from rypsok.mcp.protocol.tools import StatusCall, ToolSet, build_toolset, definition_budget

__all__ = [
    "Call",
    "Cancel",
    "Dispatcher",
    "Nothing",
    "Reply",
    "StatusCall",
    "ToolSet",
    "build_toolset",
    "definition_budget",
]
