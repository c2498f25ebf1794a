"""Telemetry: JSON log lines on stderr, the per-call context, secrets, refusal counters.

Every name other modules use is re-exported here; the implementation lives in the private
modules beside this one.
"""

from ._aggregate import AggregatedLines
from ._context import (
    LOCAL_CALLER,
    CallContext,
    call_scope,
    current_call,
    current_caller,
    current_request_id,
    new_request_id,
)
from ._counters import (
    CALL_BUCKETS_S,
    COUNTERS,
    ENGINE_BUCKETS_S,
    Activity,
    Counters,
    CountersSnapshot,
    Durations,
    run_counters_reporter,
)
from ._hooks import install_excepthook
from ._log import (
    LEVELS,
    TOOL_REFUSALS,
    configure,
    debug,
    error,
    exception_fields,
    info,
    is_enabled,
    log,
    log_exception,
    log_query,
    warn,
)
from ._secret import REDACTED, Secret

__all__ = [
    "CALL_BUCKETS_S",
    "COUNTERS",
    "ENGINE_BUCKETS_S",
    "LEVELS",
    "LOCAL_CALLER",
    "REDACTED",
    "TOOL_REFUSALS",
    "Activity",
    "AggregatedLines",
    "CallContext",
    "Counters",
    "CountersSnapshot",
    "Durations",
    "Secret",
    "call_scope",
    "configure",
    "current_call",
    "current_caller",
    "current_request_id",
    "debug",
    "error",
    "exception_fields",
    "info",
    "install_excepthook",
    "is_enabled",
    "log",
    "log_exception",
    "log_query",
    "new_request_id",
    "run_counters_reporter",
    "warn",
]
