"""envbench, the host side: matrix -> images -> cells in containers -> results -> report,
one subpackage per stage (docs/architecture.md, "The layout"). Never imports torch: that
lives in the images (bench/).
"""
from __future__ import annotations

__version__ = "0.1.0"
