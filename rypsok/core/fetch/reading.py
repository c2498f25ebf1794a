"""The extraction step as the pipeline calls it: the extractor of rypsok.core.fetch.extract
under the document bounds, its "nothing" mapped to None (unsupported_content)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rypsok.core.fetch.extract import (
    DocumentKind,
    DocumentText,
    ExtractionOutcome,
    extract_document,
)
from rypsok.core.fetch.pipeline import Extracted
from rypsok.core.parsing import MAX_DEPTH, MAX_NODES

if TYPE_CHECKING:
    from rypsok.core.fetch.content import Kind

__all__ = ["MAX_DEPTH", "MAX_NODES", "extract"]


def extract(document: DocumentText | str, kind: Kind, base_url: str) -> Extracted | None:
    extraction = extract_document(
        document, DocumentKind(kind.value), base_url, max_nodes=MAX_NODES, max_depth=MAX_DEPTH
    )
    if extraction.outcome is ExtractionOutcome.NOTHING:
        return None
    return Extracted(
        title=extraction.title or "", markdown=extraction.content, partial=extraction.partial
    )
