"""The one module that imports SkyPilot (the optional extra envbench[cloud], 0.14.*).

Tasks are built and checked by SkyPilot itself (``Task.from_yaml_config`` is its schema
check); hourly prices come from its catalog (``sky.catalog``), which it keeps under
``$SKY_RUNTIME_DIR/.sky/catalogs/v8/<cloud>/vms.csv`` (default: the home folder).
"""
from __future__ import annotations

import copy
import os
from typing import Any

from envbench.errors import UserError
from envbench.matrix import Cloud

INSTALL_HINT = "install the cloud extra: pip install 'envbench[cloud]' (or run nox -s cloud)"


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
                        % (config.get("name"), str(exc).strip().splitlines()[0]))


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
    best: tuple[float, str, str] | None = None
    name, count = cloud.accelerator
    for cloud_name in clouds:
        try:
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
                                           % (cloud.accelerators, ", ".join(clouds)))
    return best[0], best[1], "SkyPilot catalog (%s)" % best[2]
