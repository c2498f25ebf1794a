"""The keyless drivers' configuration: their keys, what is required, what is refused."""

from __future__ import annotations

import pytest

from rypsok.config.load import load_config_text
from rypsok.config.messages import ConfigError
from rypsok.core.engines.arxiv import ArxivEngine
from rypsok.core.engines.client import EngineClient
from rypsok.core.engines.crossref import CrossrefEngine
from rypsok.core.engines.hackernews import HackerNewsEngine
from rypsok.core.engines.registry import build_registry
from rypsok.core.engines.searxng import SearxngEngine
from rypsok.core.engines.stackexchange import StackExchangeEngine
from rypsok.core.model import DisabledReason


def _load(body: str) -> object:
    return load_config_text("config_version = 1\n" + body, {})


def _refusal(body: str) -> str:
    with pytest.raises(ConfigError) as caught:
        _load(body)
    return str(caught.value)


def test_req_cfg_005_searxng_needs_its_base_url() -> None:
    text = _refusal('[engines.sx]\ntype = "searxng"\ncategories = ["general"]\n')
    assert text.startswith("engines.sx.base_url: required")


def test_req_cfg_005_site_belongs_to_stackexchange_only() -> None:
    text = _refusal('[engines.hn]\ntype = "hackernews"\ncategories = ["news"]\nsite = "x"\n')
    assert text.startswith("engines.hn.site: only the stackexchange driver has a site")
    text = _refusal(
        '[engines.so]\ntype = "stackexchange"\ncategories = ["code"]\nsite = "Stack Overflow"\n'
    )
    assert text.startswith("engines.so.site: expected a Stack Exchange site name")


def test_req_cfg_005_keyless_api_drivers_take_no_credential() -> None:
    for kind in ("arxiv", "hackernews", "crossref"):
        text = _refusal(
            f'[engines.e]\ntype = "{kind}"\ncategories = ["science"]\napi_key_env = "K"\n'
        )
        assert text.startswith(f"engines.e.api_key_env: the {kind} driver takes no credential")


def test_req_ops_003_every_keyless_driver_is_active_without_a_key() -> None:
    config = load_config_text(
        "config_version = 1\n"
        '[engines.sx]\ntype = "searxng"\ncategories = ["general"]\n'
        'base_url = "https://search.example.org"\n'
        '[engines.so]\ntype = "stackexchange"\ncategories = ["code"]\nsite = "superuser"\n'
        '[engines.ax]\ntype = "arxiv"\ncategories = ["science"]\n'
        '[engines.hn]\ntype = "hackernews"\ncategories = ["news", "code"]\n'
        '[engines.cr]\ntype = "crossref"\ncategories = ["science"]\n',
        {},
    )
    registry = build_registry(config, {}, http=EngineClient())
    kinds = {e.id: type(e.engine) for e in registry.entries}
    assert kinds == {
        "sx": SearxngEngine,
        "so": StackExchangeEngine,
        "ax": ArxivEngine,
        "hn": HackerNewsEngine,
        "cr": CrossrefEngine,
    }
    assert registry.get("so").config.site == "superuser"  # type: ignore[union-attr]
    assert registry.get("sx").credential_state == "no credential configured"  # type: ignore[union-attr]


def test_req_ops_003_a_named_optional_key_that_is_missing_makes_the_engine_inactive() -> None:
    config = load_config_text(
        "config_version = 1\n"
        '[engines.sx]\ntype = "searxng"\ncategories = ["general"]\n'
        'base_url = "https://search.example.org"\napi_key_env = "SEARXNG_TOKEN"\n',
        {},
    )
    registry = build_registry(config, {}, http=EngineClient())
    assert registry.entries[0].disabled_reason is DisabledReason.NO_CREDENTIAL
    active = build_registry(config, {"SEARXNG_TOKEN": "t"}, http=EngineClient())
    assert active.entries[0].engine is not None


def test_req_cmp_002_a_disabled_second_arxiv_engine_is_accepted() -> None:
    _load(
        '[engines.a1]\ntype = "arxiv"\ncategories = ["science"]\n'
        '[engines.a2]\ntype = "arxiv"\ncategories = ["science"]\nenabled = false\n'
    )


@pytest.mark.parametrize(
    "site", ["superuser", "pt.stackoverflow", "meta.stackexchange", "3dprinting"]
)
def test_req_cfg_005_a_stack_exchange_site_name_with_a_dot_or_a_digit_is_read(site: str) -> None:
    # The API's site parameters include per-language and meta sites (pt.stackoverflow).
    config = load_config_text(
        "config_version = 1\n"
        f'[engines.so]\ntype = "stackexchange"\ncategories = ["code"]\nsite = "{site}"\n',
        {},
        source="test",
    )
    assert config.engines[0].site == site
