"""``ampref certify --check PACK``: does an evidence pack still agree with itself
(``specs/certify.md`` CRT-BND-003)? The chunk files against the digests its configuration
index lists, the certificates re-derived from the files, the status from its own counts
and problems.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .binding import chunk_digests
from .campaign import certificates
from .qualification import SCHEMA

__all__ = ["check_pack"]


def check_pack(pack: Path) -> list[str]:
    """What no longer agrees in an evidence pack: chunk files against the digests its
    configuration index lists (changed, missing, added), the certificates re-derived
    from the files against the pack's, and the status against its own counts and
    problems. Empty when the pack is intact.

    Raises:
        ValueError: ``pack`` holds no readable certify.json of this schema.
    """
    path = Path(pack) / "certify.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"--check: {str(path)!r} is not a readable certify.json ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"--check: {str(path)!r} is not a certify.json of schema {SCHEMA} "
                         f"(schema {doc.get('schema') if isinstance(doc, dict) else None!r})")
    folders = [Path(pack) / "certificates", *(Path(p) for p in doc.get("imports", []))]
    listed = doc.get("config", {}).get("chunks", {})
    found = chunk_digests(folders)
    out = [f"chunk {k}: changed since the pack was made" for k in sorted(set(listed) & set(found))
           if listed[k] != found[k]]
    out += [f"chunk {k}: missing" for k in sorted(set(listed) - set(found))]
    out += [f"chunk {k}: not in the pack's index" for k in sorted(set(found) - set(listed))]
    derived = [c for f in folders if f.is_dir() for c in certificates(f)]
    if _stable_certs(derived) != _stable_certs(doc.get("certs", [])):
        out.append("certificates: the chunk files give other certificates than the pack states")
    expect = ("FAILED" if doc.get("problems") else
              "INCOMPLETE" if doc.get("counts", {}).get("verified") != len(doc.get("clauses", []))
              else "PASSED")
    if doc.get("status") != expect:
        out.append(f"status: the pack says {doc.get('status')}, its own counts and problems "
                   f"give {expect}")
    return out


def _stable_certs(certs: list[dict[str, Any]]) -> list[Any]:
    return sorted(json.dumps({k: v for k, v in c.items() if k != "seconds"}, sort_keys=True)
                  for c in certs)
