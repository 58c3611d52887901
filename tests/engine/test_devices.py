"""Devices as torch scripts name them (ENG-DEV-001): ``ampref.device``, ``Tensor.to`` with
torch's overloads, ``Module.to``, ``device=`` on creation, ``ampref.cuda``. Moves between
backends run on the device backend emulated on the host (strict arrays, host-built
kernels) where a C++ compiler exists, and on a GPU where one does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampref
from ampref import backends, nn
from ampref.engine import device as device_table
from ampref.testing import assert_bitwise_equal


@pytest.mark.clause("ENG-DEV-001")
@pytest.mark.parametrize("args", [("cpu",), ("cuda",), ("cuda:0",), ("cuda", 0), ("cpu", 0)])
def test_a_device_prints_and_compares_as_torchs(args: tuple[Any, ...]) -> None:
    """Inputs: torch's spellings of the CPU and the first GPU. Expected: the same type,
    index and str as torch.device; equal to a device made from its own str. Pass:
    equal."""
    torch = pytest.importorskip("torch")
    ours, theirs = ampref.device(*args), torch.device(*args)
    assert (ours.type, ours.index, str(ours)) == (theirs.type, theirs.index, str(theirs))
    assert ampref.device(str(ours)) == ours and hash(ampref.device(ours)) == hash(ours)


@pytest.mark.clause("ENG-DEV-001", "API-ERR-001")
@pytest.mark.parametrize("args, error, match", [
    (("tpu",), ValueError, "unknown device type 'tpu'; choices: cpu, cuda"),
    (("cuda:x",), ValueError, "invalid device string 'cuda:x'"),
    (("cuda:0", 0), ValueError, "invalid device string"),
    (("cuda:1",), ValueError, "cuda:1 cannot be addressed"),
    (("cpu", 1), ValueError, "cpu:1 cannot be addressed"),
    ((3,), TypeError, "device must be a str"),
    (("cuda", 0.0), TypeError, "index must be an int"),
])
def test_bad_devices_are_refused_naming_the_choices(args: tuple[Any, ...], error: Any,
                                                    match: str) -> None:
    """Inputs: an unknown type, malformed strings, an index twice, indices this build
    cannot address (one GPU), wrong types. Expected: the error naming the value and the
    choices. Pass: raises."""
    with pytest.raises(error, match=match):
        ampref.device(*args)


@pytest.mark.clause("ENG-DEV-001")
def test_tensor_to_takes_torchs_overloads_and_returns_itself_when_nothing_changes() -> None:
    """Inputs: a float32 tensor with a value that rounds in fp16 and bf16; to() with a
    device, a dtype, both, another tensor, keywords, copy=True. Expected: the tensor
    itself where device and dtype are unchanged (as torch), a new tensor after copy=True
    or a cast; casts equal torch's bits. Pass: identity and bits."""
    torch = pytest.importorskip("torch")
    from torch_compare import assert_same_result
    v = np.array([1 + 2**-11 + 2**-20, -3e-6, 70000.0], np.float32)
    x, tx = ampref.tensor(v), torch.tensor(v)
    same = [x.to("cpu"), x.to(ampref.device("cpu")), x.to("float32"), x.to(dtype=x.dtype),
            x.to(x), x.to(device="cpu", non_blocking=True), x.cpu()]
    assert all(t is x for t in same)
    copied = x.to(copy=True)
    assert copied is not x and copied.numpy().tobytes() == v.tobytes()
    for ours, theirs in [(x.to("cpu", "float16"), tx.to("cpu", torch.float16)),
                         (x.to(dtype="bfloat16"), tx.to(dtype=torch.bfloat16)),
                         (x.to(ampref.zeros(1, dtype="float16")), tx.to(torch.zeros(1).half()))]:
        assert_same_result(ours, theirs, "to")


@pytest.mark.clause("ENG-DEV-001", "API-ERR-001")
@pytest.mark.parametrize("call, error, match", [
    (lambda x: x.to("cpu", "float16", "float32"), TypeError, "3 positional"),
    (lambda x: x.to("cpu", device="cpu"), TypeError, "device is given twice"),
    (lambda x: x.to("float16", dtype="float32"), TypeError, "dtype is given twice"),
    (lambda x: x.to(3), TypeError, "int 3 is neither a device"),
    (lambda x: x.to(memory_format=None), TypeError, "keywords"),
    (lambda x: x.to("cpu", copy="yes"), TypeError, "copy"),
    (lambda x: x.to("tpu"), ValueError, "unknown format 'tpu'"),
])
def test_bad_to_arguments_are_refused(call: Any, error: Any, match: str) -> None:
    """Inputs: too many arguments, an aspect given twice, a non-device, an unknown
    keyword, a non-bool copy, an unknown name. Expected: the error naming it. Pass:
    raises."""
    with pytest.raises(error, match=match):
        call(ampref.ones(2))


