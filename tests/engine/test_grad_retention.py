"""Which tensors keep ``.grad`` after backward (ENG-BWD-003), against torch's own
autograd on the same graph."""

from __future__ import annotations

import numpy as np
import pytest

import ampref
from ampref.engine import functional as F
from ampref.testing import assert_bitwise_equal

torch = pytest.importorskip("torch")


@pytest.mark.clause("ENG-BWD-003")
def test_a_non_leaf_keeps_no_grad_unless_retain_grad_was_called() -> None:
    """Inputs: a leaf x = [1, 2, 3] (float32, requires grad), h = x * x and g = x * x,
    retain_grad() on g only, loss = sum(h) + 2 sum(g), backward; the same graph in torch.
    Expected: x.grad = 6x = [6, 12, 18] bit for bit as torch; h.grad None (a non-leaf,
    torch gives None too); g.grad = [2, 2, 2] as torch's retained grad. Pass: all."""
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    x = ampref.tensor(xv, requires_grad=True)
    h, g = F.mul(x, x), F.mul(x, x)
    g.retain_grad()
    F.add(F.sum(h), F.mul(F.sum(g), ampref.tensor(np.float32(2.0)))).backward()
    tx = torch.from_numpy(xv).requires_grad_()
    th, tg = tx * tx, tx * tx
    tg.retain_grad()
    (th.sum() + tg.sum() * 2).backward()
    assert h.grad is None
    with pytest.warns(UserWarning, match="not a leaf"):  # torch warns on the read
        assert th.grad is None
    assert_bitwise_equal(np.asarray(g.grad), tg.grad.numpy(), msg="retained non-leaf grad")
    assert_bitwise_equal(np.asarray(x.grad), tx.grad.numpy(), msg="leaf grad")
