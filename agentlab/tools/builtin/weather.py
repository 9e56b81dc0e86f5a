"""get_weather and get_air_quality over a shipped demo dataset (no network, reproducible)."""

from __future__ import annotations

import json
import re
import unicodedata
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from agentlab.tools.decorator import tool
from agentlab.tools.schema import NOT_EMPTY

DATA = Path(__file__).resolve().parent.parent / "data" / "weather_demo.json"


def _key(name: str) -> str:
    """Case- and accent-insensitive: 'sao paulo' finds 'São Paulo'."""
    folded = unicodedata.normalize("NFKD", name.strip().casefold())
    return "".join(c for c in folded if not unicodedata.combining(c))


def _words(text: str) -> str:
    """The words of `text` between spaces (" sao paulo " for "sao-paulo!"): a city is found
    among them as whole words, so "Paris" is not found in "Parisian"."""
    return f" {' '.join(re.findall(r'\w+', text))} "


@cache
def _dataset() -> tuple[str, dict[str, tuple[str, dict[str, Any]]]]:
    raw = json.loads(DATA.read_text(encoding="utf-8"))
    return raw["note"], {_key(city): (city, row) for city, row in raw["cities"].items()}


def _city(city: str) -> tuple[str, str, dict[str, Any]]:
    """The city's row: by its name, else the one known city named inside the text ("B Beijing",
    "Beijing, China" — a place search would find it too; the result names the city used)."""
    note, cities = _dataset()
    found = cities.get(_key(city.split(",")[0]))
    if found is None:
        words = _words(_key(city))
        named = [row for key, row in cities.items() if _words(key) in words]
        found = named[0] if len(named) == 1 else None
    if found is None:
        known = ", ".join(sorted(name for name, _ in cities.values()))
        raise ValueError(f"no demo data for {city!r}. Cities with data include: {known}")
    return note, *found


@tool(category="weather")
def get_weather(city: Annotated[str, "city name, e.g. Paris", NOT_EMPTY]) -> dict:
    """Current weather for a city (demo data): temperature, condition, humidity, wind."""
    note, name, row = _city(city)
    # The note first, as a header: a small model repeats what it read last as its answer.
    return {"source": note, "city": name, "country": row["country"], **row["weather"]}


@tool(category="weather")
def get_air_quality(city: Annotated[str, "city name, e.g. Delhi", NOT_EMPTY]) -> dict:
    """Air quality for a city (demo data): AQI, PM2.5, PM10 and the main pollutant."""
    note, name, row = _city(city)
    aqi = row["air_quality"]["aqi"]
    level = ("good" if aqi <= 50 else "moderate" if aqi <= 100 else
             "unhealthy for sensitive groups" if aqi <= 150 else "unhealthy")
    return {"source": note, "city": name, "country": row["country"], **row["air_quality"],
            "level": level}
