"""`envbench base-image`: the local Debian base image, built with debootstrap."""
from __future__ import annotations

import sys
from typing import TextIO

from envbench import provision
from envbench.command_options import Options
from envbench.engine import connection
from envbench.images import baseimage
from envbench.user_errors import UserError


def run(opts: Options, out: TextIO = sys.stdout) -> int:
    as_root = provision.privileged()
    if as_root is None:
        raise UserError("debootstrap needs root: run `sudo %s -m envbench base-image`"
                        % sys.executable)
    baseimage.ensure(connection.connect(), out=out, as_root=as_root)
    return 0
