"""Values that used to wrap, be ignored or fail deep inside NumPy get a ValueError or
TypeError from ampref naming the value (API-ERR-001, issue 28). One row per (call, bad
value, error type, words); a new parameter is one row."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ampref
import ampref.formats.cast
from ampref import accumulation, nn, optim, tensorcore
from ampref.accumulation.blockmma import block_scaled_dot
from ampref.engine import functional as F
from ampref.optim import lr_scheduler


def _gemm(**kw: Any) -> Any:
    return tensorcore.gemm(np.ones((4, 16)), np.ones((4, 16)), np.zeros((4, 4)), gpu="h100",
                           input_format="fp16", **kw)


def _as_any(v: Any) -> Any:
    """A deliberately wrong value, typed Any so that the type checker lets the test pass it."""
    return v


def _opt() -> optim.SGD:
    return optim.SGD(nn.Linear(2, 2, seed=0).parameters(), lr=0.1)


T = ampref.tensor(np.ones((2, 3)))
LABELS = ampref.tensor([0, 2])

#: (name, call, error type, words in the message)
ROWS: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    ("a negative seed under nearest rounding", lambda: ampref.quantize(
        np.ones(2, np.float32), "bf16", seed=-1), ValueError, r"seed must be in \[0, 2\*\*64\)"),
    ("tile_rows -1", lambda: _gemm(tile_rows=-1), ValueError, "tile_rows must be an int >= 1"),
    ("tile_rows as a string", lambda: _gemm(tile_rows="2"), TypeError, "tile_rows must be an int"),
    ("threads as a float", lambda: _gemm(threads=1.5), TypeError, "threads must be an int"),
    ("complex matmul operands", lambda: accumulation.matmul(
        np.ones((2, 2)) * 1j, np.ones((2, 2)), input_format="float32"), TypeError,
     "real numbers .* complex128"),
    ("object matmul operands", lambda: accumulation.matmul(
        np.ones((2, 2), dtype=object), np.ones((2, 2)), input_format="float32"), TypeError,
     "dtype object"),
    ("complex dot operands", lambda: accumulation.dot(np.ones(2) * 1j, np.ones(2)), TypeError,
     "complex128"),
    ("a scaler given as a string", lambda: _opt().step(scaler=_as_any("torch")), TypeError,
     "scaler must be an ampref LossScaler"),
    ("a layer larger than the machine", lambda: nn.Linear(10**6, 10**6), ValueError,
     "cannot be built here"),
    ("a parameter listed twice", lambda: optim.SGD(
        [nn.Linear(2, 2).weight] * 2, lr=0.1), ValueError, "parameter 1 is the same tensor"),
    ("parameter groups", lambda: optim.SGD(_as_any([{"params": []}]), lr=0.1), TypeError,
     "parameter groups"),
    ("a NaN learning rate through param_groups", lambda: _opt().param_groups[0].__setitem__(
        "lr", float("nan")), ValueError, "learning rate must be a finite number"),
    ("momentum through param_groups", lambda: _opt().param_groups[0].__setitem__(
        "momentum", 0.5), ValueError, "fixed at construction"),
    ("nesterov with momentum 0 (torch refuses it too)", lambda: optim.SGD(
        nn.Linear(2, 2, seed=0).parameters(), lr=0.1, momentum=0.0, nesterov=True), ValueError,
     "nesterov needs momentum > 0 and dampening 0"),
    ("nesterov with dampening", lambda: optim.SGD(
        nn.Linear(2, 2, seed=0).parameters(), lr=0.1, momentum=0.9, dampening=0.1,
        nesterov=True), ValueError,
     "nesterov needs momentum > 0 and dampening 0"),
    ("StepLR step_size 0", lambda: lr_scheduler.StepLR(_opt(), 0), ValueError,
     "step_size must be an int >= 1"),
    ("a scheduler state with a negative epoch", lambda: lr_scheduler.StepLR(
        _opt(), 2).load_state_dict({"last_epoch": -3, "base_lrs": [0.1], "last_lr": [0.1]}),
     ValueError, "last_epoch must be an int >= 0"),
    ("ragged nested lists", lambda: ampref.tensor([[1, 2], [3]]), ValueError, "ragged"),
    ("complex tensor data", lambda: ampref.tensor([1j]), TypeError, "real numbers"),
    ("fractions for an int64 tensor", lambda: ampref.tensor([1.5], dtype="int64"), ValueError,
     "needs integer values"),
    ("an integer tensor that requires grad", lambda: ampref.tensor([1], requires_grad=True),
     ValueError, "only floating-point tensors can require grad"),
    ("an integer tensor into a float op", lambda: F.relu(LABELS), TypeError,
     r"relu needs a floating-point tensor, got an integer tensor .* \.float\(\)"),
    ("integer tensor plus a float", lambda: LABELS + 0.5, TypeError, "cast with .float()"),
    ("cross_entropy reduction", lambda: F.cross_entropy(T, LABELS, reduction="avg"), ValueError,
     "reduction must be one of mean, sum, none"),
    ("a target out of range", lambda: F.cross_entropy(T, ampref.tensor([0, 3])), ValueError,
     r"targets must lie in \[0, 3\)"),
    ("dropout p above 1", lambda: F.dropout(T, 1.5, seed=1), ValueError, r"in \[0, 1\]"),
    ("a negative dropout offset", lambda: F.dropout(T, 0.5, seed=1, offset=-1), ValueError,
     "offset must be an int >= 0"),
    ("rand with an integer dtype", lambda: ampref.rand(2, dtype="int64"), ValueError,
     "use randint"),
    ("randint with high <= low", lambda: ampref.randint(3, 3, (2,)), ValueError,
     "high must be greater than low"),
    ("a negative size", lambda: ampref.zeros(2, -1), ValueError, "sizes must be ints >= 0"),
    ("manual_seed(-1)", lambda: ampref.manual_seed(-1), ValueError, "seed must be in"),
    ("split sections that do not add up", lambda: T.split([1, 1], 1), ValueError,
     "do not add up to the length 3"),
    # indices torch refuses with IndexError: ours is an IndexError and a ValueError
    # (API-ERR-001)
    ("an index past the end", lambda: T[5], IndexError,
     r"index 5 of a tensor of shape \(2, 3\): index 5 is out of bounds"),
    ("an index past the end, as a ValueError", lambda: T[5], ValueError, "out of bounds"),
    ("too many indices", lambda: T[0, 0, 0], ValueError, "too many indices"),
    ("a float index", lambda: T[1.5], ValueError, "index 1.5 of a tensor of shape"),
    ("a float tensor as index (was truncated to 0)", lambda: T[ampref.tensor([0.5])],
     IndexError, "tensors used as indices must hold integers or bools, got a float32"),
    ("a boolean mask of another length", lambda: T[ampref.ones(5) > 0], ValueError,
     "boolean index did not match"),
    ("size of a dim past the shape", lambda: T.size(5), ValueError,
     r"size: dim 5 is out of range for a tensor of shape \(2, 3\)"),
    ("size of a 0-d tensor's dim", lambda: ampref.tensor(1.0).size(0), ValueError,
     "0-d tensor"),
    ("flatten from a dim past the shape (was accepted)", lambda: T.flatten(3), ValueError,
     "flatten: dim 3 is out of range"),
    ("argmax over a dim past the shape", lambda: T.argmax(5), ValueError,
     "argmax: dim 5 is out of range"),
    ("argmin over a float dim", lambda: T.argmin(1.5), TypeError, "argmin: dim must be an int"),
    ("a complex gradient for backward (was cast with a warning)",
     lambda: (ampref.ones(2, requires_grad=True) * 2).backward(np.array([1j, 1j])), TypeError,
     "backward grad must hold real numbers"),
    ("a gradient of the transposed shape (was reshaped, silently reordered)",
     lambda: (ampref.ones(2, 3, requires_grad=True) * 2).backward(np.ones((3, 2))), ValueError,
     r"backward grad has shape \(3, 2\), expected \(2, 3\)"),
    ("random words below 0 for NVFP4 (wrapped to 2^32 - 1)",
     lambda: ampref.recipes.quantize(np.ones((4, 32), np.float32), "nvfp4",
                                     rounding="stochastic", random_bits=np.full(32, -1)),
     ValueError, r"random_bits must be words in \[0, 2\*\*32\)"),
    ("random words that are strings, with a rounding that would not read them",
     lambda: ampref.recipes.quantize(np.ones((4, 32), np.float32), "nvfp4", random_bits="x"),
     TypeError, "random_bits must be unsigned 32-bit words"),
    ("an attention scale past float32 (an overflow warning before)",
     lambda: F.scaled_dot_product_attention(T, T, T, scale=1e300), ValueError,
     r"scale must be a finite float32 value \(\|scale\| <= 3.4e38\), got 1e\+300"),
    ("an Embedding std past float32 (inf weights and a warning before)",
     lambda: nn.Embedding(4, 2, std=1e300), ValueError,
     r"Embedding std must be a float32 value \(at most 3.4e38\), got 1e\+300"),
    ("a Conv2d stride of 0, named when built", lambda: nn.Conv2d(1, 1, 3, stride=0),
     ValueError, r"conv2d stride must be >= 1, got 0"),
    ("a Conv2d padding of 1.5 (was kept until the first call)",
     lambda: nn.Conv2d(1, 1, 3, padding=_as_any(1.5)), TypeError,
     "conv2d padding must be an int or a pair of ints, got 1.5"),
    ("Hadamard signs of the wrong length (were broadcast)",
     lambda: ampref.recipes.hadamard_matrix(16, (1, -1)), ValueError,
     r"signs must be 16 entries, each \+1 or -1"),
    ("a Hadamard sign of 0", lambda: ampref.recipes.hadamard_matrix(2, (1, 0)), ValueError,
     r"each \+1 or -1, got \(1, 0\)"),
    ("a block scale that is not an E8M0 value", lambda: block_scaled_dot(
        np.ones((1, 32)), np.ones((1, 32)), None, np.full((1, 1), 3.0), np.ones((1, 1))),
     ValueError, r"scale_a\[0, 0\] = 3.0 is not representable in float8_e8m0fnu"),
    ("a block element that is not an E4M3 value", lambda: block_scaled_dot(
        np.full((1, 32), 1.1), np.ones((1, 32)), None, np.ones((1, 1)), np.ones((1, 1))),
     ValueError, r"a\[0, 0\] = 1.1 is not representable in float8_e4m3fn"),
    ("random words above 2^32", lambda: ampref.formats.cast.quantize_with_words(
        np.ones(2, np.float32), "bf16", np.array([1, 2**33])), ValueError,
     r"words must be integers in \[0, 2\*\*32\).*range \[1, 8589934592\]"),
    ("a gemm addend of the wrong shape", lambda: tensorcore.gemm(
        np.ones((4, 16)), np.ones((4, 16)), np.zeros((3, 3)), gpu="h100", input_format="fp16"),
     ValueError, r"C must be \(M, N\) = \(4, 4\), got \(3, 3\)"),
    ("a gemm operand that is not an array", lambda: tensorcore.gemm(
        _as_any(None), np.ones((4, 16)), np.zeros((4, 4)), gpu="h100", input_format="fp16"),
     TypeError, "A must be an array of real numbers, got NoneType"),
    ("recipes.matmul accumulation None", lambda: ampref.recipes.matmul(
        ampref.recipes.quantize(np.ones((2, 32), np.float32), "mxfp8_e4m3"),
        ampref.recipes.quantize(np.ones((2, 32), np.float32), "mxfp8_e4m3"),
        accumulation=_as_any(None)), TypeError, "accumulation must be a model name"),
    ("softmax over a list of dims", lambda: F.softmax(T, _as_any([1])), TypeError,
     "dim must be an int|needs one int dim"),
    ("layer_norm with a complex shape", lambda: F.layer_norm(T, _as_any(np.array([1j]))),
     TypeError, "normalized_shape must be an int or a tuple/list of ints"),
    ("masked_fill with a complex value", lambda: F.masked_fill(
        T, np.zeros((2, 3), bool), _as_any(1j)), TypeError, "value must be a real number"),
    ("load from something that is not a path", lambda: ampref.load(_as_any(np.ones(2))),
     TypeError, "load takes a path"),
    ("a Generator state with a bad counter", lambda: ampref.Generator().load_state_dict(
        {"seed": 1, "counter": -1}), ValueError, "counter must be a non-negative int"),
]


@pytest.mark.clause("API-ERR-001")
@pytest.mark.parametrize(("call", "kind", "words"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])
def test_a_bad_value_gets_a_named_error_from_ampref(call: Callable[[], Any],
                                                    kind: type[Exception], words: str) -> None:
    """Inputs: each row of the bad-value table (a call with one wrong value). Expected: the
    row's exception type with its message words. Pass: raised and matched."""
    with pytest.raises(kind, match=words):
        call()


