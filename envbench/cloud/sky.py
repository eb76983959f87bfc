"""The one module that imports SkyPilot (the optional extra envbench[cloud], 0.14.*).

Tasks are built and checked by SkyPilot itself (``Task.from_yaml_config`` is its schema
check); hourly prices come from its catalog (``sky.catalog``), which it keeps under
``$SKY_RUNTIME_DIR/.sky/catalogs/v8/<cloud>/vms.csv`` (default: the home folder).
"""
from __future__ import annotations

import copy
import os
import time
from typing import Any, TextIO

from bench.messages import first_line
from envbench.cloud.launcher import LineStream, ProvisionFailed, Remote
from envbench.matrix.models import CONTAINER_INFRA, Cloud
from envbench.user_errors import UserError

INSTALL_HINT = "install the cloud extra: pip install 'envbench[cloud]' (or run ./noxw -s cloud)"


def import_sky() -> Any:
    os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
    try:
        import sky
    except ImportError as exc:
        raise UserError("cloud targets need SkyPilot, which is not installed (%s): %s"
                        % (exc, INSTALL_HINT))
    return sky


def validated_task(config: dict[str, Any]) -> Any:
    """A real ``sky.Task`` from task-YAML, or a UserError with SkyPilot's own reason."""
    sky = import_sky()
    try:
        # from_yaml_config consumes the dict it is given: it gets a copy.
        return sky.Task.from_yaml_config(copy.deepcopy(config))
    except Exception as exc:  # SkyPilot raises several types for one bad field
        raise UserError("SkyPilot refuses the task for %s: %s"
                        % (config.get("name"), first_line(exc, 500)))


def catalog_dir() -> str:
    home = os.environ.get("SKY_RUNTIME_DIR") or os.path.expanduser("~")
    return os.path.join(home, ".sky", "catalogs", "v8")


def cached_clouds() -> list[str]:
    """Clouds whose catalog is already on this machine (a dry run reads no network)."""
    folder = catalog_dir()
    if not os.path.isdir(folder):
        return []
    return sorted(c for c in os.listdir(folder)
                  if os.path.exists(os.path.join(folder, c, "vms.csv")))


def hourly_price(cloud: Cloud) -> tuple[float | None, str | None, str]:
    """(price per hour, instance type, where it came from or why there is none)."""
    sky = import_sky()
    from sky import catalog

    clouds = [cloud.cloud_name] if cloud.cloud_name else cached_clouds()
    clouds = [c for c in clouds if c in cached_clouds()]
    if not clouds:
        return None, cloud.instance_type, (
            "no SkyPilot catalog on this machine for %s (run `sky show-gpus` once online, or "
            "give price_per_hour)" % (cloud.cloud_name or "any cloud"))
    if not cloud.accelerators and not cloud.instance_type:
        return None, None, ("a CPU VM of SkyPilot's choosing has no price before it is "
                            "launched (give instance_type or price_per_hour)")
    best: tuple[float, str, str] | None = None
    name, count = cloud.accelerator
    for cloud_name in clouds:
        try:
            types: list[str] | None
            if cloud.instance_type:
                types = [cloud.instance_type]
            else:
                types, _ = catalog.get_instance_type_for_accelerator(
                    name, count, use_spot=cloud.use_spot, region=cloud.region,
                    clouds=cloud_name)
            for instance in types or []:
                price = catalog.get_hourly_cost(instance, cloud.use_spot, cloud.region, None,
                                                clouds=cloud_name)
                if best is None or price < best[0]:
                    best = (price, instance, cloud_name)
        except (ValueError, AssertionError, KeyError, sky.exceptions.ResourcesUnavailableError):
            continue  # this cloud does not offer it (or not as spot, or not there)
    if best is None:
        return None, cloud.instance_type, ("%s is not in the catalog of %s"
                                           % (cloud.accelerators or cloud.instance_type,
                                              ", ".join(clouds)))
    return best[0], best[1], "SkyPilot catalog (%s)" % best[2]


