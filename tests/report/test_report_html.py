"""The HTML report in a real headless Chromium: loads offline, every image decodes, the
screenshot is not blank, it is readable at phone width, and the headline is the first thing on
the screen (its screenshots are kept where $STALLBENCH_SCREENSHOTS names a folder)."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from stallbench.cli import main

CHROMEDRIVER = "/usr/bin/chromedriver"
needs_chromium = pytest.mark.skipif(
    not (Path(CHROMEDRIVER).exists() and (shutil.which("chromium") or
                                          shutil.which("chromium-browser"))),
    reason="chromium and chromium-driver (Debian packages) are not installed")
pytestmark = [pytest.mark.pure, needs_chromium]


def browser(profile: Path, width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--no-first-run",
                 "--disable-component-update", "--disable-sync",
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


def test_the_headline_is_the_first_thing_on_the_screen(tmp_path, capsys):
    """A report whose reads got 3x slower: on a laptop's screen and a phone's, the boxed
    headline is in the first screenful, above every table, with 'worse' in its red."""
    rng = np.random.default_rng(35)
    for seed in range(2):
        for variant, scale in (("vanilla", 1.0), ("slow", 3.0)):
            write_run(tmp_path / "results", variant,
                      {"read": lognormal_ns(rng, 20000, 5e5, 0.4, scale)}, duration_s=4.0,
                      seed=seed)
    report = tmp_path / "report.html"
    assert main(["compare", "vanilla", "slow", "--results", str(tmp_path / "results"),
                 "--format", "html", "--output", str(report)]) == 0
    kept = os.environ.get("STALLBENCH_SCREENSHOTS")
    for name, width, height in (("laptop", 1280, 800), ("phone", 412, 915)):
        driver = browser(tmp_path / f"profile-{name}", width, height)
        try:
            driver.get(report.as_uri())
            box = driver.execute_script(
                "const h = document.querySelector('section.headline');"
                "const r = h.getBoundingClientRect();"
                "const t = document.querySelector('section.headline ~ div.scroll table');"
                "return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,"
                " text: h.innerText, inner: window.innerHeight, dpr: window.devicePixelRatio,"
                " first: t ? t.getBoundingClientRect().top : 1e9};")
            png = driver.get_screenshot_as_png()
        finally:
            driver.quit()
        assert "slow against vanilla (2 vs 2 run(s))" in box["text"]
        assert "worse" in box["text"] and "p50" in box["text"]
        assert 0 <= box["top"] < box["inner"] / 2          # in the first half-screen
        assert box["first"] > box["top"]                    # above the tables
        if kept:
            Path(kept).mkdir(parents=True, exist_ok=True)
            (Path(kept) / f"headline-{name}.png").write_bytes(png)
        from PIL import Image
        image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
        scale = box["dpr"]
        region = image[int(box["top"] * scale):int(min(box["bottom"], box["inner"]) * scale),
                       int(box["left"] * scale):int(box["right"] * scale)]
        red = (region[..., 0] > 140) & (region[..., 1] < 80) & (region[..., 2] < 80)
        assert red.sum() > 20, f"{name}: no red 'worse' in the headline's box"
        assert (region.mean(axis=2) < 100).mean() > 0.005     # dark text: not blank
