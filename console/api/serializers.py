"""API serializers: validation keyed by field; writes go through services."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from console.models import (
    AuditEvent,
    Cluster,
    EngineProfile,
    LinkMode,
    Node,
    Operation,
    OperationKind,
    OperationStep,
)
from console.permissions import has_role
from console.services.audit import mask_env
from engine.plans import LINK_PAIR_REASON


class OperationStepSerializer(serializers.ModelSerializer):
    node = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = OperationStep
        fields = [
            "seq",
            "name",
            "node",
            "state",
            "started_at",
            "finished_at",
            "summary",
            "log_tail",
            "diagnosis",
            "data",
            "progress_done",
            "progress_total",
        ]


class OperationSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    steps = OperationStepSerializer(many=True, read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Operation
        fields = [
            "id",
            "cluster",
            "kind",
            "state",
            "requested_by_name",
            "source",
            "reason",
            "force",
            "params",
            "result",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "progress",
            "steps",
        ]

    def get_progress(self, obj: Operation) -> list[int]:
        return list(obj.progress())


class OperationCreateSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=[k for k in OperationKind.values if k != "scale_out"]
    )
    reason = serializers.CharField(
        max_length=500, required=False, allow_blank=True, default=""
    )
    force = serializers.BooleanField(required=False, default=False)
    warmup_requests = serializers.IntegerField(
        required=False, min_value=0, max_value=10000
    )
    link_modes = serializers.DictField(
        child=serializers.ChoiceField(choices=LinkMode.choices),
        required=False,
        help_text="failover only: {node name: hccs|roce} for the nodes to switch.",
    )

    node = serializers.CharField(
        required=False, help_text="replace only: the node to take out of service."
    )
    bench = serializers.DictField(
        required=False,
        help_text=(
            "benchmark only: vllm bench serve's workload. concurrency (list, e.g. [1, 8, 32]) "
            "or request_rate (list, req/s): one point each; input_len, output_len, "
            "num_prompts (per point), burstiness, goodput ('ttft:800 tpot:50'), label, seed. "
            "A 400 names the bad field."
        ),
    )
    spare = serializers.CharField(
        required=False,
        help_text="replace only: the idle spare to take its rank (default: one of the same hardware).",
    )

    def _validate_replace(self, attrs: dict[str, Any]) -> None:
        cluster = self.context.get("cluster")
        if attrs["kind"] != "replace":
            if "node" in attrs or "spare" in attrs:
                raise serializers.ValidationError(
                    {"node": ["Only replace takes node and spare."]}
                )
            return
        name = attrs.get("node")
        if not name:
            raise serializers.ValidationError(
                {"node": ["replace needs the name of the node to take out of service."]}
            )
        if cluster is not None and not cluster.nodes.filter(name=name).exists():
            raise serializers.ValidationError(
                {"node": [f"{name!r} is not a node of {cluster.name}."]}
            )
        spare = attrs.get("spare")
        if (
            spare
            and not Node.objects.filter(
                name=spare,
                cluster__isnull=True,
                role="spare",
                state__in=("ready", "unknown"),
            ).exists()
        ):
            raise serializers.ValidationError(
                {
                    "spare": [
                        f"{spare!r} is not an idle, in-service spare; pick one from GET /api/nodes/ (role spare, no cluster)."
                    ]
                }
            )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self._validate_replace(attrs)
        if attrs["kind"] == "benchmark" and not attrs.get("bench"):
            raise serializers.ValidationError(
                {
                    "bench": [
                        'a benchmark needs its workload, e.g. {"concurrency": [1, 8]}'
                    ]
                }
            )
        if attrs.get("bench") and attrs["kind"] != "benchmark":
            raise serializers.ValidationError(
                {"bench": ["Only benchmark takes bench."]}
            )
        links = attrs.get("link_modes")
        if attrs["kind"] == "failover" and not links:
            raise serializers.ValidationError(
                {
                    "link_modes": [
                        "failover needs {node name: hccs|roce} for at least one node."
                    ]
                }
            )
        if links and attrs["kind"] not in ("failover", "restart"):
            raise serializers.ValidationError(
                {"link_modes": ["Only restart and failover take link_modes."]}
            )
        cluster = self.context.get("cluster")
        if links and cluster is not None:
            members = set(cluster.nodes.values_list("name", flat=True))
            unknown = sorted(set(links) - members)
            if unknown:
                raise serializers.ValidationError(
                    {
                        "link_modes": [
                            f"Not nodes of {cluster.name}: {', '.join(unknown)}."
                        ]
                    }
                )
            # one HCCL_INTRA_* pair per engine (engine.plans.link_pair_errors)
            modes = {
                links.get(name, mode)
                for name, mode in cluster.nodes.values_list("name", "link_mode")
            }
            if len(modes) > 1:
                raise serializers.ValidationError(
                    {
                        "link_modes": [
                            "Every node of the engine needs the same link mode "
                            f"(give all of {', '.join(sorted(members))} one of hccs|roce): "
                            f"{LINK_PAIR_REASON}."
                        ]
                    }
                )
        return attrs


class EngineProfileSerializer(serializers.ModelSerializer):
    class Meta:
        model = EngineProfile
        fields = "__all__"
        read_only_fields = [f.name for f in EngineProfile._meta.concrete_fields]

    def to_representation(self, instance: EngineProfile) -> dict[str, Any]:
        """Env values (tokens such as HF_TOKEN) only for admins; others see the names."""
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not has_role(request.user, "admin"):
            data["extra_env"] = mask_env(data.get("extra_env"))
        return data


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    effective_server_model = serializers.CharField(read_only=True)
    effective_server_model_label = serializers.CharField(read_only=True)
    server_model_source = serializers.CharField(read_only=True)

    class Meta:
        model = Node
        fields = "__all__"
        read_only_fields = [f.name for f in Node._meta.concrete_fields]


class ClusterSerializer(serializers.ModelSerializer):
    profile = serializers.SlugRelatedField(slug_field="name", read_only=True)
    nodes = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)

    class Meta:
        model = Cluster
        fields = "__all__"
        read_only_fields = [f.name for f in Cluster._meta.concrete_fields]


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        exclude = ["actor"]


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(
        read_only=True,
        help_text="Send as `Authorization: Token <token>`; shown only once.",
    )


# -- admin writes: parsing only; clean() and the launch plan run in the service --

_STATE_FIELDS = ["id", "created_at", "updated_at"]


class EngineProfileWriteSerializer(serializers.ModelSerializer):
    # the service allows only versions of the release matrix (engine/compat.py) unless
    # this is true; the override gets its own audit row
    vllm_ascend_override = serializers.BooleanField(
        required=False,
        write_only=True,
        help_text="Allow a vllm-ascend version the release matrix does not know (audited).",
    )

    class Meta:
        model = EngineProfile
        exclude = _STATE_FIELDS


class ClusterWriteSerializer(serializers.ModelSerializer):
    profile = serializers.SlugRelatedField(
        slug_field="name", queryset=EngineProfile.objects.all()
    )

    class Meta:
        model = Cluster
        fields = ["name", "description", "profile", "maintenance_mode"]


class NodeWriteSerializer(serializers.ModelSerializer):
    cluster = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Cluster.objects.all(),
        allow_null=True,
        required=False,
    )

    class Meta:
        model = Node
        exclude = [
            *_STATE_FIELDS,
            "state",
            "last_seen_at",
            "link_mode_since",
            "link_mode_reason",
            "detected_server_model",
            "detected_server_model_evidence",
            "detected_server_model_at",
        ]
        validators: list[Any] = []  # full_clean() checks the rank/head constraints