class SkyLauncher:
    """The fan-out's clusters on real clouds, through SkyPilot's client SDK (0.14):
    ``sky.launch`` + ``sky.stream_and_get`` (provision, sync, setup, submit the run),
    ``sky.tail_logs`` (the job's output and exit code), ``sky.down`` and ``sky.cost_report``.
    SkyPilot adds each cluster's ssh alias to ~/.ssh/config, which is how rsync reaches it."""

    name = "SkyPilot"

    def __init__(self) -> None:
        self.sky = import_sky()
        self._jobs: dict[str, int | None] = {}
        self._requests: dict[str, Any] = {}
        self.enabled: set[str] | None = None  # clouds `sky check` enabled for compute
        self._launched_at: dict[str, float] = {}

    def check(self, out: TextIO) -> set[str]:
        """`sky check`, first: which clouds this machine can launch on (credentials and the
        cloud's SDK, from envbench[cloud-<name>]), said before anything is launched."""
        from sky.client import sdk  # `sky.check` is the module of that name, not the call

        try:
            found = self.sky.get(sdk.check(infra_list=None, verbose=False))
        except Exception as exc:  # the API server's own failure, in its words
            raise UserError("SkyPilot's `sky check` failed: %s" % first_line(exc, 500))
        enabled = set()
        for per_cloud in (found or {}).values():
            for name, capabilities in (per_cloud or {}).items():
                if "compute" in {str(getattr(c, "value", c)).lower() for c in capabilities}:
                    enabled.add(str(name).lower())
        vm = sorted(enabled - set(CONTAINER_INFRA))
        print("SkyPilot: clouds enabled for compute: %s%s" % (
            ", ".join(vm) or "none", "" if vm else " (install envbench[cloud-aws] or another "
            "cloud's extra, set its credentials, and run `sky check`)"), file=out, flush=True)
        self.enabled = set(vm)
        return self.enabled

    def launch(self, cluster: str, task: dict[str, Any], out: Any) -> Any:

        sky = self.sky
        stream = LineStream(out)
        resources = task.setdefault("resources", {})
        cloud = str(resources.get("infra") or "").split("/")[0]
        if self.enabled is not None:
            if cloud and cloud not in self.enabled:
                raise ProvisionFailed("SkyPilot has no credentials or SDK for %s here (`sky "
                                      "check`): install envbench[cloud-%s] and set up its "
                                      "credentials" % (cloud, cloud))
            if not cloud:  # the cheapest, but among VM clouds only: pods have no engine
                if not self.enabled:
                    raise ProvisionFailed("no VM cloud is enabled in SkyPilot (`sky check`)")
                resources["any_of"] = [{"infra": name} for name in sorted(self.enabled)]
        self._launched_at[cluster] = time.time()
        try:
            request = sky.launch(validated_task(task), cluster_name=cluster)
            self._requests[cluster] = request
            job_id, _handle = sky.stream_and_get(request, output_stream=stream)
        except UserError:
            raise
        except Exception as exc:  # no capacity, no credentials, quota: SkyPilot's own words
            raise ProvisionFailed("%s: %s" % (type(exc).__name__, first_line(exc, 500)))
        finally:
            stream.flush()
        self._jobs[cluster] = job_id
        return Remote(cluster)

    def wait(self, cluster: str, out: Any) -> int:

        stream = LineStream(out)
        try:
            return int(self.sky.tail_logs(cluster, self._jobs.get(cluster), follow=True,
                                          output_stream=stream))
        finally:
            stream.flush()

    def down(self, cluster: str) -> None:
        sky = self.sky
        request = self._requests.pop(cluster, None)
        if request is not None:
            try:  # a launch still provisioning: stop asking for the VM first, and wait
                # until the server has cancelled it, or `down` may race a VM coming up
                sky.get(sky.api_cancel(request, silent=True))
            except Exception:
                pass
        try:
            sky.get(sky.down(cluster))
        except sky.exceptions.ClusterDoesNotExist:
            pass  # never came up, or autostop already took it down

    def clusters(self) -> list[str]:
        return [str(_field(r, "name")) for r in self.sky.get(self.sky.status()) or []]

    def costs(self, clusters: list[str]) -> dict[str, float]:
        records = self.sky.get(self.sky.cost_report(days=1))
        # By name and launch time: an earlier cluster of the same name is in the report too.
        return {r["name"]: float(r["total_cost"]) for r in records
                if r.get("name") in clusters and r.get("total_cost") is not None
                and float(r.get("launched_at") or 0) >= self._launched_at.get(r["name"], 0) - 120}


def _field(record: Any, name: str) -> Any:
    """A field of a SkyPilot response: a model with attributes, or a plain dict."""
    return record[name] if isinstance(record, dict) else getattr(record, name)


