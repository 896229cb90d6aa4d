"""The recordings with structured output: the model each answers with, and its final value
as read by hand from the raw stream (tests/fixtures/real/PROVENANCE.md says where each
came from)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Location(BaseModel):
    """openai-python's `response_format=Location` (its streaming test)."""

    city: str
    temperature: float
    units: Literal["c", "f"]


class WeatherForecast(BaseModel):
    """SwiftAgent's `weather_forecast` schema (Responses `text.format`)."""

    temperatureCelsius: float
    condition: str


class Character(BaseModel):
    """One element of the AI SDK's Anthropic JSON-output fixture."""

    model_config = ConfigDict(populate_by_name=True)

    name: str
    class_: str = Field(alias="class")
    description: str


class Characters(BaseModel):
    """The AI SDK's Anthropic JSON-output answer."""

    characters: list[Character]


class Weather(BaseModel):
    """One element of the AI SDK's Anthropic `json` tool answer."""

    location: str
    temperature: int
    condition: str


class Elements(BaseModel):
    """The AI SDK's Anthropic tool-as-output answer (the tool is named `json`)."""

    elements: list[Weather]


class CityLocation(BaseModel):
    """pydantic-ai's `CityLocation` (Gemini `responseJsonSchema`, Bedrock `outputConfig`)."""

    city: str
    country: str


@dataclass(frozen=True)
class OutputRecording:
    """A recording whose answer is structured output, and what it must fold to."""

    rel: str
    model: type[BaseModel]
    expected: dict[str, Any]  # the final value's model_dump(by_alias=True), checked by hand
    output_tool: str | None = None


_THERON = (
    "A battle-scarred veteran with steel-gray hair and a prominent scar across his left eye. "
    "Wielding a massive two-handed sword passed down through his family for generations, "
    "Theron fights with disciplined precision honed through decades of combat. Despite his "
    "gruff exterior, he harbors a deep sense of honor and protects the weak without hesitation."
)
_LYRA = (
    "A young prodigy in the arcane arts with flowing silver robes adorned with celestial "
    "patterns. Her eyes glow faintly blue when channeling powerful spells. Lyra specializes in "
    "elemental magic and astral divination, having studied at the Grand Academy since "
    "childhood. She is curious and idealistic, often getting into trouble while pursuing "
    "forbidden knowledge."
)
_ROOK = (
    "A nimble and cunning rogue who moves through shadows like a whisper in the night. With "
    "jet-black hair, leather armor, and an array of lockpicks and daggers hidden on his "
    "person, Rook makes his living liberating treasures from those he deems unworthy of them. "
    "Behind his cocky smile lies a troubled past and a strict personal code about who "
    "deserves to be robbed."
)

OUTPUT_RECORDINGS: tuple[OutputRecording, ...] = (
    OutputRecording(
        "openai-chat/structured-output-json-schema.sse",
        Location,
        {"city": "San Francisco", "temperature": 68.0, "units": "f"},
    ),
    OutputRecording(
        "openai-responses/structured-output-reasoning-json-schema.sse",
        WeatherForecast,
        {"temperatureCelsius": 22.0, "condition": "Partly Cloudy"},
    ),
    OutputRecording(
        "anthropic/json-output-format.sse",
        Characters,
        {
            "characters": [
                {"name": "Theron Ironheart", "class": "warrior", "description": _THERON},
                {"name": "Lyra Starweaver", "class": "mage", "description": _LYRA},
                {"name": "Rook Shadowstep", "class": "thief", "description": _ROOK},
            ]
        },
    ),
    OutputRecording(
        "anthropic/json-tool-output.sse",
        Elements,
        {"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]},
        output_tool="json",
    ),
    OutputRecording(
        "gemini/structured-output-response-schema.sse",
        CityLocation,
        {"city": "Mexico City", "country": "Mexico"},
    ),
    OutputRecording(
        "bedrock/structured-output-json-schema-claude.ndjson",
        CityLocation,
        {"city": "Paris", "country": "France"},
    ),
    OutputRecording(
        "bedrock/structured-output-json-schema-claude.eventstream",
        CityLocation,
        {"city": "Paris", "country": "France"},
    ),
)
