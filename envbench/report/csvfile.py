"""results.csv: one row per result file (failed ones included), one column per figure, safe
to open in a spreadsheet."""
from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from bench import result
from envbench.inference import stats
from envbench.report import efficiency, hardware
from envbench.report.grouping import Group
from envbench.results.identity import variant_text
from envbench.results.record import Result

Column = Callable[[Result], Any]


def _cost_per_epoch(r: Result) -> float | None:
    price, epoch = r.cell.price_per_hour, r.summary.epoch_s_median
    return None if price is None or epoch is None else round(price * epoch / 3600, 8)


def _phase_median(phase: str) -> Column:
    def value(r: Result) -> float | None:
        seconds = [e.phase(phase) for e in r.steady_epochs]
        return round(stats.median(seconds), 6) if seconds else None
    return value


def _of(mapping: str, key: str) -> Column:
    """A key of one of the record's mappings (config, env, memory, image)."""
    return lambda r: getattr(r, mapping).get(key)


def _resource(key: str) -> Column:
    return lambda r: (r.cell.resources or {}).get(key)


def _achieved(r: Result) -> float | None:
    """FLOP/s this repeat achieved (efficiency.achieved of its own figures)."""
    value = efficiency.achieved(r.model.flops_train if r.model else None,
                                r.summary.samples_per_s)
    return None if value is None else round(value, 1)


def _top_operator(r: Result) -> tuple[str, float | None] | None:
    ops = [o for o in (r.profile.operators if r.profile else ()) if o.share is not None]
    return (ops[0].name, ops[0].share) if ops else None


def _quantized(key: str) -> Column:
    return lambda r: (r.quantized_eval or {}).get(key)


COLUMNS: list[tuple[str, Column]] = [
    ("environment", lambda r: r.cell.environment),
    ("target", lambda r: r.cell.target),
    ("target_label", lambda r: r.cell.target_label),
    ("variant", lambda r: variant_text(dict(r.cell.variant))),
    ("repeat", lambda r: r.cell.repeat),
    ("status", lambda r: r.status),
    ("error_type", lambda r: r.error.type if r.error else ""),
    ("epoch_s_median", lambda r: r.summary.epoch_s_median),
    ("first_epoch_s", lambda r: r.summary.first_epoch_s),
    ("samples_per_s", lambda r: r.summary.samples_per_s),
    ("final_test_acc", lambda r: r.summary.final_test_acc),
    *[("phase_%s_s" % p, _phase_median(p)) for p in result.PHASES],
    ("measured_hardware", lambda r: hardware.measured_name(r.env, r.device, r.world_size)),
    ("quick", lambda r: r.cell.quick),
    ("data", lambda r: r.cell.data.source if r.cell.data else None),
    ("threads", _of("config", "threads")),
    ("threads_from", _resource("threads_from")),
    ("cpu_quota", _resource("cpus")),
    ("cpuset", _resource("cpuset")),
    *[(key, _of("memory", key))
      for key in ("gpu_peak_allocated_bytes", "gpu_peak_reserved_bytes", "cgroup_peak_bytes",
                  "process_rss_peak_bytes", "child_rss_peak_bytes", "swap_peak_bytes")],
    ("workload", lambda r: r.workload),
    ("unit", lambda r: r.unit),
    ("units_per_s", lambda r: r.units_per_s),
    ("final_test_loss", lambda r: r.summary.final_test_loss),
    ("parameters", lambda r: r.model.parameters if r.model else None),
    ("flops_per_sample", lambda r: r.model.flops_per_image if r.model else None),
    ("train_flops_per_sample", lambda r: r.model.flops_train if r.model else None),
    ("workload_sha256", _of("config", "workload_sha256")),
    ("parallel", _of("config", "parallel")),
    ("world_size", lambda r: r.parallel.world_size if r.parallel else None),
    ("global_batch", lambda r: r.parallel.global_batch if r.parallel else None),
    ("quantized_test_acc", _quantized("test_acc")),
    ("quantized_test_s", _quantized("test_s")),
    ("float_cpu_test_s", _quantized("float_test_s")),
    ("pin_memory", _of("config", "pin_memory")),
    ("non_blocking", _of("config", "non_blocking")),
    ("price_per_hour", lambda r: r.cell.price_per_hour),
    ("cost_per_epoch", _cost_per_epoch),
    *[(key, _of("env", key)) for key in ("torch", "cuda", "device_name")],
    ("image_id", _of("image", "id")),
    ("lock_sha256", _of("image", "lock_sha256")),
    ("bench_sha256", _of("env", "bench_sha256")),
    ("achieved_flops_per_s", _achieved),
    ("probe_dtype", lambda r: r.probe.dtype if r.probe else None),
    ("probe_flops_per_s", lambda r: r.probe.flops_per_s if r.probe else None),
    ("probe_kind", lambda r: r.probe.kind if r.probe else None),
    ("probe_matmul_flops_per_s", lambda r: r.probe.matmul_flops_per_s if r.probe else None),
    ("probe_conv_flops_per_s", lambda r: r.probe.conv_flops_per_s if r.probe else None),
    ("clock_epoch_s_at_most", lambda r: r.clock.epoch_s_at_most if r.clock else None),
    ("profile", _of("config", "profile")),
    ("top_operator", lambda r: (_top_operator(r) or (None, None))[0]),
    ("top_operator_share", lambda r: (_top_operator(r) or (None, None))[1]),
]


def csv_safe(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula is prefixed with ' (OWASP's rule
    for CSV injection: cells starting with = + - @ tab or carriage return)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def text(groups: list[Group]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([name for name, _ in COLUMNS])
    for g in groups:
        for r in g.records:
            writer.writerow([csv_safe(value(r)) for _, value in COLUMNS])
    return buffer.getvalue()
