"""Deduplication, rank fusion and the total order (REQ-RANK-001, -004 to -007).

Observations are merged by comparison key; each merged result is scored by reciprocal rank
fusion, summed exactly with `fractions.Fraction` so that no arrival order can change a
digit; the final order is total: score, best rank, engine preference, comparison key.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "FUSION_K",
    "MergedResult",
    "Observation",
    "fusion_score",
    "merge_and_rank",
]

FUSION_K = 60  # the constant of reciprocal rank fusion (RFC 008)


@attrs.frozen(kw_only=True)
class Observation:
    """One engine's result: which engine, at which rank (1 first), and what it said."""

    engine: str
    preference: int  # the engine's configured preference; lower is preferred
    order: int  # the engine's place in the selection order, which breaks a tie of preference
    rank: int
    url: str  # the returned URL (REQ-RANK-003)
    key: str  # the comparison key (REQ-RANK-002)
    https: bool
    title: str
    snippet: str
    date: str | None
    decoded: bool


@attrs.frozen(kw_only=True)
class MergedResult:
    """The canonical result (REQ-RANK-001): URL, key, text, date and the observations."""

    key: str
    url: str
    title: str
    snippet: str
    date: str | None
    decoded: bool
    observations: tuple[Observation, ...]  # best first: rank, preference, selection order
    score: Fraction
    best_rank: int
    best_preference: int

    @property
    def engines(self) -> tuple[str, ...]:
        """The engines that returned this result, in selection order, each once."""
        places = {obs.engine: (obs.preference, obs.order, obs.engine) for obs in self.observations}
        return tuple(sorted(places, key=lambda e: places[e]))


def _order(obs: Observation) -> tuple[int, int, int, str]:
    # REQ-RANK-004: the best rank, then the engine preference; engines of equal preference
    # keep the selection order (configuration order), and the id makes the order total.
    return (obs.rank, obs.preference, obs.order, obs.engine)


def fusion_score(observations: Iterable[Observation]) -> Fraction:
    """Σ 1 / (K + rank) over the engines that returned the result, each engine once at its
    best rank; exact, so the sum does not depend on the order of its terms."""
    best: dict[str, int] = {}
    for obs in observations:
        if obs.engine not in best or obs.rank < best[obs.engine]:
            best[obs.engine] = obs.rank
    if len(best) == 1:
        # One engine (most results): its one term, without summing from zero.
        (rank,) = best.values()
        return Fraction(1, FUSION_K + rank)
    total = Fraction(0)
    for engine in sorted(best):
        total += Fraction(1, FUSION_K + best[engine])
    return total


def _merge(key: str, group: Sequence[Observation]) -> MergedResult:
    ordered = tuple(sorted(group, key=_order))
    best = ordered[0]
    shown = best
    if not best.https:
        # REQ-RANK-004: when http and https observations merge and the best is http,
        # the best-ranked https URL is shown.
        shown = next((o for o in ordered if o.https), best)
    # The best observation's date, else the best-ranked one that has a date.
    date = next((o.date for o in ordered if o.date is not None), None)
    return MergedResult(
        key=key,
        url=shown.url,
        title=best.title,
        snippet=best.snippet,
        date=date,
        decoded=best.decoded,
        observations=ordered,
        score=fusion_score(ordered),
        best_rank=best.rank,
        best_preference=best.preference,
    )


def merge_and_rank(observations: Iterable[Observation]) -> list[MergedResult]:
    """Merge observations with equal keys and sort them by the total order of REQ-RANK-006.

    The result does not depend on the order of `observations`: groups are keyed, each
    group is sorted on (rank, preference), and the final sort key is total.
    """
    groups: dict[str, list[Observation]] = {}
    for obs in observations:
        groups.setdefault(obs.key, []).append(obs)
    merged = [_merge(key, group) for key, group in groups.items()]
    merged.sort(key=lambda r: (-r.score, r.best_rank, r.best_preference, r.key))
    return merged
