"""The vocabularies a configuration names and a call uses (re-exported by the core model)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Category", "SafeSearch", "TimeRange"]


class Category(StrEnum):
    GENERAL = "general"
    NEWS = "news"
    SCIENCE = "science"
    CODE = "code"


class TimeRange(StrEnum):
    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    YEAR = "year"


class SafeSearch(StrEnum):
    OFF = "off"
    MODERATE = "moderate"
    STRICT = "strict"
