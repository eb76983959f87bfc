"""The GPU path, proven on a real GPU: every CUDA feature of bench once, then the fastest epoch.

Runs natively (no Docker) on a machine whose python3 has torch and torchvision, e.g. a lent
GPU VM, as ONE script that ends inside its deadline:

    python3 perf/gpu_path.py --out "$OUT" [--deadline-s 420] [--only NAME ...]

First the race to 1,000,000 training images/s (a 50 ms epoch), within --race-share of the
deadline: the resident pipeline with bf16, channels_last, CUDA graphs (compile
reduce-overhead) and larger batches, 4 epochs each so the steady epochs (after the first)
are measured. Then the path, in what time is left: 1-epoch benches of the full synthetic set
(50,000 CIFAR-shaped images) for classic and resident, amp off/fp16/bf16, compile
off/default, channels_last, the copy options off, ddp with world size 1 (NCCL), dp over the
visible GPUs, the light models and the quantised test pass; then the workloads a GPU is bought
for (resnet18-cifar, resnet50 at fp16 and TF32, gpt2-small with and without compile), 2
epochs each on their own data; the resident LeNet and the fp16 ResNet-50 rows are profiled
(operators, a trace) and every row runs the matmul probe (achieved / achievable). Rows that
compile are skipped,
and say so, where this machine has no C compiler (Triton needs gcc, inductor g++). The
checks only a container can make (read-only root, no capabilities, a non-root user) are
printed as one `docker run` line for the operator where Docker is installed.

Every result lands in OUT/results/NAME.json and is checked against bench's JSON Schema when
jsonschema imports (else with bench's own required-keys list, and the table says so); one
table goes to stdout and OUT/table.md. `--device cpu --limit 2000` runs the same list on a
CPU for a smoke test (CUDA-only rows are then expected failures).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import result  # noqa: E402  (torch-free)

RESIDENT = ("--pipeline", "resident")
# (name, extra bench options, epochs); part 1 is the path, part 2 the race to 1M images/s.
PATH = [
    ("classic", ("--pipeline", "classic", "--workers", "4"), 1),
    ("classic-copies-off", ("--pipeline", "classic", "--workers", "4", "--pin-memory", "off",
                            "--non-blocking", "off"), 1),
    ("resident", RESIDENT + ("--profile",), 1),
    ("resident-fp16", RESIDENT + ("--amp", "fp16"), 1),
    ("resident-bf16", RESIDENT + ("--amp", "bf16"), 1),
    ("resident-channels-last", RESIDENT + ("--channels-last",), 1),
    ("resident-compile", RESIDENT + ("--compile", "default"), 1),
    ("resident-ddp1-nccl", RESIDENT + ("--parallel", "ddp", "--nproc", "1"), 1),
    ("resident-dp", RESIDENT + ("--parallel", "dp"), 1),
    ("resident-lenet-gap", RESIDENT + ("--workload", "lenet-gap"), 1),
    ("resident-lenet-dws", RESIDENT + ("--workload", "lenet-dws"), 1),
    ("resident-quantize-eval", RESIDENT + ("--quantize-eval", "dynamic"), 1),
    # The workloads a GPU is bought for: their own data and limits (the first epoch warms up).
    ("resnet18-cifar-bf16", RESIDENT + ("--workload", "resnet18-cifar", "--amp", "bf16",
                                        "--channels-last", "--batch-size", "512"), 2),
    ("resnet50-fp16-cl", RESIDENT + ("--workload", "resnet50", "--amp", "fp16",
                                     "--channels-last", "--batch-size", "256", "--profile"), 2),
    ("resnet50-tf32", RESIDENT + ("--workload", "resnet50", "--batch-size", "256"), 2),
    ("gpt2-small-bf16", RESIDENT + ("--workload", "gpt2-small", "--amp", "bf16",
                                    "--batch-size", "16"), 2),
    ("gpt2-small-bf16-compile", RESIDENT + ("--workload", "gpt2-small", "--amp", "bf16",
                                            "--batch-size", "16", "--compile", "default"), 2),
]
FAST = RESIDENT + ("--amp", "bf16", "--channels-last")
RACE = [
    ("race-b1024-bf16-cl", FAST + ("--batch-size", "1024"), 4),
    ("race-b4096-bf16-cl", FAST + ("--batch-size", "4096"), 4),
    ("race-b4096-bf16-cl-graphs", FAST + ("--batch-size", "4096", "--compile",
                                          "reduce-overhead"), 4),
    ("race-b16384-bf16-cl-graphs", FAST + ("--batch-size", "16384", "--compile",
                                           "reduce-overhead"), 4),
    ("race-b50000-bf16-cl-graphs", FAST + ("--batch-size", "50000", "--compile",
                                           "reduce-overhead"), 4),
]


def options(name: str, extra: tuple, epochs: int, args: argparse.Namespace) -> list:
    cmd = ["--device", args.device, "--synthetic", "--epochs", str(epochs), "--seed", "0"]
    if "--batch-size" not in extra:
        cmd += ["--batch-size", "256"]
    if args.limit:
        cmd += ["--limit", str(args.limit), "--limit-test", str(min(args.limit, 10000))]
    return cmd + list(extra)


def check(record: dict) -> str:
    """'valid', or the first problem; with jsonschema where it imports."""
    try:
        import jsonschema
    except ImportError:
        missing = [k for k in result.SCHEMA_DOCUMENT["required"] if k not in record]
        return "required keys only: " + ("ok" if not missing else "missing %s" % missing)
    errors = sorted(jsonschema.Draft202012Validator(result.SCHEMA_DOCUMENT)
                    .iter_errors(record), key=str)
    return "valid" if not errors else "INVALID: %s" % errors[0].message[:120]


def run_one(name: str, cmd: list, folder: str, timeout: float) -> dict:
    out = os.path.join(folder, "results", name + ".json")
    log = os.path.join(folder, "logs", name + ".log")
    started = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "bench", *cmd, "--out", out], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
        text, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) \
            else (exc.stdout or ""), "timeout"
    with open(log, "w") as f:
        f.write(text)
    row = {"name": name, "exit": code, "host_s": round(time.perf_counter() - started, 1)}
    if os.path.exists(out):
        with open(out) as f:
            record = json.load(f)
        row.update(status=record["status"], schema=check(record),
                   error=(record.get("error") or {}).get("message", "")[:100],
                   first=record["summary"].get("first_epoch_s"),
                   median=record["summary"].get("epoch_s_median"),
                   rate=record["summary"].get("samples_per_s"),
                   acc=record["summary"].get("final_test_acc"),
                   dtype=record["summary"].get("forward_dtype"),
                   vram=record["memory"].get("gpu_peak_reserved_bytes"),
                   device=record["env"].get("device_name"), note=note(record),
                   workload=record["config"].get("workload"))
    else:
        row.update(status="no result", schema="-", error=text.strip().splitlines()[-1:])
    return row


def note(record: dict) -> str:
    """What a row proves beyond its time: ranks, the quantised pass, the model's size."""
    parts = []
    par = record.get("parallel") or {}
    if par.get("mode") not in (None, "none"):
        parts.append("%s x%s %s" % (par["mode"], par.get("world_size"), par.get("backend") or ""))
    q = record.get("quantized_eval")
    if q:
        parts.append("int8 acc %.3f in %.2f s, float %.3f in %.2f s"
                     % (q["test_acc"], q["test_s"], q["float_test_acc"], q["float_test_s"]))
    model = record.get("model") or {}
    if model.get("name") not in (None, "lenet"):
        flops = (model.get("flops") or {}).get("train") or 0
        rate = (record.get("summary") or {}).get("samples_per_s") or 0
        parts.append("%s: %d params, %.3g GFLOPs/sample train, %.0f %s/s, %.1f TFLOP/s"
                     % (model["name"], model["parameters"], flops / 1e9,
                        rate * model.get("units_per_sample", 1), model.get("unit", "images"),
                        flops * rate / 1e12))
    probe = record.get("probe") or {}
    train = (model.get("flops") or {}).get("train")
    rate = (record.get("summary") or {}).get("samples_per_s")
    if probe.get("flops_per_s") and train and rate:
        parts.append("%.1f%% of the %s probe's %.1f TFLOP/s" % (
            100 * train * rate / probe["flops_per_s"], probe["dtype"], probe["flops_per_s"] / 1e12))
    ops = [o for o in ((record.get("profile") or {}).get("operators") or [])
           if not o["name"].startswith("(")]
    if ops:
        parts.append("top operators: %s" % ", ".join("%s %.0f%%" % (o["name"], 100 * o["share"])
                                                    for o in ops[:3]))
    return "; ".join(parts)