@pytest.mark.clause("ENG-DEV-001", "ENG-INT-001")
def test_an_integer_tensor_moves_and_converts_as_torchs() -> None:
    """Inputs: int64 labels [0, 3, -2]; to('cpu'), to('int64'), to('long'), to('bool'),
    to('float16'), to(device=..., dtype=...). Expected: itself for the first three
    (torch returns self), bool [False, True, True], float16 values; the device is cpu.
    Pass: exact."""
    y = ampref.tensor([0, 3, -2])
    assert y.to("cpu") is y and y.to("int64") is y and y.to("long") is y and y.cpu() is y
    assert y.to("bool").tolist() == [False, True, True]
    assert y.to(device="cpu", dtype="float16").numpy().tolist() == [0.0, 3.0, -2.0]
    assert str(y.device) == "cpu" and y.to(copy=True) is not y


@pytest.mark.clause("ENG-DEV-001")
def test_module_to_keeps_the_module_and_casts_its_floating_state() -> None:
    """Inputs: Linear(3, 2) with a float and an int buffer; to('cpu'), to('bfloat16'),
    cpu(). Expected: the same module back; after bfloat16 the parameters and the float
    buffer are bf16 values, the int buffer unchanged. Pass: formats and values."""
    m = nn.Linear(3, 2)
    m.register_buffer("scale", ampref.full((2,), 0.1))
    m.register_buffer("count", ampref.tensor([7]))
    assert m.to("cpu") is m and m.cpu() is m
    assert m.to(dtype="bfloat16") is m
    assert {p.format.name for p in m.parameters()} == {"bfloat16"}
    assert m.scale.numpy().view(np.uint32).tolist() == [0x3DCD0000] * 2  # type: ignore[attr-defined]
    assert m.count.tolist() == [7]  # type: ignore[attr-defined]


CREATORS = {
    "tensor": lambda **kw: ampref.tensor([1.0, 2.0], **kw),
    "zeros": lambda **kw: ampref.zeros(2, 3, **kw),
    "ones": lambda **kw: ampref.ones(2, **kw),
    "full": lambda **kw: ampref.full((2,), 0.5, **kw),
    "arange": lambda **kw: ampref.arange(4, **kw),
    "rand": lambda **kw: ampref.rand(3, generator=ampref.Generator(1), **kw),
    "randn": lambda **kw: ampref.randn(3, generator=ampref.Generator(1), **kw),
    "randint": lambda **kw: ampref.randint(5, size=(3,), generator=ampref.Generator(1), **kw),
    "zeros_like": lambda **kw: ampref.zeros_like(ampref.ones(2), **kw),
    "ones_like": lambda **kw: ampref.ones_like(ampref.ones(2), **kw),
}


@pytest.mark.clause("ENG-DEV-001")
@pytest.mark.parametrize("name", sorted(CREATORS))
def test_creation_functions_take_torchs_device_keyword(name: str) -> None:
    """Inputs: each creation function with device='cpu' and device=ampref.device('cpu').
    Expected: the values of the call without device=, on the CPU; device with a
    different backend= is refused. Pass: equal bytes, ValueError."""
    plain = CREATORS[name]()
    for where in ("cpu", ampref.device("cpu")):
        got = CREATORS[name](device=where)
        assert str(got.device) == "cpu" and got.numpy().tobytes() == plain.numpy().tobytes()
    if name not in ("zeros_like", "ones_like"):
        with pytest.raises(ValueError, match="name different places"):
            CREATORS[name](device="cpu", backend=_Elsewhere())


@pytest.mark.clause("ENG-RNG-002")
def test_randint_takes_torchs_high_and_size_by_position() -> None:
    """Inputs: randint(5, (3,)) and randint(5, size=(3,)) from Generator(1). Expected: the
    same int64 values in [0, 5). Pass: equal lists."""
    a = ampref.randint(5, (3,), generator=ampref.Generator(1)).tolist()
    assert a == ampref.randint(5, size=(3,), generator=ampref.Generator(1)).tolist()
    assert all(0 <= v < 5 for v in a)


