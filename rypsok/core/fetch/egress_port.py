"""What the fetch pipeline needs of the egress component: a client whose every connection is
judged at connect time, and the judgment of a URL before any connection (the agent profile).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import httpx

from rypsok.core.fetch.pipeline import UrlJudge

if TYPE_CHECKING:
    from rypsok.config.schema import Config

__all__ = ["FetchEgress", "build_fetch_egress"]


@attrs.frozen(kw_only=True)
class FetchEgress:
    client: httpx.AsyncClient
    judge: UrlJudge


def build_fetch_egress(config: Config) -> FetchEgress:
    raise NotImplementedError("joins with the egress component")
