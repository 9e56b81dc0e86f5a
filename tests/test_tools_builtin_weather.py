"""get_weather / get_air_quality over the shipped demo dataset, through the real executor."""

from __future__ import annotations

import json

import pytest

from agentlab.tools.executor import ToolExecutor
from agentlab.tools.registry import builtin_tools


@pytest.fixture(scope="module")
def ex() -> ToolExecutor:
    return ToolExecutor(builtin_tools())


async def test_known_city_weather_is_labelled_demo(ex):
    result = await ex.run("get_weather", {"city": "Paris"})
    assert result.ok, result.observation
    data = json.loads(result.output)
    assert data["city"] == "Paris" and data["country"] == "France"
    assert isinstance(data["temperature_c"], int | float)
    assert {"condition", "humidity_pct", "wind_kmh"} <= data.keys()
    assert "DEMO DATA" in result.observation


@pytest.mark.parametrize("spelling", ["sao paulo", "SÃO PAULO", "  São Paulo ", "Sao Paulo, BR"])
async def test_city_match_ignores_case_and_accents(ex, spelling):
    result = await ex.run("get_weather", {"city": spelling})
    assert result.ok, result.observation
    assert json.loads(result.output)["city"] == "São Paulo"


async def test_air_quality(ex):
    result = await ex.run("get_air_quality", {"city": "delhi"})
    assert result.ok, result.observation
    data = json.loads(result.output)
    assert data["city"] == "Delhi"
    assert data["aqi"] > 150 and data["level"] == "unhealthy"
    assert {"pm25", "pm10", "main_pollutant"} <= data.keys()
    assert "DEMO DATA" in result.observation
    clean = json.loads((await ex.run("get_air_quality", {"city": "Reykjavik"})).output)
    assert clean["level"] == "good"


@pytest.mark.parametrize("tool", ["get_weather", "get_air_quality"])
async def test_unknown_city_lists_known_ones(ex, tool):
    result = await ex.run(tool, {"city": "Atlantis"})
    assert not result.ok
    assert "Atlantis" in result.observation
    for city in ("Paris", "Tokyo", "São Paulo"):
        assert city in result.observation


async def test_missing_argument_is_a_validation_error(ex):
    result = await ex.run("get_weather", {})
    assert not result.ok and result.error_type == "validation"


@pytest.mark.parametrize(("written", "city"), [
    ("B Beijing", "Beijing"), ("Beijing, China", "Beijing"),
    ("the city of sao-paulo", "São Paulo")], ids=["stutter", "country", "sentence"])
async def test_a_city_named_inside_other_words_is_found_and_the_result_says_which(
        ex, written, city):
    # A small model stutters ("B Beijing"); a place search would find the city all the same.
    result = await ex.run("get_weather", {"city": written})
    assert result.ok, result.observation
    assert json.loads(result.output)["city"] == city


@pytest.mark.parametrize("written", ["Parisian", "Delhi or Paris", "Atlantis"])
async def test_no_city_or_two_of_them_is_refused_with_the_cities_there_are(ex, written):
    result = await ex.run("get_air_quality", {"city": written})
    assert not result.ok
    assert f"no demo data for {written!r}. Cities with data include: Beijing" in result.observation
