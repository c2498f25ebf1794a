"""The public surface (REQ-ARCH-007): `rypsok.__all__` is pinned, and every name resolves."""

from __future__ import annotations

import subprocess
import sys

import rypsok

PUBLIC = [
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


def test_req_arch_007_the_public_surface_is_pinned() -> None:
    # A change here is a change of the public interface: review it as one.
    assert sorted(rypsok.__all__) == sorted(PUBLIC)
    assert len(set(rypsok.__all__)) == len(rypsok.__all__)


def test_req_arch_007_every_public_name_resolves_to_its_core_object() -> None:
    from rypsok.core import model, services

    for name in PUBLIC:
        assert hasattr(rypsok, name), name
    assert rypsok.Rypsok is services.Rypsok
    assert rypsok.SearchRequest is model.SearchRequest
    assert rypsok.ToolError is model.ToolError
    assert rypsok.__version__ == "0.10.0"


def test_req_arch_005_importing_the_facade_loads_no_protocol_layer() -> None:
    code = (
        "import sys, rypsok; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('hypercorn', 'h2', 'mcp') "
        "or m.startswith(('rypsok.mcp', 'rypsok.cli'))]; "
        "print(','.join(sorted(bad)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
