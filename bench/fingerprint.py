"""What stack this run saw: versions, devices, CPU, packages, and bench's own source hash."""
from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
from typing import List

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
# What bench is made of: its code and its result schema. The image build ships exactly these.
SOURCE_SUFFIXES = (".py", ".json")


def source_names(folder: str = BENCH_DIR) -> List[str]:
    """bench's source files, '/'-separated relative names in order, subpackages included
    (bench/workloads/): the image ships these and the hash covers them."""
    names = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        relative = os.path.relpath(root, folder)
        for name in files:
            if name.endswith(SOURCE_SUFFIXES):
                names.append(name if relative == "." else
                             "%s/%s" % (relative.replace(os.sep, "/"), name))
    return sorted(names)


def bench_sha256() -> str:
    """Hash of bench/'s sources (names and bytes), so results prove which benchmark ran."""
    digest = hashlib.sha256()
    for name in source_names():
        with open(os.path.join(BENCH_DIR, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def nvidia_driver():
    try:
        with open("/proc/driver/nvidia/version") as f:
            first = f.readline()
        for word in first.split():
            if word[:1].isdigit() and "." in word:
                return word
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=20,
                             universal_newlines=True)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def installed_packages():
    try:
        from importlib import metadata
    except ImportError:
        return {}
    packages = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            packages[name] = dist.version
    return dict(sorted(packages.items(), key=lambda kv: kv[0].lower()))


def math_libraries(torch):
    """The math libraries this torch was built with, read from ``torch.__config__.show()``:
    {"blas", "lapack", "mkl", "onednn", "cpu_capability"} (None where it does not say). A
    stack's matmul or convolution speed is its libraries' (Debian's torch 1.13 multiplies
    through a generic BLAS, PyPI's through MKL), so the page can say why two probes differ."""
    try:
        text = torch.__config__.show()
    except Exception:  # an old or odd build: the fingerprint goes on without it
        return None

    def find(pattern):
        found = re.search(pattern, text)
        return found.group(1).strip() if found else None

    return {"blas": find(r"BLAS_INFO=([^,\s]+)"), "lapack": find(r"LAPACK_INFO=([^,\s]+)"),
            "mkl": find(r"Math Kernel Library Version ([0-9][0-9.]*)"),
            "onednn": find(r"(?:MKL-DNN|oneDNN) v([^\s(]+)"),
            "cpu_capability": find(r"CPU capability usage: ([^\s]+)")}


def collect(device):
    import torch

    try:
        import torchvision
        torchvision_version = torchvision.__version__
    except ImportError:
        torchvision_version = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision_version,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "device_name": None,
        "driver": None,
        "compute_capability": None,
        "gpu_memory_bytes": None,
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "platform": platform.platform(),
        "packages": installed_packages(),
        "math": math_libraries(torch),
        "bench_sha256": bench_sha256(),
        # The runner passes the image it started; a record is then whole even if the host
        # is interrupted before it annotates the file.
        "image": {"tag": os.environ.get("ENVBENCH_IMAGE_TAG"),
                  "id": os.environ.get("ENVBENCH_IMAGE_ID")},
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env["device_name"] = props.name
        env["compute_capability"] = "%d.%d" % (props.major, props.minor)
        env["gpu_memory_bytes"] = props.total_memory
        env["driver"] = nvidia_driver()
    else:
        env["device_name"] = env["cpu_model"]
    return env
