"""The evidence pack as a PDF: headless Chromium prints ``certify.html``
(specs/certify.md CRT-QUA-004).

Why Chromium: the HTML report is already tested in it (CRT-RPT-006), so the PDF is the
same layout a reviewer sees on screen, with no second renderer to keep in step, and
Debian and every CI image ship it. HTML-to-PDF libraries (WeasyPrint) would add a native
dependency chain (Pango, cairo) to the certify extra for one output. Chromium's page
header carries the document title, which names the configuration (ampref version,
level, commit, clean/dirty, status), and its footer the page number of the total, so
both stand on every page; the page size and margins come from the report's ``@page``
rule (A4). The PDF's outline (bookmarks) follows the headings. Chromium does not lay out
CSS ``target-counter``, so the contents' page numbers come from a first print: its
outline gives each section's page (:func:`section_pages`), the report is rendered again
with them and printed once more.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["BROWSERS", "browser", "print_pdf", "section_pages"]

#: executables tried in order
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser() -> str:
    """The path of a headless-capable Chromium.

    Raises:
        ValueError: none on PATH (the names tried listed).
    """
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise ValueError(f"--pdf prints with headless Chromium; none of {', '.join(BROWSERS)} is "
                     "on PATH (Debian: apt-get install chromium)")


def print_pdf(html: Path, pdf: Path, timeout: float = 300.0) -> Path:
    """Print ``html`` to ``pdf`` (written next to it, then renamed: a failed print
    leaves an earlier PDF intact).

    Raises:
        ValueError: Chromium failed or wrote nothing (its last output named).
    """
    tmp = pdf.with_name(f".tmp-{pdf.name}")
    # --generate-pdf-document-outline: a bookmark per heading (sections, spec files of the
    # cases), so a reviewer navigates the PDF as the HTML's contents list
    cmd = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--generate-pdf-document-outline", f"--print-to-pdf={tmp}",
           html.resolve().as_uri()]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"Chromium did not print {html} within {timeout:.0f} s") from None
    if r.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"Chromium could not print {html} (exit {r.returncode}): "
                         f"{(r.stderr or r.stdout).strip()[-300:]}")
    tmp.replace(pdf)
    return pdf


def section_pages(pdf: Path) -> dict[str, int]:
    """Each bookmark's title and its 1-based page, from the PDF's outline (pypdf).

    Raises:
        ValueError: pypdf is not installed (the certify extra).
    """
    try:
        import pypdf
    except ImportError as e:
        raise ValueError("the PDF's page numbers are read with pypdf: pip install "
                         "'ampref[certify]'") from e
    reader = pypdf.PdfReader(pdf)
    out: dict[str, int] = {}

    def walk(items: Any) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
            else:
                page = reader.get_destination_page_number(item)
                if page is not None:
                    out.setdefault(str(getattr(item, "title", "")), page + 1)
    walk(reader.outline)
    return out
