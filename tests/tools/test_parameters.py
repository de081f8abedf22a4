"""The parameter-schema helpers every tool's schema is built from (mastif.tools.base)."""

from __future__ import annotations

import json

from mastif.tools.base import count_parameter, object_schema, text_parameter


def test_text_parameter_lists_keywords_before_its_description() -> None:
    # the order is the schema's JSON text, which prompts and the response cache see
    schema = text_parameter("what to do", enum=["a", "b"], default="a")
    assert json.dumps(schema) == (
        '{"type": "string", "enum": ["a", "b"], "default": "a", "description": "what to do"}'
    )
    assert text_parameter(minLength=1) == {"type": "string", "minLength": 1}


def test_count_parameter_is_at_least_one() -> None:
    assert json.dumps(count_parameter("how many", maximum=10)) == (
        '{"type": "integer", "minimum": 1, "maximum": 10, "description": "how many"}'
    )
    assert count_parameter("n") == {"type": "integer", "minimum": 1, "description": "n"}


def test_object_schema_rejects_unknown_arguments() -> None:
    schema = object_schema({"q": text_parameter("q")}, ["q"])
    assert schema["additionalProperties"] is False and schema["required"] == ["q"]
