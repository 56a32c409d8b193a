"""``?limit=&offset=`` pagination with bounds, so no number is too big for the database."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_LIMIT = 500
MAX_OFFSET = 10**9


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """At most 500 rows a page (a larger limit is cut to 500); an offset past 10⁹ is a 400."""

    max_limit = MAX_LIMIT

    def get_offset(self, request: Request) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            raise ValidationError(
                {self.offset_query_param: [f"must be at most {MAX_OFFSET}"]}
            )
        return offset
