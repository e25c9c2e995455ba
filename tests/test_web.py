"""The web page in a real browser: Playwright drives Debian's headless Chromium (/usr/bin/chromium;
`.ci/run` installs it with apt-get) against `superbloom serve` on a loopback port. It types a
context with autocomplete, sees the predictions and the exactness flag, clicks one to expand the
set, and saves a screenshot to test-artifacts/web.png. Skips, saying why, without either
(SUPERBLOOM_CHROMIUM names another Chromium binary)."""
import json
import os
import shutil
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = os.environ.get("SUPERBLOOM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (pip install "
                                   "'.[test]')")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium, or set SUPERBLOOM_CHROMIUM)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def test_page_predicts_and_expands(browser, server):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 900, "height": 900})
    requested, errors = [], []
    page.on("request", lambda r: requested.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(server + "/")
    page.wait_for_selector("#model:has-text('4,093 ids')")

    page.fill("#entity", "copenh")  # autocomplete is case-insensitive, on display names
    page.wait_for_selector("#suggest li:has-text('Copenhagen')")
    page.keyboard.press("Enter")
    page.wait_for_selector(".chip[data-id='Copenhagen']")
    page.fill("#entity", "people's rep")
    page.click("#suggest li:has-text(\"People's_Republic_of_China\")")
    page.wait_for_selector(".chip[data-id='People%27s_Republic_of_China']")
    expect(page.locator("#preds li")).to_have_count(10)  # locator assertions: the page's CSP forbids eval
    flag = page.text_content("#exactness")
    assert flag == "certified exact" or flag == "approximate (beam 10)", flag
    page.check("#exact")  # exact decoding: the flag says so
    page.wait_for_selector("#exactness:has-text('certified exact')")

    first = page.locator("#preds li").first
    picked = first.get_attribute("data-id")
    first.click()  # expansion: the prediction joins the set and the page predicts again
    page.wait_for_selector(f".chip[data-id='{picked}']")
    expect(page.locator(f"#preds li[data-id={json.dumps(picked)}]")).to_have_count(0)
    expect(page.locator("#preds li")).to_have_count(10)
    assert page.locator(".chip").count() == 3
    widths = page.eval_on_selector_all("#preds .bar", "bars => bars.map(b => b.getBoundingClientRect().width)")
    assert widths[0] == max(widths) and widths[0] > 0  # score bars: the best is the longest

    page.fill("#entity", "Not_A_Page")
    page.keyboard.press("Enter")  # unknown ids are shown as such, the others still predict
    page.wait_for_selector(".chip.unknown[data-id='Not_A_Page']")
    page.wait_for_selector("#status:has-text('unknown (ignored): Not_A_Page')")
    page.click("#expand")  # five more, server-side expansion
    expect(page.locator(".chip")).to_have_count(9)

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web.png"), full_page=True)
    assert not errors, errors
    assert requested and all(u.startswith(server) for u in requested)  # self-contained: nothing external
    page.close()


def test_docs_load_offline_under_the_csp(browser, server):
    """/docs (Swagger UI from the installed bundle, its inline script allowed by hash) runs, with no
    content-security-policy violation and nothing fetched from elsewhere."""
    from playwright.sync_api import expect

    page = browser.new_page()
    requested, errors = [], []
    page.on("request", lambda r: requested.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(server + "/docs")
    expect(page.locator("#swagger-ui .swagger-ui")).to_have_count(1)  # rendered by the bundle's script
    page.wait_for_load_state("networkidle")
    assert server + "/openapi.json" in requested
    assert not errors, errors
    assert all(u.startswith(server) for u in requested), requested
    page.close()


def test_docs_render_the_api(browser, server):
    """Swagger UI renders FastAPI's OpenAPI 3.1 schema (Swagger UI 4 said 'Unable to render this definition')."""
    from playwright.sync_api import expect

    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(server + "/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("superbloom")
    for path in ("/v1/predict", "/v1/expand", "/v1/entities", "/v1/model", "/health"):
        expect(page.locator(f".opblock-summary-path[data-path='{path}']")).to_have_count(1)
    page.locator(".opblock-summary-path[data-path='/v1/predict']").click()  # expand: the request schema shows
    expect(page.locator(".opblock-body").first).to_contain_text("context")
    assert not errors, errors
    page.close()


def test_enter_adds_what_was_typed_not_a_stale_suggestion(browser, server):
    """Type "mil", see its suggestions, type "es d" and press Enter before the suggestions for
    "miles d" arrive (held back here): the set gets Miles_Davis, never the stale top suggestion."""
    from playwright.sync_api import expect

    page = browser.new_page()
    held, hold = [], [False]
    page.route("**/v1/entities?*", lambda route: held.append(route) if hold[0] else route.continue_())
    page.goto(server + "/")
    page.fill("#entity", "mil")
    expect(page.locator("#suggest li").first).to_contain_text("Milan")  # the most frequent "mil..." id
    hold[0] = True  # from now on autocomplete answers are late
    page.locator("#entity").press_sequentially("es d")
    page.keyboard.press("Enter")
    for _ in range(50):  # the page asks for suggestions for "miles d" (held)
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "no autocomplete request was made for the new input"
    page.wait_for_timeout(300)  # the page's debounce (80 ms) has fired too
    expect(page.locator(".chip")).to_have_count(0)  # nothing added from the list for "mil"
    hold[0] = False
    for route in held:
        route.continue_()
    expect(page.locator(".chip")).to_have_count(1)
    expect(page.locator(".chip[data-id='Miles_Davis']")).to_have_count(1)
    expect(page.locator("#entity")).to_have_value("")

    page.fill("#entity", "miles d")  # fresh suggestions: Enter takes the highlighted one at once
    expect(page.locator("#suggest li").first).to_contain_text("Miles_Davis")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    expect(page.locator(".chip")).to_have_count(1)  # already in the set: not added twice
    page.close()


def test_escape_then_enter_takes_the_typed_text(browser, server):
    from playwright.sync_api import expect

    page = browser.new_page()
    page.goto(server + "/")
    page.fill("#entity", "Mil")
    expect(page.locator("#suggest li").first).to_contain_text("Milan")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    expect(page.locator(".chip.unknown[data-id='Mil']")).to_have_count(1)
    page.close()


def test_page_shows_similar_items_and_adds_one(browser, server):
    """The similar-items card: the newest id's nearest ids (POST /v1/similar-items, the set's ids left
    out) with their cosines; a clicked chip's instead; clicking one adds it to the set."""
    from playwright.sync_api import expect

    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(server + "/")
    expect(page.locator("#simcard")).to_be_hidden()
    for typed, id_ in (("copenh", "Copenhagen"), ("jazz", "Jazz")):
        page.fill("#entity", typed)
        page.wait_for_selector(f"#suggest li:has-text('{id_}')")
        page.keyboard.press("Enter")
        page.wait_for_selector(f".chip[data-id='{id_}']")
    expect(page.locator("#simof")).to_have_text("Jazz")  # the newest id of the set
    expect(page.locator("#sims li")).to_have_count(10)
    shown = page.eval_on_selector_all("#sims li", "lis => lis.map(li => li.dataset.id)")
    assert not {"Jazz", "Copenhagen"} & set(shown)
    page.click(".chip[data-id='Copenhagen'] .name")  # a chip's own similar items
    expect(page.locator("#simof")).to_have_text("Copenhagen")
    picked = page.locator("#sims li").first.get_attribute("data-id")
    page.locator("#sims li").first.click()
    page.wait_for_selector(f".chip[data-id={json.dumps(picked)}]")
    expect(page.locator(".chip")).to_have_count(3)
    expect(page.locator(f"#sims li[data-id={json.dumps(picked)}]")).to_have_count(0)
    assert not errors, errors
    page.close()
