"""rypsok: a headless meta-search service for AI agents.

The public surface is this module's `__all__`: the facade `Rypsok`, its configuration
`Config`, and the model types of requests, responses, notices and errors. Everything else
lives in private or internal modules and may change before 1.0.0.
"""

from typing import TYPE_CHECKING

from rypsok.shared.lazy import lazy_attributes
from rypsok.shared.version import __version__

if TYPE_CHECKING:
    from rypsok.config.schema import Config
    from rypsok.core.model import (
        CallError,
        Category,
        DetailReason,
        DisabledReason,
        EngineState,
        EngineStatus,
        ErrorDetail,
        ErrorKind,
        FetchRequest,
        FetchResponse,
        Notice,
        NoticeCode,
        Outcome,
        Reason,
        SafeSearch,
        SearchRequest,
        SearchResponse,
        SearchResult,
        SecretKind,
        StatusResponse,
        TimeRange,
        ToolError,
    )
    from rypsok.core.services import Rypsok

# The names are imported on first use, so that `import rypsok` (and the command line's entry,
# which must install its SIGTERM handler first) stays cheap.
_HOMES: dict[str, str] = {
    "Config": "rypsok.config.schema",
    "Rypsok": "rypsok.core.services",
    "CallError": "rypsok.core.model",
    "Category": "rypsok.core.model",
    "DetailReason": "rypsok.core.model",
    "DisabledReason": "rypsok.core.model",
    "EngineState": "rypsok.core.model",
    "EngineStatus": "rypsok.core.model",
    "ErrorDetail": "rypsok.core.model",
    "ErrorKind": "rypsok.core.model",
    "FetchRequest": "rypsok.core.model",
    "FetchResponse": "rypsok.core.model",
    "Notice": "rypsok.core.model",
    "NoticeCode": "rypsok.core.model",
    "Outcome": "rypsok.core.model",
    "Reason": "rypsok.core.model",
    "SafeSearch": "rypsok.core.model",
    "SearchRequest": "rypsok.core.model",
    "SearchResponse": "rypsok.core.model",
    "SearchResult": "rypsok.core.model",
    "SecretKind": "rypsok.core.model",
    "StatusResponse": "rypsok.core.model",
    "TimeRange": "rypsok.core.model",
    "ToolError": "rypsok.core.model",
}

__getattr__ = lazy_attributes(__name__, _HOMES)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CallError",
    "Category",
    "Config",
    "DetailReason",
    "DisabledReason",
    "EngineState",
    "EngineStatus",
    "ErrorDetail",
    "ErrorKind",
    "FetchRequest",
    "FetchResponse",
    "Notice",
    "NoticeCode",
    "Outcome",
    "Reason",
    "Rypsok",
    "SafeSearch",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "SecretKind",
    "StatusResponse",
    "TimeRange",
    "ToolError",
    "__version__",
]
