"""`mkdocs build --strict` on pages generated from fixture runs, in a scratch copy of docs/."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import sitebuild  # noqa: E402

PAGES = ["index.html", "benchmarks/index.html", "benchmarks/cpu/index.html",
         "benchmarks/gpu/index.html", "benchmarks/history/index.html",
         "benchmarks/profiles/index.html", "benchmarks/methodology/index.html"]


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
        # every script and stylesheet is served from the site itself
        for url in re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', text):
            pytest.fail(f"{html} loads {url} from the network")


def test_generated_pages_render_tables_images_and_admonitions(built):
    cpu = (built.site / "benchmarks/cpu/index.html").read_text(encoding="utf-8")
    assert cpu.count("<table>") >= 10
    assert 'class="admonition warning"' in cpu
    images = re.findall(r'<img[^>]+src="([^"]+)"', cpu)
    assert images
    page_dir = built.site / "benchmarks/cpu"
    for src in images:
        assert (page_dir / src).resolve().is_file(), src
    csv = built.site / "benchmarks/assets/results.csv"
    assert csv.is_file() and csv.stat().st_size > 0


def test_strict_build_with_no_results(tmp_path):
    built = sitebuild.build_site(tmp_path, with_results=False)
    assert built.build.returncode == 0, built.build.stderr
    gpu = (built.site / "benchmarks/gpu/index.html").read_text(encoding="utf-8")
    assert "No GPU run yet" in gpu
