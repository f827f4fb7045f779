"""`codeagent view` in a real headless Chromium (Debian's chromium and chromedriver, driven by selenium):
the page loads, lists a replayed run, opens it and shows its diff; a run whose text is markup runs nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from codeagent.trajectory import TrajectoryStore
from tests.support.view_runs import SCRIPT, replay_solve, write_hostile

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                       reason="needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)"),
]
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


@pytest.fixture
def browser():
    from selenium import webdriver  # the dev extra has it: missing, this test fails rather than skips
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory(prefix="codeagent-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        driver.set_page_load_timeout(60)
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture
def viewer(tmp_path):
    """`codeagent view` over a store holding a replayed run and a hostile one: (url, replayed id, hostile id)."""
    store = tmp_path / "store"
    replayed = replay_solve(store)
    hostile = write_hostile(TrajectoryStore(store))
    proc = subprocess.Popen([sys.executable, "-m", "codeagent.cli", "view", "--store", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", url), url
        yield url, replayed, hostile
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def no_alert(driver) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        driver.switch_to.alert  # noqa: B018 - raises when no alert is open
    except NoAlertPresentException:
        return True
    return False


def test_the_page_lists_a_run_opens_it_and_shows_its_diff(browser, viewer):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, replayed, hostile = viewer
    browser.get(url)
    links = {link.text: link for link in browser.find_elements(By.CSS_SELECTOR, "#runs a.run-link")}
    assert set(links) == {replayed, hostile}
    browser.find_element(By.NAME, "task").send_keys("cart")  # the filter form keeps the token
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    WebDriverWait(browser, 30).until(lambda driver: "task=cart" in driver.current_url)
    links = {link.text: link for link in browser.find_elements(By.CSS_SELECTOR, "#runs a.run-link")}
    assert set(links) == {replayed}
    links[replayed].click()
    WebDriverWait(browser, 30).until(lambda driver: f"/runs/{replayed}?" in driver.current_url)
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Run {replayed}"
    added = [line.text for line in browser.find_elements(By.CSS_SELECTOR, "#patch .diff div.add")]
    removed = [line.text for line in browser.find_elements(By.CSS_SELECTOR, "#patch .diff div.del")]
    assert "+            del self._lines[sku]" in added and removed == []
    assert browser.find_element(By.CSS_SELECTOR, "#patch .diff div.meta").text == "diff --git a/shop/cart.py b/shop/cart.py"
    assert browser.find_element(By.ID, "status").text.startswith("submitted")
    # the steps' tool outputs are collapsed until opened
    output = browser.find_elements(By.CSS_SELECTOR, "#step-2 pre.output")[0]
    assert not output.is_displayed()
    browser.find_element(By.CSS_SELECTOR, "#step-2 .call summary").click()
    assert output.is_displayed() and output.text
    # the style sheet applied (its nonce matched the policy): an added line is green
    assert browser.find_element(By.CSS_SELECTOR, "#patch div.add").value_of_css_property("background-color") \
        == "rgba(230, 255, 236, 1)"


def test_a_run_whose_text_is_markup_runs_nothing(browser, viewer):
    from selenium.webdriver.common.by import By

    url, _, hostile = viewer
    browser.get(url.replace("/?", f"/runs/{hostile}?"))
    assert no_alert(browser)
    assert browser.find_elements(By.TAG_NAME, "script") == [] and browser.find_elements(By.TAG_NAME, "img") == []
    assert browser.find_element(By.CSS_SELECTOR, "pre.reply").text == f"running {SCRIPT}"
    for summary in browser.find_elements(By.CSS_SELECTOR, ".call summary"):
        summary.click()
    assert browser.find_element(By.CSS_SELECTOR, "pre.output").text == f"{SCRIPT}\n<img src=x onerror=alert(2)>"
    assert f"+{SCRIPT}" in [line.text[:len(SCRIPT) + 1] for line in browser.find_elements(By.CSS_SELECTOR, "div.add")]
    assert no_alert(browser)
    browser.get(url)  # the runs list shows the hostile task and model as text too
    assert no_alert(browser) and f"scripted{SCRIPT}" in browser.find_element(By.ID, "runs").text
