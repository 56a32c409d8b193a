"""The API's JSON parser: a body nested past Python's recursion limit is a 400, not a 500."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class BoundedJSONParser(JSONParser):
    """DRF's JSONParser, refusing a body too deeply nested to decode (e.g. 5000 ``[``).

    json.loads raises RecursionError for those, which DRF does not catch.
    """

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(
                "JSON parse error - the body is nested too deeply; send a flatter document."
            ) from None