def table(rows: list) -> str:
    head = ("| run | status | first epoch (s) | steady epoch (s) | images/s | acc | dtype | "
            "VRAM peak | schema | note | error |\n|---|---|---|---|---|---|---|---|---|---|---|\n")

    def cell(value, fmt):
        return "—" if value is None else fmt % value

    return head + "".join(
        "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" % (
            r["name"], r.get("status"), cell(r.get("first"), "%.3f"), cell(r.get("median"), "%.4f"),
            cell(r.get("rate"), "%.0f"), cell(r.get("acc"), "%.3f"), r.get("dtype") or "—",
            cell(r.get("vram") and r["vram"] / 2**20, "%.0f MiB"), r.get("schema"),
            r.get("note") or "",
            str(r.get("error") or "").replace("|", "/"))
        for r in rows)


def gpu_tests(folder: str, timeout: float) -> str:
    """tests/bench/test_gpu.py (the GPU happy path: device name, the CUDA-event phase split
    adding up, the GPU memory peak), run with pytest where pytest imports: one line."""
    try:
        import pytest  # noqa: F401
    except ImportError:
        return "GPU tests: not run (pytest is not installed: pip install pytest jsonschema)"
    log = os.path.join(folder, "logs", "test_gpu.log")
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
                               "tests/bench/test_gpu.py"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
        text = proc.stdout
    except subprocess.TimeoutExpired as exc:
        text = "timed out after %.0f s\n%s" % (timeout, exc.stdout or "")
    with open(log, "w") as f:
        f.write(text)
    lines = [line for line in text.splitlines() if line.strip()]
    return "GPU tests: %s (log: logs/test_gpu.log)" % (lines[-1] if lines else "no output")


