"""Screenshots of the built site, as a reader first sees it: the top of each page (one screen,
"above the fold") at a desktop and a phone width, light and dark.

    python benchmarks/site_screenshots.py     # Home, Overview, CPU -> benchmarks/screenshots/
    python benchmarks/site_screenshots.py --full-page --page benchmarks/choosing-a-nufft.html

Run `just docs` first: it reads the built `site/` from disk (file://), which is also how README
says to open it. Drives the system Chromium through Playwright.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTHS = {"desktop": (1366, 768), "phone": (390, 844)}
DEFAULT_PAGES = ("index.html", "benchmarks/index.html", "benchmarks/cpu.html")
SCHEMES = ("default", "slate")  # mkdocs-material's light and dark palettes


def page_name(page: str) -> str:
    """`benchmarks/cpu.html` -> `benchmarks-cpu`; the site's own index is `home`."""
    name = page.removesuffix(".html").removesuffix("index").strip("/").replace("/", "-")
    return name or "home"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, default=ROOT / "site", help="built site (default site/)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "screenshots",
                    help="where the PNGs go (default benchmarks/screenshots/)")
    ap.add_argument("--page", action="append", help="page file under the site, repeatable "
                    "(default: Home, Overview, CPU)")
    ap.add_argument("--full-page", action="store_true", help="the whole page, not one screen")
    ap.add_argument("--dark", action="store_true", help="also the dark palette")
    args = ap.parse_args(argv)

    if not (args.site / "index.html").is_file():
        print(f"site_screenshots: no built site at {args.site} (run `just docs` first)",
              file=sys.stderr)
        return 2
    browser_path = next((p for p in map(shutil.which, ("chromium", "chromium-browser",
                                                       "google-chrome")) if p), None)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("site_screenshots: Playwright is not installed (pip install -e '.[dev]')",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    schemes = SCHEMES if args.dark else SCHEMES[:1]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path)
        for page_path in args.page or DEFAULT_PAGES:
            target_file = args.site.resolve() / page_path
            if not target_file.is_file():
                print(f"site_screenshots: no page {page_path} in {args.site}", file=sys.stderr)
                return 2
            url = target_file.as_uri()
            for width_name, (w, h) in WIDTHS.items():
                for scheme in schemes:
                    page = browser.new_page(viewport={"width": w, "height": h})
                    # Material keeps the chosen palette in localStorage under its scope.
                    page.goto(url)
                    if scheme != "default":
                        page.evaluate("s => { document.body.setAttribute("
                                      "'data-md-color-scheme', s) }", scheme)
                    page.wait_for_load_state("networkidle")
                    name = f"{page_name(page_path)}-{width_name}"
                    name += "" if scheme == "default" else "-dark"
                    target = args.out / f"{name}.png"
                    page.screenshot(path=str(target), full_page=args.full_page)
                    page.close()
                    print(target.relative_to(ROOT) if target.is_relative_to(ROOT) else target)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
