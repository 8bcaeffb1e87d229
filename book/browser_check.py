"""Open the built book in a real browser (headless Chromium through Playwright) and check
what a reader sees: no console errors, search works, every image has alt text, nothing is
wider than a phone screen, and progress bars show as one final line, not pages of updates.
Screenshots of the main pages at desktop and phone widths are saved for inspection.

    python book/browser_check.py _build/smoke/_build/html --screenshots _build/smoke/screenshots

Needs the `chromium` executable (Debian's package) and the `playwright` Python package;
`find_chromium()` returns None when the browser is missing, and callers skip with a message.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

WIDTHS = (1400, 400)
SCREENSHOT_PAGES = ("index.html", "scaling-law.html", "constant-last4.html", "run-report.html")
SEARCH_TERM, SEARCH_EXPECTS = "LongPPL", "scaling-law.html"  # chapter 3 must come up
PROGRESS_RE = re.compile(r"^\s*(?P<desc>[^\n|]*?):?\s*\d{1,3}%\|")

# Elements wider than the viewport whose overflow is not scrolled or clipped by an ancestor.
OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth, bad = [];
  const scrolls = el => { for (let a = el.parentElement; a; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; }
    return false; };
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= vw + 1) continue;
    const o = getComputedStyle(el).overflowX;
    if (o === 'auto' || o === 'scroll' || scrolls(el)) continue;
    bad.push(el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ')[0] : '')
             + ' right=' + Math.round(r.right));
  }
  return bad.slice(0, 5);
}"""


def find_chromium() -> str | None:
    """Path of a Chromium executable, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def progress_spam(text: str) -> list[str]:
    """Progress-bar descriptions shown more than once in one output box (refresh spam)."""
    seen, dup = set(), []
    for line in text.splitlines():
        m = PROGRESS_RE.match(line)
        if not m:
            continue
        desc = m.group("desc").strip()
        if desc in seen and desc not in dup:
            dup.append(desc)
        seen.add(desc)
    return dup


def check_book_in_browser(html_dir: Path, screenshots: Path | None = None, chromium: str | None = None,
                          search: tuple[str, str] | None = (SEARCH_TERM, SEARCH_EXPECTS)) -> list[str]:
    """Problems a reader would meet in the built site at html_dir (empty list: none).
    search: (term, page file that must be among the results), or None to skip."""
    from playwright.sync_api import sync_playwright  # the browser driver: only for this check

    html_dir = Path(html_dir).resolve()
    pages = sorted(p.name for p in html_dir.glob("*.html"))
    if "index.html" not in pages:
        return [f"no index.html in {html_dir}"]
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium or find_chromium(), args=["--no-sandbox"])
        try:
            for width in WIDTHS:
                ctx = browser.new_context(viewport={"width": width, "height": 900})
                page = ctx.new_page()
                errors: list[str] = []
                page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                for name in pages:
                    errors.clear()
                    page.goto((html_dir / name).as_uri(), wait_until="load")
                    # lazy images load only near the viewport: load them all, as a reader scrolling would
                    page.evaluate("() => document.querySelectorAll('img[loading=lazy]')"
                                  ".forEach(i => { i.loading = 'eager'; })")
                    page.wait_for_function("() => [...document.images].every(i => i.complete)", timeout=30_000)
                    problems += [f"{name} @{width}px: console error: {e}" for e in errors]
                    for src in page.eval_on_selector_all("img", "els => els.filter(e => e.naturalWidth === 0)"
                                                                 ".map(e => e.getAttribute('src'))"):
                        problems.append(f"{name}: image does not load: {src[:80]}")
                    for src in page.eval_on_selector_all("img", "els => els.filter(e => !(e.getAttribute('alt') "
                                                                 "|| '').trim()).map(e => e.getAttribute('src'))"):
                        problems.append(f"{name}: image without alt text: {src[:80]}")
                    if width < 600:
                        problems += [f"{name} @{width}px: wider than the screen: {b}" for b in page.evaluate(OVERFLOW_JS)]
                    for text in page.eval_on_selector_all("pre.stderr", "els => els.map(e => e.textContent)"):
                        problems += [f"{name}: progress bar '{d}' shown more than once in one box"
                                     for d in progress_spam(text)]
                    if screenshots is not None and name in SCREENSHOT_PAGES:
                        screenshots.mkdir(parents=True, exist_ok=True)
                        page.screenshot(path=str(screenshots / f"{Path(name).stem}-{width}.png"), full_page=True)
                if width == WIDTHS[0] and search is not None and (html_dir / search[1]).is_file():
                    term, expects = search
                    page.goto((html_dir / "index.html").as_uri())
                    page.fill("#search-input", term)
                    hrefs = page.eval_on_selector_all("#search-results a", "els => els.map(e => e.getAttribute('href'))")
                    if not any(h.split("#")[0] == expects for h in hrefs):
                        problems.append(f"search for {term!r} does not list {expects} (got {hrefs[:5]})")
                ctx.close()
        finally:
            browser.close()
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", help="the built site (…/_build/html)")
    ap.add_argument("--screenshots", default=None, help="folder for page screenshots")
    a = ap.parse_args(argv)
    chromium = find_chromium()
    if chromium is None:
        print("browser check skipped: no chromium on PATH (Debian: apt-get install chromium)")
        return 0
    problems = check_book_in_browser(Path(a.html), Path(a.screenshots) if a.screenshots else None, chromium)
    for p in problems:
        print(f"browser check: {p}", file=sys.stderr)
    print(f"browser check: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