def has_compiler() -> bool:
    return shutil.which("gcc") is not None and shutil.which("g++") is not None


CONTAINER_LINE = ("docker run --rm --gpus all --read-only --tmpfs /tmp:exec --cap-drop ALL "
                  "--security-opt no-new-privileges --user 1000:1000 --network none -v "
                  "\"$PWD\":/opt/envbench:ro -w /opt/envbench IMAGE python3 -m bench --device cuda "
                  "--synthetic --epochs 2 --pipeline resident --batch-size 256 --out "
                  "/tmp/r.json")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--deadline-s", type=float, default=420.0,
                   help="stop starting runs after this (the device's limit is the caller's)")
    p.add_argument("--limit", type=int, default=None, help="train images (default: all 50,000)")
    p.add_argument("--only", nargs="*", default=None, help="run only these names")
    p.add_argument("--race-share", type=float, default=0.6,
                   help="the share of the deadline the race may take before the path runs")
    args = p.parse_args()
    for sub in ("results", "logs"):
        os.makedirs(os.path.join(args.out, sub), exist_ok=True)
    started = time.perf_counter()
    compiler = has_compiler()
    # The correctness checks first, within a fifth of the deadline: a fast wrong figure is
    # worth nothing.
    tested = gpu_tests(args.out, 0.2 * args.deadline_s) if args.device == "cuda" else \
        "GPU tests: not run on --device cpu"
    print(tested, flush=True)
    rows = []
    for part, budget in ((RACE, args.race_share * args.deadline_s), (PATH, args.deadline_s)):
        for name, extra, epochs in part:
            if args.only is not None and name not in args.only:
                continue
            left = budget - (time.perf_counter() - started)
            if "--compile" in extra and not compiler:
                rows.append({"name": name, "status": "skipped", "schema": "-",
                             "error": "no C compiler here (gcc, g++): torch.compile cannot "
                                      "build its kernels"})
                continue
            if left < 20:
                rows.append({"name": name, "status": "skipped", "schema": "-",
                             "error": "its part's time is up"})
                continue
            rows.append(run_one(name, options(name, extra, epochs, args), args.out, left))
            print(json.dumps(rows[-1]), flush=True)
    text = tested + "\n\n" + table(rows)
    # The race is LeNet's: another workload's images/s is another job's.
    ok = [r for r in rows if r.get("status") == "ok" and r.get("rate")
          and r.get("workload") == "lenet"]
    if ok:
        best = max(ok, key=lambda r: r["rate"])
        text += ("\nFastest: %s, %.0f training images/s (steady epoch %.4f s); goal 1,000,000 "
                 "images/s = a 50 ms epoch.\n" % (best["name"], best["rate"], best["median"]))
    if shutil.which("docker"):
        text += ("\nThe container-only checks (read-only root, no capabilities, non-root): "
                 "build an image of this stack and run\n    %s\n" % CONTAINER_LINE)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
