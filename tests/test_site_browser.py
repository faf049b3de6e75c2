"""Every built page in real headless Chromium (Playwright), at 1366 px and at 390 px.

Checked on each page: no console error, images decode, every same-site link resolves, the page
never scrolls sideways (only a table container may), the statistics tables show their status and
validation columns at 1366 px, chart text is at least 9 px on screen, and the site works when
opened from disk (file://). Playwright drives the system Chromium when there is one, else its own
(`playwright install chromium`); without either the test skips, except under CI (CI=true).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import sitebuild  # noqa: E402

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": (1366, 768), "phone": (390, 844)}
MIN_TEXT_PX = 9.0

# Runs in the page once every image has loaded: what the checks below need from the layout.
PROBE = """
async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener('load', done); img.addEventListener('error', done);
  })));
  const wide = document.documentElement.scrollWidth;
  // Wide content may scroll inside its own container (a table, a code block), never the page.
  const inScroller = el => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true;
    }
    return false;
  };
  const overflowing = Array.from(document.querySelectorAll('article *'))
    .filter(el => el.getBoundingClientRect().right > innerWidth + 1 && !inScroller(el)
            && el.getBoundingClientRect().width > 0)
    .map(el => el.tagName + '.' + el.className).slice(0, 5);
  const tables = Array.from(document.querySelectorAll('article .md-typeset__scrollwrap'))
    .map(wrap => {
      const box = wrap.getBoundingClientRect();
      const heads = Array.from(wrap.querySelectorAll('th')).map(th => {
        const r = th.getBoundingClientRect();
        return [th.textContent.trim(), r.left >= box.left - 1 && r.right <= box.right + 1];
      });
      return heads;
    });
  return {
    title: document.title,
    scrollWidth: wide, innerWidth: innerWidth, overflowing: overflowing,
    images: imgs.map(img => [img.getAttribute('src'), img.naturalWidth,
                             img.getBoundingClientRect().width]),
    links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
    tables: tables,
    barText: Array.from(document.querySelectorAll('.lb-card'))
      .map(el => parseFloat(getComputedStyle(el).fontSize)),
    headings: document.querySelectorAll('article h1').length,
  };
}
"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}: required under CI")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as p:
        exe = find_chromium()
        try:
            chromium = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        except Error as e:
            _unavailable(f"no Chromium to drive ({str(e).splitlines()[0]}); apt-get install "
                         "chromium or playwright install chromium")
        yield chromium
        chromium.close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture(scope="module")
