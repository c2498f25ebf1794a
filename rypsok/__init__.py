"""rypsok: a headless meta-search service for AI agents.

The public surface is this module's `__all__`: the facade `Rypsok`, its configuration
`Config`, and the model types of requests, responses, notices and errors. Everything else
lives in private or internal modules and may change before 1.0.0.
"""

__version__ = "0.10.0"

# The version is set before the imports: the engines' client reads it for the User-Agent.
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
