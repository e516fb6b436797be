"""Headless Chromium through Selenium, for the checks that look at the timeline page.

Why one place: the UI tests (``tests/provider/test_ui_server.py``) and the scale backfill's
render timing (``testing/scale_backfill.py``) open the page in the same browser, with the same
flags. Debian's ``chromium`` and ``chromium-driver`` (``scripts/bootstrap.sh`` installs both);
a missing one is a broken set-up, reported with the fix, not a reason to skip.
"""

from __future__ import annotations

import os
import shutil


class BrowserNotInstalledError(RuntimeError):
    """chromium or chromedriver is missing."""


def headless_chrome(profile_dir: str | os.PathLike, size: str = "1400,1100"):
    """A ``selenium.webdriver.Chrome``, headless, window ``size`` ("W,H"), its profile in
    ``profile_dir``; the caller quits it."""
    from selenium import webdriver  # the test extra; bootstrap installs it
    from selenium.webdriver.chrome.service import Service
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not (binary and driver_bin):
        raise BrowserNotInstalledError("chromium and chromedriver are missing: run scripts/bootstrap.sh "
                                       "(apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--window-size={size}", f"--user-data-dir={profile_dir}"):
        opts.add_argument(a)
    return webdriver.Chrome(options=opts, service=Service(driver_bin))


__all__ = ["BrowserNotInstalledError", "headless_chrome"]
