"""Certification evidence: the exhaustive rounding certificate (``verify``), verification
campaigns on Dask (``campaign``), the pytest plugin that records clause outcomes
(``plugin``), the evidence collected from specs and tests (``evidence``) and the
HTML/JSON report of ``ampref certify`` (``report``, ``certify.html.j2``). Spec:
``specs/certify.md``.

Imports: ``ampref.common`` and ``ampref.formats``; not ``training``.
"""
