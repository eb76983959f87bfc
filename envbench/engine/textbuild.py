"""An image from a Dockerfile's text alone, with no other context: the kit's small derived
images (the python base, the local launcher's VM, an architecture label)."""
from __future__ import annotations

import io
import tarfile
from typing import Any


def build(client: Any, dockerfile: str, tag: str, **options: Any) -> None:
    """Build ``dockerfile`` as ``tag``; never pulls, leaves no intermediate containers.
    Engine errors reach the caller, which words them for what it was building."""
    spool = io.BytesIO()
    with tarfile.open(fileobj=spool, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    spool.seek(0)
    client.images.build(fileobj=spool, custom_context=True, tag=tag, rm=True, forcerm=True,
                        pull=False, **options)
