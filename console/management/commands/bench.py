from __future__ import annotations

import getpass
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.management.commands.cluster import Command as ClusterCommand
from console.models import BenchmarkRun, Cluster
from console.models.operations import Operation, OperationKind, OperationState
from console.services import benchmarks
from console.services.operations import (
    OperationConflict,
    OperationRefused,
    operation_start,
)
from engine import bench

# Each sub-command (in --help order): its name, its help, and its arguments as
# (name or flag, argparse keywords), in the order --help lists them.
Options = tuple[tuple[str, dict[str, Any]], ...]
SUBCOMMANDS: tuple[tuple[str, str, Options], ...] = (
    (
        "run",
        "run vllm bench serve on CLUSTER's head, one point per concurrency (or rate)",
        (
            ("cluster", {}),
            ("--concurrency", {"help": "max concurrency, or a sweep: 1,8,32"}),
            ("--request-rate", {"help": "requests/s, or a sweep: 1,2,4 (default inf)"}),
            (
                "--input-len",
                {"type": int, "help": "prompt tokens (default: the profile target's)"},
            ),
            (
                "--output-len",
                {"type": int, "help": "output tokens (default: the profile target's)"},
            ),
            (
                "--num-prompts",
                {
                    "type": int,
                    "help": "per point (default 5 × concurrency, 10 at least)",
                },
            ),
            (
                "--burstiness",
                {"type": float, "help": "with a finite rate: <1 burstier, >1 steadier"},
            ),
            (
                "--goodput",
                {
                    "nargs": "+",
                    "metavar": "KEY:MS",
                    "help": "SLOs, e.g. ttft:800 tpot:50",
                },
            ),
            (
                "--target",
                {
                    "choices": ["head", "gateway"],
                    "default": "head",
                    "help": "head: straight to the engine; gateway: through the console (BENCH_GATEWAY_URL)",
                },
            ),
            ("--label", {"default": ""}),
            ("--seed", {"type": int}),
            ("--reason", {"default": ""}),
            ("--no-wait", {"action": "store_true", "help": "queue it and return"}),
            (
                "--json",
                {"action": "store_true", "help": "print the stored results as JSON"},
            ),
        ),
    ),
    (
        "import",
        "import FILE (vllm bench serve --save-result)",
        (
            ("file", {}),
            ("--cluster", {"help": "the cluster the run was against"}),
            ("--label", {"default": ""}),
        ),
    ),
    (
        "list",
        "results newest first",
        (("--cluster", {}), ("--json", {"action": "store_true"})),
    ),
    (
        "show",
        "one result",
        (("id", {"type": int}), ("--json", {"action": "store_true"})),
    ),
    (
        "compare",
        "compare run B against base run A",
        (
            ("a", {"type": int}),
            ("b", {"type": int}),
            ("--json", {"action": "store_true"}),
        ),
    ),
    ("baseline", "make a run its cluster's baseline", (("id", {"type": int}),)),
)


