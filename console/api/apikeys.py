"""Gateway API keys (admin): list with usage per model, create (secret shown once), revoke."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsAdmin
from console.gateway.services import apikey_create, apikey_revoke
from console.gateway.usage import usage_flush
from console.models import (
    ApiKey,
)


class ApiKeyUsageSerializer(serializers.Serializer[Any]):
    model = serializers.CharField()
    requests = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()


class ApiKeySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField()
    rpm = serializers.IntegerField()
    tpm = serializers.IntegerField()
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    usage = ApiKeyUsageSerializer(many=True)


class ApiKeyCreateSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=63)
    rpm = serializers.IntegerField(min_value=1, default=60)
    tpm = serializers.IntegerField(min_value=1, default=100_000)


class ApiKeyCreatedSerializer(ApiKeySerializer):
    secret = serializers.CharField(help_text="Shown once; only its sha256 is kept.")


def _apikey_dict(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.pk,
        "name": key.name,
        "prefix": key.prefix,
        "rpm": key.rpm,
        "tpm": key.tpm,
        "created_by": key.created_by.username if key.created_by else None,
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
        "last_used_at": key.last_used_at,
        "usage": [
            {
                "model": u.model,
                "requests": u.requests,
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
            }
            for u in key.usage.all()
        ],
    }


@extend_schema(
    request=ApiKeyCreateSerializer,
    responses={200: ApiKeySerializer(many=True), 201: ApiKeyCreatedSerializer},
)
@api_view(["GET", "POST"])
@permission_classes([IsAdmin])
def apikeys(request: Request) -> Response:
    """GET: every gateway key with its usage per model. POST {name, rpm, tpm}: create one (the secret is in this answer only)."""
    if request.method == "GET":
        usage_flush()  # this process's pending counters, so the answer is current
        keys = (
            ApiKey.objects.select_related("created_by")
            .prefetch_related("usage")
            .order_by("name")
        )
        return Response(
            ApiKeySerializer([_apikey_dict(k) for k in keys], many=True).data
        )
    ser = ApiKeyCreateSerializer(data=request.data)
    ser.is_valid(raise_exception=True)
    try:
        key, secret = apikey_create(
            user=request.user, request=request._request, **ser.validated_data
        )
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from exc
    return Response(
        ApiKeyCreatedSerializer({**_apikey_dict(key), "secret": secret}).data,
        status=status.HTTP_201_CREATED,
    )


@extend_schema(request=None, responses={200: ApiKeySerializer})
@api_view(["POST"])
@permission_classes([IsAdmin])
def apikey_revoke_view(request: Request, pk: int) -> Response:
    """Revoke a key: requests with it get 401 from now on (idempotent, audited)."""
    key = get_object_or_404(ApiKey.objects.select_related("created_by"), pk=pk)
    key = apikey_revoke(key=key, user=request.user, request=request._request)
    return Response(ApiKeySerializer(_apikey_dict(key)).data)