def served_site():
    built = sitebuild.shared_site()
    assert built.build.returncode == 0, built.build.stderr
    handler = functools.partial(_QuietHandler, directory=str(built.site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield built.site, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def visit(page, url: str) -> tuple[dict[str, Any], list[str]]:
    """Load `url`; the probe's findings and the console errors and failed requests seen."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error"
            else None)
    page.on("pageerror", lambda e: errors.append(f"exception: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    response = page.goto(url, wait_until="load")
    assert response is None or response.ok, f"{url}: {response.status}"
    return page.evaluate(PROBE), errors


def svg_text_sizes(path: Path) -> tuple[float, float]:
    """(smallest font size, width) of a matplotlib SVG, both in its user units (points)."""
    svg = path.read_text(encoding="utf-8")
    width = float(re.search(r'width="([0-9.]+)pt"', svg).group(1))
    sizes = [float(v) for v in re.findall(r"font(?:-size)?:\s*[^;\"]*?([0-9.]+)px", svg)]
    return (min(sizes) if sizes else float("inf")), width


def _site_file(site: Path, base: str, url: str) -> Path | None:
    """The file a same-site link names, or None for an external link."""
    if not url.startswith(base):
        return None
    path = unquote(urlparse(url).path).lstrip("/")
    target = site / path
    return target / "index.html" if target.is_dir() else target


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_every_page_at_two_widths(browser, served_site, width):
    site, base = served_site
    w, h = WIDTHS[width]
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                   if p.name != "404.html")
    assert {"index.html", "benchmarks/cpu.html", "benchmarks/gpu.html"} <= set(pages)
    context = browser.new_context(viewport={"width": w, "height": h})
    seen: dict[str, dict[str, Any]] = {}
    try:
        for rel in pages:
            page = context.new_page()
            found, errors = visit(page, f"{base}/{rel}")
            page.close()
            assert not errors, f"{rel}: {errors}"
            assert found["headings"] == 1, rel
            assert found["scrollWidth"] <= found["innerWidth"] + 1, (
                f"{rel} scrolls sideways at {w} px: {found['overflowing']}")
            assert not found["overflowing"], f"{rel} at {w} px: {found['overflowing']}"
            broken = [src for src, natural, _ in found["images"] if natural <= 0]
            assert not broken, f"{rel}: images that did not decode: {broken}"
            dead = [u for u in found["links"] if (f := _site_file(site, base, u)) is not None
                    and not f.is_file()]
            assert not dead, f"{rel}: links to nothing: {dead}"
            for src, _, shown in found["images"]:
                if src.endswith(".svg") and shown > 0:
                    smallest, width_pt = svg_text_sizes((site / rel).parent / src)
                    assert smallest * shown / width_pt >= MIN_TEXT_PX, (
                        f"{rel}: {src} text is {smallest * shown / width_pt:.1f} px at {w} px")
            assert all(size >= MIN_TEXT_PX for size in found["barText"]), rel
            seen[rel] = found
    finally:
        context.close()
    cpu = seen["benchmarks/cpu.html"]
    stats = [t for t in cpu["tables"] if [c for c, _ in t][-2:] == ["status", "peak mem"]]
    assert len(stats) >= 10 and cpu["barText"]
    for heads in stats:
        visible = dict(heads)
        keys = ("size · dir.", "variant", "median") if width == "phone" else (
            "variant", "median", "95% CI", "rel. error (tol.)", "status")
        assert all(visible[k] for k in keys), (width, heads)
    assert len([i for i in cpu["images"] if i[0].endswith(".svg")]) >= 10
    assert seen["benchmarks/index.html"]["tables"]


def test_the_site_works_from_disk(browser, served_site):
    """README: open site/index.html. Links, search's worker and images work from file://."""
    site, _ = served_site
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    found, errors = visit(page, (site / "index.html").as_uri())
    assert not errors, errors
    assert "the-answer" in page.content()
    page.click("article a[href='benchmarks/index.html#who-is-fastest']")
    page.wait_for_load_state("load")
    assert page.url.endswith("benchmarks/index.html#who-is-fastest")
    page.click("nav.lb-pagelinks a[href='cpu.html']")
    page.wait_for_load_state("load")
    assert page.url.endswith("benchmarks/cpu.html")
    assert page.inner_text("article h1").startswith("CPU results")
    images = page.evaluate("Array.from(document.images).map(i => i.naturalWidth)")
    assert images and min(images) > 0
    # search runs in a Worker, which file:// allows only through the vendored shim
    page.click("input.md-search__input")
    page.keyboard.type("methodology", delay=20)  # typed: Material searches on key events
    page.wait_for_selector(".md-search-result__item", timeout=15000)
    page.close()


def test_probe_catches_a_broken_image_and_a_page_too_wide(browser, served_site):
    """The checks can fail: a missing image and a 2000 px block are both reported."""
    site, base = served_site
    broken = site / "broken.html"
    broken.write_text('<html><body><article><h1>x</h1><img src="missing.svg">'
                      '<div style="width:2000px">wide</div></article></body></html>')
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        found, errors = visit(page, f"{base}/broken.html")
    finally:
        page.close()
        broken.unlink()  # the site is shared with the build tests
    assert found["images"][0][:2] == ["missing.svg", 0]
    assert any("missing.svg" in e or "404" in e for e in errors), errors
    assert found["scrollWidth"] > found["innerWidth"] and found["overflowing"]


def test_choosing_page_shows_its_chart_table_and_csv(browser, served_site):
    """The page "Choosing a NUFFT" in Chromium: reached from the link row, the answer first,
    its charts decoded, the "fastest to reach" tables shown, and the CSV link downloads the
    study's points. Without a study in the fixture (bench_suite without the study axes) it says
    how to make one."""
    site, base = served_site
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    try:
        visit(page, f"{base}/benchmarks/index.html")
        page.click("nav.lb-pagelinks a[href='choosing-a-nufft.html']")
        page.wait_for_load_state("load")
        found = page.evaluate(PROBE)
        assert page.inner_text("article h1").startswith("Choosing a NUFFT")
        text = page.inner_text("article")
        assert text.index("the fastest library to reach 1e-2") < text.index("How to read")
        charts = [i for i in found["images"] if "assets/accuracy/" in i[0]]
        assert len(charts) == len(sitebuild.fx.ACCURACY_PANELS)
        assert all(natural > 0 and shown > 0 for _, natural, shown in charts), charts
        heads = [[c for c, _ in t] for t in found["tables"]]
        reach = [h for h in heads if h[:2] == ["accuracy", "fastest"]]
        assert len(reach) == 2 * len(sitebuild.fx.ACCURACY_PANELS)
        assert all(h[-2:] == ["runner-up", "ratio"] for h in reach)
        assert "1e-5" in text
        link = page.locator("article a[href*='assets/accuracy/'][href$='.csv']").first
        href = link.get_attribute("href")
        response = page.request.get(link.evaluate("a => a.href"))
        assert response.ok, href
        body = response.text()
        assert body.startswith("run_id,machine,device,num_threads,case,direction")
        assert body.count("\n") > 100
    finally:
        page.close()
