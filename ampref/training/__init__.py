"""One ``ampref train`` run: its modes and self-validating configuration (``config``), the
embedded corpus (``corpus``, ``declaration.txt``), the model and its steps (``run``),
planted faults (``faults``), checkpoints (``checkpoint``), training and quantization
statistics (``stats``, ``quantreport``), plots and reports (``report``) and the driver
with resume and compare (``train``). Spec: ``specs/train.md``.

Imports: every room below it up to the engine; not ``certify``.
"""
