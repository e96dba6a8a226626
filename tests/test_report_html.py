"""The HTML report in a real headless Chromium: loads offline, every image decodes, the
screenshot is not blank, and it is readable at phone width."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_compare_fixtures import lognormal_ns, write_run

from stallbench.cli import main

CHROMEDRIVER = "/usr/bin/chromedriver"
needs_chromium = pytest.mark.skipif(
    not (Path(CHROMEDRIVER).exists() and (shutil.which("chromium") or
                                          shutil.which("chromium-browser"))),
    reason="chromium and chromium-driver (Debian packages) are not installed")
pytestmark = needs_chromium


def browser(profile: Path, width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--no-first-run",
                 f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def test_html_report_in_headless_chromium(tmp_path, capsys):
    rng = np.random.default_rng(9)
    for variant, scale in (("vanilla", 1.0), ("slow", 1.4)):
        write_run(tmp_path / "results", variant, {"read": lognormal_ns(rng, 20000, 5e5, 0.4,
                                                                       scale)},
                  duration_s=5.0)
    report = tmp_path / "report.html"
    assert main(["compare", "vanilla", "slow", "--results", str(tmp_path / "results"),
                 "--format", "html", "--output", str(report)]) == 0
    text = report.read_text()
    assert "http://" not in text and "https://" not in text  # works offline: nothing fetched

    driver = browser(tmp_path / "profile", 412, 915)  # a phone-sized window
    try:
        driver.get(report.as_uri())
        images = driver.find_elements("tag name", "img")
        assert len(images) >= 4
        widths = driver.execute_script(
            "return Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
        assert all(w > 0 for w in widths), widths
        # readable on a phone: the page itself does not scroll sideways, wide tables do
        overflow = driver.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1
        assert "p99" in driver.find_element("tag name", "body").text
        png = driver.get_screenshot_as_png()
    finally:
        driver.quit()
    from PIL import Image
    image = Image.open(io.BytesIO(png)).convert("L")
    pixels = np.asarray(image)
    assert pixels.std() > 10 and (pixels < 128).mean() > 0.005  # not blank: dark text on light