class Command(BaseCommand):
    help = (
        "Benchmarks: run `vllm bench serve` on a serving cluster's head (a sweep over "
        "concurrency or rate, as an operation), import a `vllm bench serve --save-result` JSON, list, show "
        "(vllm-style table + pass/fail against the profile's targets), compare two runs, "
        "mark a baseline. --json on list/show/compare."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for action, help_, options in SUBCOMMANDS:
            command = sub.add_parser(action, help=help_)
            for name, keywords in options:
                command.add_argument(name, **keywords)

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, "do_" + options["action"])(options)

    def _run(self, pk: int) -> BenchmarkRun:
        try:
            return BenchmarkRun.objects.select_related("cluster__profile").get(pk=pk)
        except BenchmarkRun.DoesNotExist:
            raise CommandError(
                f"benchmark #{pk} does not exist; see manage.py bench list"
            ) from None

    def do_run(self, options: dict[str, Any]) -> None:
        cluster = self._cluster(options["cluster"])
        op = self._start(cluster, options)
        self.stdout.write(f"Operation #{op.pk}: benchmark {cluster.name} queued")
        if options["no_wait"]:
            return
        final = ClusterCommand(stdout=self.stdout, stderr=self.stderr).follow(op)  # type: ignore[arg-type]
        runs = (
            BenchmarkRun.objects.select_related("cluster__profile")
            .filter(pk__in=(final.result or {}).get("benchmarks") or [])
            .order_by("pk")  # the sweep's order
        )
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    [benchmarks.run_to_dict(r, full=True) for r in runs], indent=2
                )
            )
        else:
            self._write_runs(runs)
        if final.state != OperationState.SUCCEEDED:
            raise CommandError(f"operation #{op.pk} {final.state}: {final.error}")

    def _cluster(self, name: str) -> Cluster:
        """The cluster called ``name``; CommandError naming the known ones."""
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            names = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
            raise CommandError(
                f"cluster {name!r} does not exist; known clusters: {names}"
            )
        return cluster

    def _start(self, cluster: Cluster, options: dict[str, Any]) -> Operation:
        """Queue the benchmark operation; CommandError naming the option at fault."""
        request = {
            "concurrency": options["concurrency"],
            "request_rate": options["request_rate"],
            "input_len": options["input_len"],
            "output_len": options["output_len"],
            "num_prompts": options["num_prompts"],
            "burstiness": options["burstiness"],
            "goodput": " ".join(options["goodput"] or []),
            "label": options["label"],
            "seed": options["seed"],
            "target": options["target"],
        }
        try:
            return operation_start(
                cluster=cluster,
                kind=OperationKind.BENCHMARK,
                reason=options["reason"],
                source="cli",
                params={
                    "bench": {k: v for k, v in request.items() if v not in (None, "")}
                },
                actor=f"cli:{getpass.getuser()}",
            )
        except OperationRefused as exc:
            raise CommandError(f"--{exc.field.replace('_', '-')}: {exc}") from None
        except OperationConflict as exc:
            raise CommandError(str(exc)) from None

    def _write_runs(self, runs: Iterable[BenchmarkRun]) -> None:
        """Each run of the sweep: its vllm-style table, then its verdict."""
        for run in runs:
            data = benchmarks.run_to_dict(run, full=True)
            figures = {k: data[k] for k in (*bench.REQUIRED, *bench.OPTIONAL_NUM)}
            self.stdout.write(f"\nbenchmark #{run.pk}")
            self.stdout.write(
                bench.format_table(
                    figures, run.latency_ms, max_concurrency=run.max_concurrency
                )
            )
            self.write_verdict(run, data["verdict"])

    def do_import(self, options: dict[str, Any]) -> None:
        path = Path(options["file"])
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"file: cannot read {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise CommandError(f"file: {path} is not JSON ({exc})") from None
        cluster = None
        if options.get("cluster"):
            cluster = Cluster.objects.filter(name=options["cluster"]).first()
            if cluster is None:
                raise CommandError(f"--cluster: {options['cluster']!r} does not exist")
        try:
            run = benchmarks.benchmark_import(
                raw, cluster=cluster, label=options["label"]
            )
        except bench.ResultInvalid as exc:
            raise CommandError(f"{path}: {exc}") from None
        self.stdout.write(f"imported benchmark #{run.pk}")

    def do_list(self, options: dict[str, Any]) -> None:
        runs = BenchmarkRun.objects.select_related("cluster")
        if options.get("cluster"):
            runs = runs.filter(cluster__name=options["cluster"])
        rows = [benchmarks.run_to_dict(r) for r in runs[:200]]
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        self.stdout.write(
            f"{'id':>4} {'date':<20} {'cluster':<14} {'conc':>5} {'out tok/s':>10} "
            f"{'tok/s/NPU':>9} {'p99 TTFT':>9} {'tool':<18} label"
        )
        for r in rows:
            per_npu = r["output_tps_per_npu"]
            self.stdout.write(
                f"{r['id']:>4} {r['date'][:19]:<20} {r['cluster'] or '-':<14} "
                f"{r['max_concurrency'] or '-':>5} {r['output_throughput']:>10.2f} "
                f"{per_npu if per_npu is None else round(per_npu, 2)!s:>9} "
                f"{r.get('p99_ttft_ms', 0.0):>9.2f} {r['tool']:<18} "
                f"{r['label']}{' (baseline)' if r['is_baseline'] else ''}"
            )

    def do_show(self, options: dict[str, Any]) -> None:
        run = self._run(options["id"])
        data = benchmarks.run_to_dict(run, full=True)
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
            return
        figures = {k: data[k] for k in (*bench.REQUIRED, *bench.OPTIONAL_NUM)}
        self.stdout.write(
            bench.format_table(
                figures, run.latency_ms, max_concurrency=run.max_concurrency
            )
        )
        self.write_verdict(run, data["verdict"])

    def write_verdict(self, run: BenchmarkRun, verdict: dict[str, Any]) -> None:
        if run.output_tps_per_npu is not None:
            self.stdout.write(
                f"{'Output tokens/s per NPU:':<40} {run.output_tps_per_npu:<10.2f} ({run.npu_count} NPUs)"
            )
        for c in verdict["checks"]:
            mark = "PASS" if c["passed"] else "FAIL"
            value = "n/a" if c["value"] is None else f"{c['value']:.2f}"
            margin = (
                "" if c["margin_pct"] is None else f" (margin {c['margin_pct']:+.2f}%)"
            )
            self.stdout.write(
                f"{mark} {c['name']}: {value} vs {c['limit']:.2f}{margin}"
            )
        if verdict["baseline"] is not None:
            self.stdout.write(
                f"{'REGRESSED' if verdict['regressed'] else 'no regression'} against baseline #{verdict['baseline']}"
            )
        if verdict["passed"] is None:
            self.stdout.write("no target at this shape")
        else:
            self.stdout.write("ACCEPTED" if verdict["passed"] else "NOT ACCEPTED")

    def do_compare(self, options: dict[str, Any]) -> None:
        a, b = self._run(options["a"]), self._run(options["b"])
        data = benchmarks.benchmark_compare(a, b)
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2, ensure_ascii=False))
            return
        self.stdout.write(
            f"{'figure':<24} {'#' + str(a.pk):>12} {'#' + str(b.pk):>12} {'Δ %':>8}"
        )
        for r in data["figures"]:
            flag = "  REGRESSED" if r["regressed"] else ""
            self.stdout.write(
                f"{r['name']:<24} {r['base']:>12.2f} {r['other']:>12.2f} {r['delta_pct']:>+8.2f}{flag}"
            )
        self.stdout.write("same plan" if data["same_plan"] else "plans differ:")
        for line in data["plan_diff"]:
            self.stdout.write(f"  {line}")

    def do_baseline(self, options: dict[str, Any]) -> None:
        run = self._run(options["id"])
        if run.cluster is None:
            raise CommandError(
                f"benchmark #{run.pk} names no cluster; import it with --cluster"
            )
        benchmarks.benchmark_set_baseline(run)
        self.stdout.write(f"benchmark #{run.pk} is now {run.cluster.name}'s baseline")
