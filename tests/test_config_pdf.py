"""The PDF keys of `[fetch]` (REQ-PDF-106): read, named by `rypsok check`, and counted in the
memory estimate when one PDF read costs more than one parse at the bounds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from rypsok.config.check import report_lines
from rypsok.config.load import ConfigError, load_config_text
from rypsok.config.memory import MIB, estimate, parse_bytes, pdf_read_bytes, settings_to_lower

if TYPE_CHECKING:
    from rypsok.config.schema import Config


def _config(fetch: str = "") -> Config:
    return load_config_text("config_version = 1\n[fetch]\n" + fetch, {})


def test_req_pdf_106_check_names_every_pdf_key_with_its_value() -> None:
    config = _config("pdf_max_pages = 30\npdf_max_chars = 20000\npdf_memory_mib = 64\n")
    line = next(line for line in report_lines(config, {}) if line.startswith("fetch:"))
    assert "pdf_max_pages=30 pdf_max_chars=20000 pdf_memory_mib=64 pdf_workers=2" in line


def test_req_pdf_106_a_value_out_of_range_names_the_key() -> None:
    with pytest.raises(ConfigError) as refused:
        _config("pdf_memory_mib = 32\n")
    assert "fetch.pdf_memory_mib" in str(refused.value)
    assert "48" in str(refused.value)


def test_req_pdf_106_the_estimate_counts_a_pdf_read_beyond_a_parse() -> None:
    default = _config()
    # At the defaults one PDF read fits in one parse at the bounds: the estimate is unchanged.
    assert pdf_read_bytes(96, 250000) < parse_bytes(default.fetch.max_bytes)
    large = _config("pdf_memory_mib = 512\n")
    grown = estimate(large).total_bytes - estimate(default).total_bytes
    assert grown == pdf_read_bytes(512, 250000) - parse_bytes(default.fetch.max_bytes)
    assert grown > 300 * MIB
    figure = estimate(large)
    assert "fetch.pdf_memory_mib" in settings_to_lower(figure, 256 * MIB)
