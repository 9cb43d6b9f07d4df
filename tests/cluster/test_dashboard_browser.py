"""The Ray dashboard in a real headless Chromium, as a user meets it: the "Authentication Token
Required" box, a wrong token refused, Herd's token accepted, then a running Herd job on the Jobs
page, its actors (Controller, Learner, EnvActor) alive on the Actors page, and Herd's start-up
line in the driver log on the job's own page.

Driven through Selenium and Debian's chromium + chromium-driver. With HERD_SCREENSHOTS=<folder>
it saves dashboard-login.png, -jobs.png, -actors.png and -job-log.png there (docs/img holds the
ones docs/dashboard.md shows: HERD_SCREENSHOTS=docs/img pytest tests/cluster/test_dashboard_browser.py).
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from tests.jobs import SMALL, get_json, herd, status_when, submit, wait_for

pytestmark = pytest.mark.cluster

LOGIN_BOX = "Authentication Token Required"
HERD_ACTORS = ("Controller", "Learner", "EnvActor")
# a quiet, throwaway browser: no sandbox (containers run it as root), no GPU, nothing that calls home
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def chromium() -> tuple[str, str]:
    """(browser, driver) on PATH; skips with the reason where either is missing."""
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("no chromium and chromedriver on PATH (Debian: apt-get install chromium "
                    "chromium-driver)")
    return browser, driver


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = chromium()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(options=opts, service=Service(driver_path))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the screenshots' size
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    try:
        yield driver
    finally:
        driver.quit()


def page_text(driver) -> str:
    from selenium.common.exceptions import WebDriverException

    try:
        return driver.find_element("tag name", "body").text
    except WebDriverException:  # the page is reloading
        return ""


def wait_text(driver, *texts: str, timeout: float = 30, gone: bool = False) -> str:
    """The page's text once it shows every one of `texts` (with `gone`: none of them); the React
    app renders after the page loads and refreshes its tables every few seconds."""
    def seen():
        body = page_text(driver)
        ok = not any(t in body for t in texts) if gone else all(t in body for t in texts)
        return body if ok else None

    return wait_for(seen, timeout, f"the dashboard to {'drop' if gone else 'show'} {texts}", poll=0.3)


def rows(driver, *texts: str) -> list[str]:
    """The text of each table row that holds all of `texts`."""
    from selenium.common.exceptions import WebDriverException

    try:
        cells = [r.text for r in driver.find_elements("css selector", "tr")]
    except WebDriverException:  # a row went away while read (the table refreshed)
        return []
    return [c for c in cells if all(t in c for t in texts)]


def search(driver, label: str, text: str) -> None:
    """Type into the search box of a dashboard table (Jobs: Submission ID, Actors: Name), so that
    the rows sought are on its first page however many other jobs the cluster ran."""
    driver.find_element("xpath", f"//div[label[normalize-space()='{label}']]//input").send_keys(text)


def shot(driver, name: str) -> None:
    """With HERD_SCREENSHOTS: the page as docs/dashboard.md shows it, in 64 colours (a third of
    the bytes, the same look for a page of flat colours)."""
    folder = os.environ.get("HERD_SCREENSHOTS")
    if folder:
        from PIL import Image

        Path(folder).mkdir(parents=True, exist_ok=True)
        page = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
        page.quantize(colors=64, dither=Image.Dither.NONE).save(
            Path(folder) / f"dashboard-{name}.png", optimize=True)


NIL_ID = "f" * 32


def actors_page(driver, url: str, job: str, ray_job: str) -> None:
    """The Actors page with the job's actors, once Controller, Learner and EnvActor are ALIVE
    there. Ray 2.60's page at times adds, on an auto-refresh, a second row of an actor with an
    all-f ID that stays until a reload: loaded again (at most twice) while it shows one."""
    driver.get(f"{url}/#/actors")
    for attempt in range(3):
        if attempt:
            driver.refresh()
        wait_text(driver, "Actor ID")
        search(driver, "Name", job)  # every actor of a job is named after it
        for name in HERD_ACTORS:
            wait_for(lambda n=name: rows(driver, n, ray_job, "ALIVE"), 30,
                     f"{name} of job {ray_job} ALIVE on the Actors page", poll=0.5)
        if not any(row.startswith(NIL_ID) for row in rows(driver)):
            return


def log_in(driver, url: str, token: str) -> None:
    """Through the dashboard's own login box: typed, submitted, as a user does."""
    from selenium.webdriver.common.keys import Keys

    driver.get(url)
    wait_text(driver, LOGIN_BOX)
    shot(driver, "login")
    box = driver.find_element("css selector", "input[type=password]")
    box.send_keys("0" * 64, Keys.ENTER)
    wait_text(driver, "Invalid authentication token")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(token)
    driver.find_element("xpath", "//button[normalize-space()='Submit']").click()
    wait_text(driver, LOGIN_BOX, gone=True)
    cookie = driver.get_cookie("ray-authentication-token")
    assert cookie is not None and cookie["httpOnly"], cookie


def actors_up(url: str, job: str) -> bool:
    """Whether the job's controller counts an env actor; AssertionError with the log's tail
    when the job ended instead."""
    state = get_json(f"{url}/api/jobs/{job}")["status"]
    if state in ("SUCCEEDED", "FAILED", "STOPPED"):
        raise AssertionError(f"{job} ended {state} before its actors were up:\n"
                             + "\n".join(herd("logs", job, check=False).stdout.splitlines()[-20:]))
    return bool(status_when(job, lambda s: s["actors"]))


def test_dashboard_login_shows_the_job_and_its_actors(ray_cluster, tmp_path, browser):
    url = ray_cluster["dashboard"]
    token = herd("dashboard", "--token").stdout
    assert token.endswith("\n") and token.strip() == Path(os.environ["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
    token = token.strip()
    job = submit({**SMALL, "run": {**SMALL["run"], "name": "dashboard"}}, tmp_path)
    try:
        # while the job starts: the login (the app loads the same with or without it)
        log_in(browser, url, token)
        wait_for(lambda: actors_up(url, job), 120, "the job's env actor")
        ray_job = get_json(f"{url}/api/jobs/{job}")["job_id"]

        browser.get(f"{url}/#/jobs")
        wait_text(browser, "Submission ID")
        search(browser, "Submission ID", job)
        wait_for(lambda: rows(browser, job, "RUNNING"), 30, f"{job} RUNNING on the Jobs page", poll=0.5)
        shot(browser, "jobs")

        actors_page(browser, url, job, ray_job)
        shot(browser, "actors")

        browser.get(f"{url}/#/jobs/{job}")  # the job's own page: its driver log
        started = f"[herd] job {job}: learner at"
        wait_text(browser, started)
        from selenium.common.exceptions import StaleElementReferenceException

        for attempt in range(5):  # the log view re-renders as it refreshes: find the line again
            line = browser.find_element(  # the innermost element holding that line
                "xpath", f"//*[contains(., '{started}') and not(*[contains(., '{started}')])]")
            try:
                browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", line)
                break
            except StaleElementReferenceException:
                if attempt == 4:
                    raise
        shot(browser, "job-log")
    finally:
        herd("stop", job, check=False)
