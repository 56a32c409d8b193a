"""Gateway API keys: list with usage per model, create (secret shown once), revoke.
Admins: every key, no bounds, and the operators' policy; an operator: their own keys,
within that policy (as on the API keys page)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.permissions import IsAdmin, IsOperator
from console.gateway.services import (
    apikey_create_for,
    apikey_policy_update,
    apikey_revoke,
    keys_visible_to,
)
from console.gateway.usage import usage_flush
from console.models import ApiKey, ApiKeyPolicy
from console.permissions import has_role


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
@permission_classes([IsOperator])
def apikeys(request: Request) -> Response:
    """GET: the keys you may see (admins: all; operators: their own) with usage per model. POST {name, rpm, tpm}: create one (the secret is in this answer only; operators within the key policy)."""
    if request.method == "GET":
        usage_flush()  # this process's pending counters, so the answer is current
        keys = keys_visible_to(request.user).prefetch_related("usage").order_by("name")
        return Response(
            ApiKeySerializer([_apikey_dict(k) for k in keys], many=True).data
        )
    ser = ApiKeyCreateSerializer(data=request.data)
    ser.is_valid(raise_exception=True)
    try:
        key, secret = apikey_create_for(
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
@permission_classes([IsOperator])
def apikey_revoke_view(request: Request, pk: int) -> Response:
    """Revoke a key: requests with it get 401 from now on (idempotent, audited). An operator revokes only their own keys (others': 404)."""
    key = get_object_or_404(keys_visible_to(request.user), pk=pk)
    key = apikey_revoke(key=key, user=request.user, request=request._request)
    return Response(ApiKeySerializer(_apikey_dict(key)).data)


class ApiKeyPolicySerializer(serializers.Serializer[Any]):
    max_keys_per_operator = serializers.IntegerField(min_value=0, max_value=32767)
    max_rpm = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    max_tpm = serializers.IntegerField(min_value=1, max_value=2**31 - 1)


@extend_schema(request=ApiKeyPolicySerializer, responses={200: ApiKeyPolicySerializer})
@api_view(["GET", "PUT"])
@permission_classes([IsOperator])
def apikey_policy(request: Request) -> Response:
    """GET: what an operator may create for themselves. PUT (admin): set it (audited)."""
    policy = ApiKeyPolicy.current()
    if request.method == "PUT":
        if not has_role(request.user, "admin"):
            raise PermissionDenied(IsAdmin.message)
        ser = ApiKeyPolicySerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        policy = apikey_policy_update(
            user=request.user, request=request._request, **ser.validated_data
        )
    return Response(
        ApiKeyPolicySerializer(
            {
                "max_keys_per_operator": policy.max_keys_per_operator,
                "max_rpm": policy.max_rpm,
                "max_tpm": policy.max_tpm,
            }
        ).data
    )