class _Elsewhere:
    """A backend object of another name (only its name is read before the refusal)."""

    name = "elsewhere"
    xp = np


@pytest.mark.clause("ENG-DEV-001")
def test_cuda_is_available_exactly_where_the_cupy_backend_works() -> None:
    """Inputs: this machine. Expected: ampref.cuda.is_available() equals
    backends.available('cupy') and device_count() is 1 or 0 with it; without CUDA a
    move there is a ValueError naming the cupy backend. Pass: all."""
    here = backends.available("cupy")
    assert ampref.cuda.is_available() is here and ampref.cuda.device_count() == int(here)
    if not here:
        with pytest.raises(ValueError, match="device 'cuda' needs ampref's cupy backend"):
            ampref.ones(2).to("cuda")
        with pytest.raises(ValueError, match="cupy backend"):
            nn.Linear(2, 2).cuda()


# -- moves between backends: the device backend emulated on the host ----------------------

@pytest.fixture
def cuda(monkeypatch: pytest.MonkeyPatch) -> Any:
    """'cuda' as it is: the CuPy backend on a machine with a GPU; elsewhere mapped to the
    host-emulated device backend (strict arrays: an implicit host transfer raises), as if
    a GPU were present."""
    if backends.available("cupy"):
        return backends.get("cupy")
    hostbuild = pytest.importorskip("ampref.backends.hostbuild")
    if hostbuild.host_compiler() is None:
        pytest.skip("no C++ compiler for the host build of the device kernels")
    import strictxp
    from strict_kernels import StrictHostKernels
    from ampref.backends.device import DeviceBackend

    be = DeviceBackend(strictxp, StrictHostKernels(hostbuild.HostKernels()), "cupy-host")
    backends.register("cupy-host", be)
    monkeypatch.setitem(device_table.DEVICE_KINDS, "cuda",
                        device_table.DeviceKind(type="cuda", backend="cupy-host", indices=1))
    return be


@pytest.mark.clause("ENG-DEV-001", "BKD-ENG-001")
def test_a_model_moved_to_the_device_trains_to_the_cpus_bits_and_moves_back(cuda: Any) -> None:
    """Inputs: a 2-layer MLP with a bool buffer and int64 labels; one copy stays on the
    CPU, the other goes model.to('cuda'), inputs x.to('cuda'), labels y.to('cuda');
    cross-entropy, backward, one SGD step each; then model.cpu(). Expected: the device
    tensors (the buffer included) report cuda:0; the
    loss, every gradient and every updated weight equal the CPU run's bits. Pass:
    bitwise."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 6)).astype(np.float32), np.array([0, 2, 1, 2])
    runs = []
    for where in ("cpu", "cuda"):
        ampref.manual_seed(3)
        model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 3))
        model.register_buffer("mask", ampref.tensor([True, False]))
        assert model.to(where) is model
        assert model.mask.device.type == where  # type: ignore[attr-defined]
        opt = ampref.optim.SGD(model.parameters(), lr=0.1)
        xs, ys = ampref.tensor(x).to(where), ampref.tensor(y).to(where)
        assert str(xs.device) == ("cuda:0" if where == "cuda" else "cpu")
        loss = ampref.functional.cross_entropy(model(xs), ys)
        loss.backward()
        grads = [p.backend.to_numpy(p.grad) for p in model.parameters()]
        opt.step()
        runs.append((loss.cpu().numpy(), grads, [p.numpy() for p in model.cpu().parameters()]))
    (loss_c, grads_c, w_c), (loss_d, grads_d, w_d) = runs
    assert_bitwise_equal(loss_d, loss_c)
    for a, b in zip(grads_d + w_d, grads_c + w_c, strict=True):
        assert_bitwise_equal(a, b)


@pytest.mark.clause("ENG-DEV-001", "ENG-BWD-001")
def test_a_move_is_a_graph_node_whose_gradient_returns_to_the_source(cuda: Any) -> None:
    """Inputs: a CPU leaf a = [1.5, -2, 3] requiring grad; b = a.to('cuda'); loss =
    (b * b).sum() on the device; backward. Expected: a.grad = 2a on the CPU backend
    (NumPy array). Pass: bitwise."""
    a = ampref.tensor([1.5, -2.0, 3.0], requires_grad=True)
    b = a.to("cuda")
    assert b.backend is cuda and not b.is_leaf
    (b * b).sum().backward()
    assert isinstance(a.grad, np.ndarray)
    assert_bitwise_equal(a.grad, np.array([3.0, -4.0, 6.0], np.float32))