@pytest.mark.clause("ENG-SER-001")
def test_save_refuses_what_a_checkpoint_cannot_hold_and_load_names_a_foreign_file(
        tmp_path: Path) -> None:
    """Inputs: a set inside the object, an int key, a junk file, a plain .npz, a missing
    path. Expected: TypeErrors naming the path and key rule; ValueErrors naming the foreign
    files; FileNotFoundError. Pass: each."""
    with pytest.raises(TypeError, match=r"got set at \['a'\]\[1\]"):
        ampref.save({"a": [1, {2}]}, tmp_path / "x.ckpt")
    with pytest.raises(TypeError, match="keys must be str"):
        ampref.save({1: 2}, tmp_path / "x.ckpt")
    (tmp_path / "junk").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not an ampref checkpoint"):
        ampref.load(tmp_path / "junk")
    np.savez(tmp_path / "plain.npz", a=np.ones(2))
    with pytest.raises(ValueError, match="no structure member"):
        ampref.load(tmp_path / "plain.npz")
    with pytest.raises(FileNotFoundError):
        ampref.load(tmp_path / "missing")


class _Planted:
    """An object whose unpickling records that it ran (what a hostile checkpoint does)."""

    ran: list[str] = []

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_Planted.ran.append, ("unpickled",))


@pytest.mark.clause("ENG-SER-001")
def test_load_refuses_a_pickled_member_without_running_it(tmp_path: Path) -> None:
    """Inputs: a valid checkpoint rewritten with one extra member, an object array whose
    pickle calls a function when loaded. Expected: ``ampref.load`` raises ValueError
    naming the file and the member, and the function never ran. Pass: both."""
    path = tmp_path / "c.ckpt"
    ampref.save({"step": 1}, path)
    with np.load(path) as z:
        members = {k: z[k] for k in z.files}
    members["evil"] = np.array([_Planted()], dtype=object)
    with open(path, "wb") as out:  # a file object: np.savez would add ".npz" to a name
        np.savez(out, allow_pickle=True, **members)
    with pytest.raises(ValueError, match=r"c\.ckpt.*'evil'.*pickle"):
        ampref.load(path)
    assert _Planted.ran == []


