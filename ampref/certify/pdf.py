"""The evidence pack as a PDF: headless Chromium prints ``certify.html``
(specs/certify.md CRT-QUA-004).

Why Chromium: the HTML report is already tested in it (CRT-RPT-006), so the PDF is the
same layout a reviewer sees on screen, with no second renderer to keep in step, and
Debian and every CI image ship it. HTML-to-PDF libraries (WeasyPrint) would add a native
dependency chain (Pango, cairo) to the certify extra for one output. Chromium's page
header carries the document title, which names the configuration (ampref version,
level, commit, clean/dirty, status), and its footer the page number of the total, so
both stand on every page; the page size and margins come from the report's ``@page``
rule (A4).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["BROWSERS", "browser", "print_pdf"]

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
    cmd = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           f"--print-to-pdf={tmp}", html.resolve().as_uri()]
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
