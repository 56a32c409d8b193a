from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.models import BenchmarkRun, Cluster
from console.services import benchmarks
from engine import bench


class Command(BaseCommand):
    help = (
        "Benchmark results: import a `vllm bench serve --save-result` JSON, list, show "
        "(vllm-style table + pass/fail against the profile's targets), compare two runs, "
        "mark a baseline. --json on list/show/compare."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        imp = sub.add_parser(
            "import", help="import FILE (vllm bench serve --save-result)"
        )
        imp.add_argument("file")
        imp.add_argument("--cluster", help="the cluster the run was against")
        imp.add_argument("--label", default="")
        lst = sub.add_parser("list", help="results newest first")
        lst.add_argument("--cluster")
        lst.add_argument("--json", action="store_true")
        show = sub.add_parser("show", help="one result")
        show.add_argument("id", type=int)
        show.add_argument("--json", action="store_true")
        cmp_ = sub.add_parser("compare", help="compare run B against base run A")
        cmp_.add_argument("a", type=int)
        cmp_.add_argument("b", type=int)
        cmp_.add_argument("--json", action="store_true")
        base = sub.add_parser("baseline", help="make a run its cluster's baseline")
        base.add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, "do_" + options["action"])(options)

    def _run(self, pk: int) -> BenchmarkRun:
        try:
            return BenchmarkRun.objects.select_related("cluster__profile").get(pk=pk)
        except BenchmarkRun.DoesNotExist:
            raise CommandError(
                f"benchmark #{pk} does not exist; see manage.py bench list"
            ) from None

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