@pytest.mark.clause("ENG-SER-001")
def test_a_failed_save_leaves_the_previous_checkpoint_intact(tmp_path: Path) -> None:
    """Inputs: a good checkpoint, then a save holding an unserialisable object to the same
    path. Expected: TypeError and the previous file byte for byte. Pass: both."""
    path = tmp_path / "c.ckpt"
    ampref.save({"step": 1}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        ampref.save({"step": 2, "bad": object()}, path)
    assert path.read_bytes() == before and ampref.load(path) == {"step": 1}


@pytest.mark.clause("API-ERR-001", "SCL-GSC-001")
def test_an_fp16_overflow_is_reported_by_the_scaler_and_no_numpy_warning_leaks() -> None:
    """Inputs: inputs of 6e4 through an fp16 autocast linear and a GradScaler step,
    warnings as errors. Expected: no warning, the step skipped, the scale halved to 2^14.
    Pass: all."""
    model = nn.Linear(4, 2, seed=0)
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = ampref.amp.GradScaler("cpu", init_scale=2.0**15)
    x = ampref.tensor(np.full((2, 4), 6e4, np.float32))  # fp16 products overflow to inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ampref.autocast(device_type="cuda", dtype=ampref.float16):
            loss = F.cross_entropy(model(x), ampref.tensor([0, 1]))
        scaler.scale(loss).backward()
        assert scaler.step(opt, return_found_inf=True) is True
        scaler.update()
    assert scaler.get_scale() == 2.0**14


def _with_root(tmp_path: Path, root: Any) -> Path:
    """A valid checkpoint of one float tensor whose structure member is rewritten with
    ``root`` (its array member kept, named "a0" as save names the first array)."""
    path = tmp_path / "d.ckpt"
    ampref.save({"w": ampref.tensor([1.0, 2.0], "fp16")}, path)
    with np.load(path) as z:
        members = {k: z[k] for k in z.files}
    assert "a0" in members, sorted(members)
    members["ampref_structure"] = np.frombuffer(
        json.dumps({"version": 1, "root": root}).encode(), dtype=np.uint8)
    with open(path, "wb") as out:  # a file object: np.savez would add ".npz" to a name
        np.savez(out, **members)
    return path


#: damaged structure roots -> the words of the ValueError that names them
DAMAGED = {
    "an int node": (5, r"damaged checkpoint structure at /: 5"),
    "a list node": ([1], r"damaged checkpoint structure at /: \[1\]"),
    "a dict without kind": ({"value": 1}, r"at /: \{'value': 1\}"),
    "an item without kind": ({"kind": "dict", "items": {"w": {"array": "a0"}}},
                             r"at \['w'\]"),
    "an unknown kind": ({"kind": "blob"}, "unknown entry 'blob'"),
    "an int without its value": ({"kind": "int"}, "KeyError"),
    "a float that is no hex string": ({"kind": "float", "value": 3}, "TypeError"),
    "a tensor without format": ({"kind": "tensor", "array": "a0"}, "KeyError: 'format'"),
    "a missing array": ({"kind": "array", "array": "a9"}, "array 'a9' missing"),
}


@pytest.mark.clause("ENG-SER-001", "API-ERR-001")
@pytest.mark.parametrize("name", list(DAMAGED))
def test_load_names_a_damaged_structure_entry(tmp_path: Path, name: str) -> None:
    """Inputs: a checkpoint whose structure member holds ``name``'s root (a node that is
    no entry, an entry without ``kind`` at the top or inside a dict, an unknown kind, an
    entry missing a field it needs or holding one of the wrong type, an array reference
    to no member). Expected: ValueError naming the file's damage and where (never a
    KeyError, TypeError or AttributeError from inside the decoder). Pass: raised,
    message matched."""
    root, words = DAMAGED[name]
    with pytest.raises(ValueError, match=words) as e:
        ampref.load(_with_root(tmp_path, root))
    assert type(e.value) is ValueError
