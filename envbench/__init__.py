"""envbench, the host side: matrix, images, container runs, results, report.

Never imports torch: that lives in the images (bench/).
"""
from __future__ import annotations

__version__ = "0.1.0"
