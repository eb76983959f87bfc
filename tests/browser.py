"""A real browser's look at a page: headless Chromium (Debian's) takes a screenshot."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def screenshot(page: Path, tmp_path: Path, height: int = 2400):
    """The page as Chromium draws it, 1280 pixels wide; fails in CI without Chromium."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing; ./noxw -s tests installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed")
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--user-data-dir=%s" % (tmp_path / "profile"),
                    "--window-size=1280,%d" % height, "--screenshot=%s" % shot, page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    from PIL import Image

    return Image.open(shot)


def assert_drawn(image, max_dark: float = 0.6) -> None:
    """Text, tables (and charts): not a blank, black or unstyled page."""
    grey = image.convert("L")
    histogram = grey.histogram()
    dark = sum(histogram[:128]) / sum(histogram)
    assert 0.005 < dark < max_dark, dark
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 50  # anti-aliased text, coloured marks
