"""`mkdocs build --strict` on pages generated from fixture runs, in a scratch copy of docs/."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import sitebuild  # noqa: E402

# The offline plugin turns directory URLs off, so the built site opens from file://.
PAGES = ["index.html", "benchmarks/index.html", "benchmarks/choosing-a-nufft.html",
         "benchmarks/cpu.html", "benchmarks/gpu.html",
         "benchmarks/history.html", "benchmarks/profiles.html", "benchmarks/methodology.html",
         "adding-a-library.html"]


@pytest.fixture(scope="module")
def built():
    return sitebuild.shared_site()


def test_strict_build_passes_without_warnings(built):
    out = built.build.stdout + built.build.stderr
    assert built.build.returncode == 0, out
    assert "WARNING" not in out, out
    for page in PAGES:
        assert (built.site / page).is_file(), page


def test_site_is_offline_safe(built):
    for html in built.site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        assert "fonts.googleapis.com" not in text and "fonts.gstatic.com" not in text, html
        # every script and stylesheet is served from the site itself (the offline plugin's
        # Worker shim included: vendored, not from unpkg.com)
        for url in re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', text):
            pytest.fail(f"{html} loads {url} from the network")
    home = (built.site / "index.html").read_text(encoding="utf-8")
    assert 'src="javascripts/iframe-worker/shim.js"' in home
    assert (built.site / "search" / "search_index.js").is_file()  # search inlined for file://


def test_home_opens_with_the_answer_and_links_it(built):
    home = (built.site / "index.html").read_text(encoding="utf-8")
    answer = home.index('id="the-answer"')
    assert answer < home.index('id="how-the-numbers-are-made"')
    body = home[answer:]
    assert "the fastest validated result is" in body
    assert 'href="benchmarks/index.html#who-is-fastest"' in body
    assert "--8&lt;--" not in home and "--8<--" not in home  # the snippet was included


def test_every_generated_page_links_every_page(built):
    wanted = ["index.html", "index.html", "choosing-a-nufft.html", "cpu.html", "gpu.html",
              "history.html",
              "profiles.html", "findings.html", "methodology.html",
              "running-on-many-machines.html", "adding-a-library.html"]
    for page in ("benchmarks/index.html", "benchmarks/cpu.html", "benchmarks/gpu.html",
                 "benchmarks/history.html", "benchmarks/profiles.html",
                 "benchmarks/choosing-a-nufft.html"):
        text = (built.site / page).read_text(encoding="utf-8")
        row = text[text.index('class="lb-pagelinks"'):]
        row = row[:row.index("</nav>")]
        links = re.findall(r'href="([^"]+)"', row)
        assert [Path(link).name for link in links[:len(wanted)]] == wanted, (page, links)
        sidebar = re.search(r'<div class="md-sidebar md-sidebar--primary"[^>]*>', text)
        assert sidebar and "hidden" not in sidebar.group(0), page  # navigation shown


def test_generated_pages_render_tables_bars_and_images(built):
    cpu = (built.site / "benchmarks/cpu.html").read_text(encoding="utf-8")
    assert cpu.count("<table>") >= 10
    assert cpu.count('class="lb-card"') >= 30
    assert "!!! warning" not in cpu
    images = re.findall(r'<img[^>]+src="([^"]+)"', cpu)
    assert images
    for src in images:
        assert (built.site / "benchmarks" / src).resolve().is_file(), src
    assert " us " not in re.sub(r"<[^>]+>", " ", cpu)  # µs, never us
    csv = built.site / "benchmarks/assets/results.csv"
    assert csv.is_file() and csv.stat().st_size > 0


def test_strict_build_with_no_results(tmp_path):
    built = sitebuild.build_site(tmp_path, with_results=False)
    assert built.build.returncode == 0, built.build.stderr
    gpu = (built.site / "benchmarks/gpu.html").read_text(encoding="utf-8")
    assert "No GPU run yet" in gpu
    assert "No results yet" in (built.site / "index.html").read_text(encoding="utf-8")
    choosing = (built.site / "benchmarks/choosing-a-nufft.html").read_text(encoding="utf-8")
    assert "No accuracy study yet" in choosing and "bench-accuracy" in choosing


def test_choosing_page_is_linked_from_home_overview_and_device_pages(built):
    for page, href in (("index.html", "benchmarks/choosing-a-nufft.html"),
                       ("benchmarks/index.html", "choosing-a-nufft.html"),
                       ("benchmarks/cpu.html", "choosing-a-nufft.html"),
                       ("benchmarks/gpu.html", "choosing-a-nufft.html")):
        article = (built.site / page).read_text(encoding="utf-8")
        article = article[article.index("<article"):]
        assert f'href="{href}"' in article, page
    nav = (built.site / "index.html").read_text(encoding="utf-8")
    assert "Choosing a NUFFT" in nav[:nav.index("<article")]  # in the navigation


def test_choosing_page_renders_charts_tables_and_the_csv(built):
    page = (built.site / "benchmarks/choosing-a-nufft.html").read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]+src="([^"]+)"', page)
    assert len(images) == len(sitebuild.fx.ACCURACY_PANELS)
    for src in images:
        assert src.endswith(".svg") and (built.site / "benchmarks" / src).is_file(), src
    assert page.count("<table>") >= 2 * 2 * len(sitebuild.fx.ACCURACY_PANELS)
    (csv,) = re.findall(r'href="(assets/accuracy/[^"]+\.csv)"', page)
    assert (built.site / "benchmarks" / csv).read_text().startswith("run_id,machine,device")
