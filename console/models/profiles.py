"""Engine profiles: how to serve one model with vLLM on Ascend (model, version, parallelism, tuning)."""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from console.constants import VLLM_VERSIONS
from engine.tuning import tuning_problems

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# The link-mode variables belong to the node's link mode; a profile must not pin them.
LINK_ENV_VARS = ("HCCL_INTRA_PCIE_ENABLE", "HCCL_INTRA_ROCE_ENABLE")


class EngineProfile(models.Model):
    """How to serve one model with vLLM on Ascend: model, target vLLM version, parallelism and tuning.

    Model facts (parameter counts, layers, experts, KV heads) feed the memory-fit
    estimate when the model path has no config.json.
    """

    class MultiNodeMode(models.TextChoices):
        DP = "dp", _("Data parallel across nodes, TP inside (vllm-ascend MP recipe)")
        TP_PP = "tp_pp", _("TP/PP across nodes (--nnodes/--node-rank)")

    class Dtype(models.TextChoices):
        BFLOAT16 = "bfloat16", "bfloat16"
        FLOAT16 = "float16", "float16"

    class Quantization(models.TextChoices):
        NONE = "", _("none")
        ASCEND = "ascend", _("ascend (W8A8 / W4A8 from msModelSlim)")

    name = models.CharField(_("name"), max_length=120, unique=True)
    model_path = models.CharField(
        _("model path"),
        max_length=500,
        help_text=_("Local path on every node, e.g. /data/models/Qwen3.5-397B-A17B."),
    )
    served_model_name = models.CharField(_("served model name"), max_length=120)
    vllm_version = models.CharField(
        _("target vLLM version"), max_length=20, choices=[(v, v) for v in VLLM_VERSIONS]
    )
    vllm_ascend_version = models.CharField(
        _("vllm-ascend version"), max_length=20, blank=True
    )
    mode = models.CharField(
        _("multi-node mode"),
        max_length=8,
        choices=MultiNodeMode.choices,
        default=MultiNodeMode.DP,
    )
    data_parallel_size = models.PositiveSmallIntegerField(
        _("DP size"), default=1, validators=[MinValueValidator(1)]
    )
    tensor_parallel_size = models.PositiveSmallIntegerField(
        _("TP size"), default=8, validators=[MinValueValidator(1)]
    )
    pipeline_parallel_size = models.PositiveSmallIntegerField(
        _("PP size"), default=1, validators=[MinValueValidator(1)]
    )
    expert_parallel = models.BooleanField(_("expert parallel"), default=True)
    dtype = models.CharField(
        _("dtype"), max_length=16, choices=Dtype.choices, default=Dtype.BFLOAT16
    )
    quantization = models.CharField(
        _("quantization"),
        max_length=16,
        choices=Quantization.choices,
        blank=True,
        default="",
    )
    weight_bits = models.PositiveSmallIntegerField(
        _("weight bits"),
        default=16,
        validators=[MinValueValidator(4), MaxValueValidator(16)],
        help_text=_("16 for BF16, 8 for W8A8, 4 for W4A8."),
    )
    max_model_len = models.PositiveIntegerField(
        _("max model len"), default=32768, validators=[MinValueValidator(128)]
    )
    max_num_seqs = models.PositiveIntegerField(
        _("max num seqs"), default=16, validators=[MinValueValidator(1)]
    )
    max_num_batched_tokens = models.PositiveIntegerField(
        _("max num batched tokens"), default=8192, validators=[MinValueValidator(1)]
    )
    gpu_memory_utilization = models.FloatField(
        _("gpu memory utilization"),
        default=0.9,
        validators=[MinValueValidator(0.05), MaxValueValidator(1.0)],
    )
    enable_prefix_caching = models.BooleanField(_("prefix caching"), default=True)
    api_server_count = models.PositiveSmallIntegerField(
        _("API servers"), default=1, validators=[MinValueValidator(1)]
    )
    extra_flags = models.JSONField(
        _("extra flags"),
        default=list,
        blank=True,
        help_text=_(
            'vllm serve arguments as a JSON list, e.g. ["--async-scheduling"].'
        ),
    )
    tuning = models.JSONField(
        _("tuning options"),
        default=list,
        blank=True,
        help_text=_(
            "Options of vllm-ascend's Qwen3.5-397B-A17B tutorial (engine/tuning.py), "
            "by key; each adds its flags to the plan."
        ),
    )
    extra_env = models.JSONField(
        _("extra environment"),
        default=dict,
        blank=True,
        help_text=_('JSON object, e.g. {"HCCL_BUFFSIZE": "1024"}.'),
    )
    # Model facts for the memory-fit estimate (used when the model path has no config.json).
    total_params_b = models.FloatField(
        _("total parameters (B)"), default=397.0, validators=[MinValueValidator(0.1)]
    )
    active_params_b = models.FloatField(
        _("active parameters (B)"), default=17.0, validators=[MinValueValidator(0.1)]
    )
    num_layers = models.PositiveSmallIntegerField(
        _("layers"), default=60, validators=[MinValueValidator(1)]
    )
    num_experts = models.PositiveSmallIntegerField(_("experts"), default=512)
    hidden_size = models.PositiveIntegerField(
        _("hidden size"), default=4096, validators=[MinValueValidator(1)]
    )
    num_kv_heads = models.PositiveSmallIntegerField(
        _("KV heads"), default=2, validators=[MinValueValidator(1)]
    )
    head_dim = models.PositiveSmallIntegerField(
        _("head dim"), default=256, validators=[MinValueValidator(1)]
    )
    kv_layers = models.PositiveSmallIntegerField(
        _("layers with KV cache"),
        null=True,
        blank=True,
        help_text=_(
            "Full-attention layers that keep a KV cache (15 of 60 on Qwen3.5); empty = all layers."
        ),
    )
    hccl_buffsize_mb = models.PositiveIntegerField(
        _("HCCL_BUFFSIZE (MB)"), default=1024, validators=[MinValueValidator(1)]
    )
    # Correctness gate (console.services.acceptance): pass when accuracy over the bundled
    # samples ≥ baseline − threshold and every answer is sane.
    gate_baseline_accuracy = models.FloatField(
        _("gate baseline accuracy"),
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
    )
    gate_threshold = models.FloatField(
        _("gate threshold"),
        default=0.2,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
    )
    # Benchmark target (the field guide's acceptance: batch 8, input 512, output 256,
    # ≥ 12 output tokens/s per NPU, P99 < 800 ms — read as P99 TTFT: a 256-token answer
    # at 12 tok/s cannot end in 800 ms).
    target_concurrency = models.PositiveIntegerField(_("target concurrency"), default=8)
    target_input_len = models.PositiveIntegerField(
        _("target input length"), default=512
    )
    target_output_len = models.PositiveIntegerField(
        _("target output length"), default=256
    )
    target_output_tps_per_npu = models.FloatField(
        _("target output tokens/s per NPU"), null=True, blank=True, default=12.0
    )
    target_p99_ttft_ms = models.FloatField(
        _("target P99 TTFT (ms)"), null=True, blank=True, default=800.0
    )
    target_p99_e2el_ms = models.FloatField(
        _("target P99 E2E latency (ms)"), null=True, blank=True
    )
    regression_threshold_pct = models.FloatField(
        _("regression threshold (%)"),
        default=3.0,  # vllm-ascend's nightly perf baseline ratio 0.97
        validators=[MinValueValidator(0.0), MaxValueValidator(100.0)],
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("engine profile")
        verbose_name_plural = _("engine profiles")

    def __str__(self) -> str:
        return self.name

    @property
    def world_size(self) -> int:
        return (
            self.data_parallel_size
            * self.tensor_parallel_size
            * self.pipeline_parallel_size
        )

    def clean(self) -> None:
        """Raises ValidationError keyed by field: the extra flags, the tuning options, the
        extra environment, and the parallelism, quantization and parameter counts."""
        errors: dict[str, Any] = {}
        for step in (
            self._extra_flags_errors,
            self._tuning_errors,
            self._extra_env_errors,
            self._shape_errors,
        ):
            errors.update(step())
        if errors:
            raise ValidationError(errors)

    def _extra_flags_errors(self) -> dict[str, Any]:
        """A JSON list of strings whose first one is a --flag."""
        errors: dict[str, Any] = {}
        if not isinstance(self.extra_flags, list) or not all(
            isinstance(f, str) for f in self.extra_flags
        ):
            errors["extra_flags"] = _(
                'Extra flags must be a JSON list of strings, e.g. ["--async-scheduling"].'
            )
        elif self.extra_flags and not self.extra_flags[0].startswith("--"):
            errors["extra_flags"] = _(
                "The first extra flag must start with -- (got {flag!r})."
            ).format(flag=self.extra_flags[0])
        return errors

    def _tuning_errors(self) -> dict[str, Any]:
        """A JSON list of option keys, each one this vLLM version and the flags allow."""
        errors: dict[str, Any] = {}
        if not isinstance(self.tuning, list) or not all(
            isinstance(k, str) for k in self.tuning
        ):
            errors["tuning"] = _(
                'Tuning options must be a JSON list of option keys, e.g. ["fixed_seed"].'
            )
        else:
            problems = tuning_problems(
                self.tuning,
                self.vllm_version,
                self.extra_flags if isinstance(self.extra_flags, list) else [],
            )
            if problems:
                errors["tuning"] = problems
        return errors

    def _extra_env_errors(self) -> dict[str, Any]:
        """A JSON object of identifier: string, none of them a link-mode variable."""
        errors: dict[str, Any] = {}
        if not isinstance(self.extra_env, dict):
            errors["extra_env"] = _(
                'Extra environment must be a JSON object of NAME: "value".'
            )
        else:
            bad = [
                k
                for k, v in self.extra_env.items()
                if not _ENV_NAME.match(str(k)) or not isinstance(v, str)
            ]
            pinned = [k for k in self.extra_env if k in LINK_ENV_VARS]
            if bad:
                errors["extra_env"] = _(
                    "Invalid entries {names}: names must be identifiers and values strings."
                ).format(names=", ".join(map(str, bad)))
            elif pinned:
                errors["extra_env"] = _(
                    "{names} follow each node's link mode; remove them and set the node's link mode instead."
                ).format(names=", ".join(pinned))
        return errors

    def _shape_errors(self) -> dict[str, Any]:
        """PP 1 in the DP recipe, 16-bit weights unquantized, active <= total parameters."""
        errors: dict[str, Any] = {}
        if self.mode == self.MultiNodeMode.DP and self.pipeline_parallel_size != 1:
            errors["pipeline_parallel_size"] = _(
                "PP must be 1 in the DP recipe; choose the TP/PP mode for pipeline parallelism."
            )
        if self.quantization == self.Quantization.NONE and self.weight_bits != 16:
            errors["weight_bits"] = _(
                "{bits}-bit weights need quantization 'ascend'; set quantization or use 16 bits."
            ).format(bits=self.weight_bits)
        if (
            self.active_params_b
            and self.total_params_b
            and self.active_params_b > self.total_params_b
        ):
            errors["active_params_b"] = _(
                "Active parameters ({a} B) cannot exceed total parameters ({t} B)."
            ).format(a=self.active_params_b, t=self.total_params_b)
        return errors
