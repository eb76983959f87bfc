"""One container spec, rendered four ways (the Docker SDK's arguments, Podman's, Apptainer's
and Pyxis's command lines): each carries every lock-down property, or the runtime says
which it cannot carry (runtimes.LEFT_OUT). A property is carried when changing it changes
the rendering: a renderer that ignores one fails here."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from envbench.cells import cellspec, resources
from envbench.engine import sandbox, spec
from envbench.engine.spec import Bind, ContainerSpec, Lockdown
from envbench.matrix.inputs import InputPlan
from envbench.matrix.models import Target
from envbench.matrix.workloads import WorkloadPlan
from envbench.slurm import runtimes

RENDERERS: dict[str, Any] = {"docker": sandbox.docker_options, **runtimes.BUILDERS}
# A value unlike the default for each property of the lock-down.
CHANGED = {"network": "slirp4netns", "cap_drop": "NET_RAW", "no_new_privileges": False,
           "read_only_root": False, "tmp": "rw,size=1g", "pids_limit": 99, "shm_size": "1g",
           "init": False}


def _spec(**changes: Any) -> ContainerSpec:
    return ContainerSpec(
        name="a__t__r0", image="IMAGE", args=("--device", "cuda", "--out", "/results/x.json"),
        environment=spec.cell_environment("sha256:1", "envbench/a:1", "cuda"),
        user="1000:1000", binds=(Bind("/h/results", "/results", read_only=False),
                                 Bind("/h/data", "/data")),
        cpus=4, memory_bytes=2**31, gpus=1, **changes)


def test_every_lockdown_property_is_rendered_or_said_to_be_left_to_the_site():
    assert {f.name for f in dataclasses.fields(Lockdown)} == set(CHANGED)
    assert set(runtimes.LEFT_OUT) <= set(RENDERERS)
    carried: dict[str, set[str]] = {}
    for runtime, render in RENDERERS.items():
        plain = render(_spec())
        carried[runtime] = {name for name, value in CHANGED.items()
                            if render(_spec(lockdown=dataclasses.replace(
                                spec.LOCKDOWN, **{name: value}))) != plain}
        left = set(runtimes.LEFT_OUT.get(runtime, {}))
        # Each property is either carried or listed as left out, never both.
        assert carried[runtime] | left == set(CHANGED), runtime
        assert not carried[runtime] & left, runtime
    # The engine carries them all; Podman all but an init (catatonit is seldom there).
    assert carried["docker"] == set(CHANGED)
    assert set(CHANGED) - carried["podman"] == {"init"}


@pytest.mark.parametrize("runtime", sorted(RENDERERS))
def test_each_rendering_has_the_specs_user_environment_mounts_workdir_and_entrypoint(runtime):
    rendered = RENDERERS[runtime](_spec())
    if runtime == "docker":
        assert rendered["user"] == "1000:1000"
        assert rendered["environment"]["ENVBENCH_IMAGE_ID"] == "sha256:1"
        assert "NVIDIA_VISIBLE_DEVICES" not in rendered["environment"]  # a GPU cell's
        assert [(m["Target"], m["ReadOnly"]) for m in rendered["mounts"]] == [
            ("/results", False), ("/data", True)]
        assert rendered["working_dir"] == spec.WORKDIR
        assert rendered["entrypoint"] + rendered["command"] == [
            *spec.ENTRY, "--device", "cuda", "--out", "/results/x.json"]
        return
    line = " ".join(rendered)
    assert "ENVBENCH_IMAGE_ID=sha256:1" in line and "HOME=%s" % spec.HOME in line
    assert "/h/data" in line and "/h/results" in line
    assert spec.WORKDIR in line
    # bench's words come last, after the entrypoint (Podman names its first word apart).
    assert rendered[-4:] == ["--device", "cuda", "--out", "/results/x.json"]
    assert " ".join(spec.ENTRY[1:]) in line


def test_the_image_is_built_with_the_specs_layout():
    from envbench.images import dockerfile
    from envbench.matrix.models import Environment

    for env in (Environment(torch="2.13.0"),
                Environment(source="debian", base="envbench/debian:bookworm")):
        text = dockerfile.plan("a", env, Path(".")).dockerfile
        assert "WORKDIR %s\n" % spec.WORKDIR in text
        assert "ENTRYPOINT %s\n" % json.dumps(list(spec.ENTRY)) in text
        assert "ENV HOME=%s USER=%s\n" % (spec.HOME, spec.USER) in text


def test_a_cells_spec_mounts_its_code_and_inputs_read_only_and_hides_its_bytecode(tmp_path):
    res = resources.plan(Target(device="cpu", cpus=2, memory="1g"), 4)
    given = InputPlan("weights", tmp_path / "w", "0" * 64, 1, 1)
    plan = WorkloadPlan("mine", "synthetic", None, None, None, path=tmp_path / "code",
                        function="build", sha256="1" * 64,
                        bytecode_caches=("__pycache__",), inputs=(given,))
    files = cellspec.CellFiles(results="/h/r", workload="/h/code", inputs=("/h/w",))
    made = cellspec.cell_spec("s", "IMAGE", "sha256:1", "envbench/a:1", ["--x"], res, files,
                              plan)
    assert [(b.source, b.target, b.read_only) for b in made.binds] == [
        ("/h/r", "/results", False), ("/h/code", str(plan.mount_point), True),
        ("/h/w", given.mount_point, True)]
    assert [s.target for s in made.scratch] == ["%s/__pycache__" % plan.mount_point]
    assert made.environment["NVIDIA_VISIBLE_DEVICES"] == "void" and made.gpus == 0
    assert (made.cpus, made.cpuset, made.memory_bytes) == (2, "0-1", 2**30)
    # Slurm's copy has no caches to hide and no cpuset of the kit's own.
    copied = cellspec.cell_spec("s", "IMAGE", "sha256:1", "envbench/a:1", ["--x"], res,
                                dataclasses.replace(files, hide_bytecode=False), plan,
                                pin_cpuset=False)
    assert copied.scratch == () and copied.cpuset is None
    # Apptainer and Pyxis cannot hide a folder: a spec that asks is refused, not run open.
    for runtime in ("apptainer", "pyxis"):
        with pytest.raises(ValueError, match="cannot hide"):
            runtimes.BUILDERS[runtime](made)
    assert "type=tmpfs,target=%s/__pycache__" % plan.mount_point in " ".join(
        runtimes.podman(made))
    with pytest.raises(ValueError, match="1 input copies for 0 inputs"):
        cellspec.binds(files, dataclasses.replace(plan, inputs=()))
    assert Path(plan.mount_point or "").is_absolute()
