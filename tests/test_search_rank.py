"""Merging, rank fusion and the total order (REQ-RANK-001, -004, -005, -006)."""

from __future__ import annotations

import random
from fractions import Fraction

from rypsok.core.model import Reason
from rypsok.core.search.rank import FUSION_K, Observation, fusion_score, merge_and_rank
from rypsok.core.urls import normalize_url


def obs(
    engine: str,
    preference: int,
    rank: int,
    url: str,
    *,
    title: str = "",
    snippet: str = "",
    date: str | None = None,
) -> Observation:
    normalized = normalize_url(url)
    assert not isinstance(normalized, Reason)
    return Observation(
        engine=engine,
        preference=preference,
        order=preference,
        rank=rank,
        url=normalized.url,
        key=normalized.key,
        https=normalized.https,
        title=title or f"{engine} title {rank}",
        snippet=snippet or f"{engine} snippet {rank}",
        date=date,
        decoded=False,
    )


def test_req_rank_005_the_fusion_is_reciprocal_rank_with_k_60() -> None:
    assert FUSION_K == 60
    score = fusion_score(
        [obs("a", 0, 1, "https://x.example/"), obs("b", 1, 3, "https://x.example/")]
    )
    assert score == Fraction(1, 61) + Fraction(1, 63)


def test_req_rank_005_agreement_between_engines_is_rewarded() -> None:
    # A result two engines return at rank 3 beats one engine's first result.
    ranked = merge_and_rank(
        [
            obs("a", 0, 1, "https://alone.example/"),
            obs("a", 0, 3, "https://both.example/"),
            obs("b", 1, 3, "https://both.example/"),
        ]
    )
    assert [r.url for r in ranked] == ["https://both.example/", "https://alone.example/"]
    assert ranked[0].score == Fraction(2, 63)


def test_req_rank_005_an_engine_counts_once_per_result() -> None:
    # The same engine returned the page twice (http and https): its best rank counts once.
    ranked = merge_and_rank(
        [
            obs("a", 0, 1, "http://twice.example/p"),
            obs("a", 0, 2, "https://twice.example/p"),
            obs("b", 1, 1, "https://other.example/"),
        ]
    )
    twice = next(r for r in ranked if r.key == "https://twice.example/p")
    assert twice.score == Fraction(1, 61)
    assert twice.engines == ("a",)


def test_req_rank_006_ties_break_by_best_rank_then_preference_then_key() -> None:
    ranked = merge_and_rank(
        [
            obs("a", 0, 2, "https://zeta.example/"),
            obs("b", 1, 2, "https://alpha.example/"),
            obs("a", 0, 1, "https://first.example/"),
            obs("c", 2, 2, "https://beta.example/"),
        ]
    )
    # first has the best score; the three at rank 2 tie on score and best rank, so the
    # engine preference decides: a (0) before b (1) before c (2), whatever the keys say.
    assert [r.url for r in ranked] == [
        "https://first.example/",
        "https://zeta.example/",
        "https://alpha.example/",
        "https://beta.example/",
    ]


def test_req_rank_006_the_comparison_key_is_the_last_tie_breaker() -> None:
    ranked = merge_and_rank(
        [obs("a", 0, 2, "https://b.example/"), obs("b", 0, 2, "https://a.example/")]
    )
    assert [r.key for r in ranked] == ["https://a.example/", "https://b.example/"]


def test_req_rank_006_best_rank_breaks_an_equal_score() -> None:
    # 2/(60+24) = 1/(60+3) + 1/(60+66): equal scores from different ranks. The result whose
    # best rank is better (3) comes first although its engines are less preferred.
    agreed = [
        obs("a", 0, 24, "https://agreed.example/"),
        obs("b", 1, 24, "https://agreed.example/"),
    ]
    spread = [obs("c", 2, 3, "https://spread.example/"), obs("d", 3, 66, "https://spread.example/")]
    ranked = merge_and_rank(agreed + spread)
    assert ranked[0].score == ranked[1].score == Fraction(1, 42)
    assert [r.url for r in ranked] == ["https://spread.example/", "https://agreed.example/"]


def test_req_rank_006_engine_preference_breaks_an_equal_score_and_rank() -> None:
    one = [obs("a", 0, 1, "https://one.example/"), obs("b", 1, 5, "https://one.example/")]
    other = [obs("c", 2, 1, "https://two.example/"), obs("d", 3, 5, "https://two.example/")]
    ranked = merge_and_rank(other + one)
    assert ranked[0].score == ranked[1].score
    assert [r.url for r in ranked] == ["https://one.example/", "https://two.example/"]


def test_req_rank_004_a_merged_result_takes_title_and_snippet_from_the_best_rank() -> None:
    ranked = merge_and_rank(
        [
            obs("a", 0, 4, "https://page.example/", title="from a", snippet="a says"),
            obs("b", 1, 2, "https://PAGE.example:443/#x", title="from b", snippet="b says"),
        ]
    )
    assert len(ranked) == 1
    merged = ranked[0]
    assert (merged.title, merged.snippet) == ("from b", "b says")
    assert merged.url == "https://PAGE.example:443/#x"
    assert [(o.engine, o.rank) for o in merged.observations] == [("b", 2), ("a", 4)]
    assert merged.engines == ("a", "b")


def test_req_rank_004_equal_ranks_break_by_engine_preference() -> None:
    ranked = merge_and_rank(
        [
            obs("late", 5, 1, "https://page.example/", title="late"),
            obs("early", 1, 1, "https://page.example/", title="early"),
        ]
    )
    assert ranked[0].title == "early"
    assert ranked[0].engines == ("early", "late")


def test_req_rank_004_the_https_url_is_shown_when_the_best_is_http() -> None:
    ranked = merge_and_rank(
        [
            obs("a", 0, 1, "http://page.example/doc", title="best"),
            obs("b", 1, 3, "https://page.example/doc?utm_source=b"),
            obs("c", 2, 2, "https://page.example/doc#part"),
        ]
    )
    merged = ranked[0]
    assert merged.title == "best"  # the text still comes from the best observation
    assert merged.url == "https://page.example/doc#part"  # the best-ranked https one


def test_req_rank_004_an_http_url_stays_when_no_https_observation_exists() -> None:
    ranked = merge_and_rank([obs("a", 0, 1, "http://page.example/doc")])
    assert ranked[0].url == "http://page.example/doc"


def test_req_rank_001_the_merged_result_keeps_the_best_date_or_the_next_one_given() -> None:
    ranked = merge_and_rank(
        [
            obs("a", 0, 1, "https://d.example/", date=None),
            obs("b", 1, 2, "https://d.example/", date="2026-01-02"),
            obs("c", 2, 3, "https://d.example/", date="2025-05-05"),
        ]
    )
    assert ranked[0].date == "2026-01-02"
    ranked = merge_and_rank(
        [
            obs("a", 0, 1, "https://d.example/", date="2024-04-04"),
            obs("b", 1, 2, "https://d.example/", date="2026-01-02"),
        ]
    )
    assert ranked[0].date == "2024-04-04"


def test_req_arch_004_the_order_does_not_depend_on_the_order_of_observations() -> None:
    rng = random.Random(7)
    pages = [f"https://p{i}.example/" for i in range(12)]
    observations = []
    for engine_index, engine in enumerate(["a", "b", "c"]):
        for rank, page in enumerate(rng.sample(pages, 8), start=1):
            observations.append(obs(engine, engine_index, rank, page))
    expected = merge_and_rank(observations)
    for _ in range(20):
        shuffled = observations[:]
        rng.shuffle(shuffled)
        assert merge_and_rank(shuffled) == expected
