"""relax-schedule-cpu: scheduled kernels match numpy, and the schedule does what it says.

Every kernel is a TE-style PrimFunc (fill + linalg.generic) built through the CPU pipeline with
`lowering.schedule.testing.Kernel`. Tolerance for every comparison: rtol=1e-4, atol=1e-4
(f32; K <= 784). Random inputs use a fixed seed. Builds run under a watchdog: a pattern set that
never terminates (MLIR_NOTES) ends the test run with a traceback instead of hanging it.
"""

from __future__ import annotations

import faulthandler

import numpy as np
import pytest
from mlir import ir

import lowering  # noqa: F401  (registers the passes)
from lowering.registry import run_pipeline
from lowering.schedule import ScheduleOptions, classify, pack_weight, use_prepacked_weight
from lowering.schedule.common import SCHEDULE_ATTR, linalg_ops
from lowering.schedule.driver import schedule_function
from lowering.schedule.matmul import micro_tile
from lowering.schedule.pad import border_slabs
from lowering.schedule.testing import Kernel, matmul_text
from relaxmlir.target import Target

RTOL = ATOL = 1e-4
WATCHDOG_S = 120
AVX2 = "llvm -mcpu=x86-64-v3"
# The rule names the tests expect are AVX-512's (8 x 32 register tiles, 16 lanes): the schedules
# are checked for that target on every machine (IR only), while the numbers are computed by the
# host's own build (8-lane tiles on the pool's AVX2-only Zen 3).
AVX512 = "llvm -mcpu=x86-64-v4"


@pytest.fixture(autouse=True)
def watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape, dtype=np.float32)


def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    assert np.allclose(got, want, rtol=RTOL, atol=ATOL), f"{what}: max abs error {err}"


def run_matmul(m, n, k, *, transposed_b=False, batch=(), schedule="threads=1 strict=true"):
    kern = Kernel.build(
        matmul_text(m, n, k, transposed_b=transposed_b, batch=batch), "mm", schedule=schedule
    )
    a = rand(*batch, m, k)
    b = rand(*batch, n, k, seed=1) if transposed_b else rand(*batch, k, n, seed=1)
    c = np.full((*batch, m, n), 7.0, np.float32)  # the kernel must overwrite, not accumulate
    kern(a, b, c)
    return c, a @ (np.swapaxes(b, -1, -2) if transposed_b else b)


def scheduled_names(text: str, name: str, threads: int = 1, strict: bool = True) -> list[str]:
    with ir.Context():
        module = ir.Module.parse(text)
        func_op = next(
            op.operation
            for op in module.body.operations
            if ir.StringAttr(op.attributes["sym_name"]).value == name
        )
        target = Target.current() or Target(AVX512)
        return schedule_function(
            func_op, ScheduleOptions(target=target, threads=threads, strict=strict)
        )


# ---------------------------------------------------------------------------------------------
# Matmul family

MATMULS = [
    # (m, n, k, transposed_b, batch, route the schedule must pick)
    (64, 64, 64, False, (), "matmul-rows-8x32+1x64"),
    # nothing divides the tiles: 4 full row tiles, then the 5 rows past them in one tile
    (37, 53, 29, False, (), "matmul-rows-8x32+5x32"),
    (37, 53, 29, True, (), "matmul-rows-8x32+5x32"),
    (1, 128, 784, False, (), "matmul-small-1x128"),  # GEMV, B [K, N]
    (1, 128, 784, True, (), "matmul-dot-8x16"),  # GEMV, dense B [N, K]: split-K dot products
    (1, 10, 128, False, (), "matmul-small-1x16"),
    (256, 10, 128, True, (), "matmul-dot-5x16"),  # 10 columns: dot products, no padding to 32
    # decode attention, Q @ K^T with 3 query heads per key head: each key row meets all 3,
    # two heads' keys read side by side (two streams from memory)
    (3, 1024, 64, True, (4,), "matmul-dot-2h-3x1x16"),
    (1, 64, 64, True, (12,), "matmul-dot-6h-1x16"),  # 12 heads, one query each: 6 streams
    (1, 64, 64, True, (3,), "matmul-dot-3h-1x16"),
    # 2 heads of 2 rows: not side by side (the vector lowering broadcast B along the wrong one
    # of two equal dimensions), 4 rows of one head's B instead
    (2, 64, 16, True, (2,), "matmul-dot-2x4x16"),
    (6, 40, 64, True, (), "matmul-dot-3x2x16"),  # 6 rows in steps of 3
    (128, 96, 64, True, (), "matmul-rows-8x32+1x32"),
    (2, 40, 48, False, (3,), "matmul-small-2x48"),  # batch, few rows side by side
    # decode attention, scores @ V with 3 query heads per key head: the rows share V's vectors
    (3, 64, 1024, False, (4,), "matmul-small-3x64"),
    (8, 8, 64, False, (12,), "matmul-small-8x16"),  # 8-wide rows: a masked 8-row tile
    (33, 70, 17, True, (2,), "matmul-rows-8x32+1x32"),  # batch, transposed B, odd sizes
    (40, 64, 1100, False, (), "matmul-rows-8x32+1x64"),  # K past one K block, whole K rows
    (40, 64, 4200, False, (), "matmul-packed-8x32"),  # a K x 32 panel over L2/2: K blocks
]


@pytest.mark.parametrize("m,n,k,tb,batch,route", MATMULS)
def test_matmul_matches_numpy(m, n, k, tb, batch, route):
    got, want = run_matmul(m, n, k, transposed_b=tb, batch=batch)
    check(got, want, f"matmul {batch}x{m}x{n}x{k} transposed_b={tb}")
    assert scheduled_names(matmul_text(m, n, k, transposed_b=tb, batch=batch), "mm") == [route]


@pytest.mark.parametrize(
    "m,n,k,batch,route",
    [(8, 8, 64, (12,), "matmul-small-4x8"), (6, 10, 33, (), "matmul-small-6x16"),
     (4, 20, 17, (2,), "matmul-small-4x24"), (5, 10, 33, (), "matmul-small-5x16"),
     # decode attention, scores @ V with 3 query heads per key head: all 3 rows share each
     # vector of V, 4 vectors wide, in K blocks of 64 rows of V (16 KB, half of L1)
     (3, 64, 1024, (4,), "matmul-small-3x32-k64"), (3, 64, 1000, (2,), "matmul-small-3x32-k50"),
     (3, 64, 1021, (), "matmul-small-3x32-k64")],
)  # fmt: skip
def test_small_route_on_avx2(m, n, k, batch, route):
    """The small route on 8-lane vectors (an AVX2 build): rows side by side (as many as divide
    the rows, within the MR x NR tile's 12 accumulators), strips masked to the row's width,
    their sums carried through K in registers (`hoist.py`); strips narrower than B in K blocks
    (a prime K: a shorter last block)."""
    text = matmul_text(m, n, k, batch=batch)
    kern = Kernel.build(text, "mm", schedule="threads=1 strict=true", target=AVX2)
    a, b = rand(*batch, m, k), rand(*batch, k, n, seed=1)
    c = np.full((*batch, m, n), 7.0, np.float32)
    kern(a, b, c)
    check(c, a @ b, f"avx2 matmul {batch}x{m}x{n}x{k}")
    with Target(AVX2):
        assert scheduled_names(text, "mm") == [route]


@pytest.mark.parametrize(
    "m,n,k,tb,batch",
    [(m, n, k, tb, batch) for m, n, k, tb, batch, route in MATMULS if "rows" in route],
)
def test_matmul_packed_route_matches_numpy(m, n, k, tb, batch):
    """The cache-blocked packed route (A and C packed, padding and masks where the tiles do not
    divide), which `matmul.route` still reaches where the rule picks `rows`."""
    text = _with_knobs(
        matmul_text(m, n, k, transposed_b=tb, batch=batch), {"matmul.route": "packed"}
    )
    kern = Kernel.build(text, "mm", schedule="threads=1 strict=true")
    a = rand(*batch, m, k)
    b = rand(*batch, n, k, seed=1) if tb else rand(*batch, k, n, seed=1)
    c = np.full((*batch, m, n), 7.0, np.float32)
    kern(a, b, c)
    check(c, a @ (np.swapaxes(b, -1, -2) if tb else b), f"packed matmul {batch}x{m}x{n}x{k}")
    assert _names_with_knobs(text) == ["matmul-packed-8x32"]


@pytest.fixture
def parallel_everything(monkeypatch):
    """Parallelize ops of any size (the thresholds would keep these small tests sequential)."""
    for name in ("min_parallel_work", "min_parallel_elements", "min_parallel_copy"):
        monkeypatch.setattr(ScheduleOptions, name, property(lambda self: 1))


@pytest.mark.parametrize(
    "m,n,k,tb,batch",
    [(96, 200, 72, False, ()), (1, 512, 64, True, ()), (1, 300, 40, False, ()),
     (37, 53, 29, True, ()),
     # dot route: shares of 65 keys in steps of 5, and an uneven split one key at a time (its
     # last share of dynamic size had failed to vectorize in steps of 5 / 2)
     (1, 130, 300, True, ()), (2, 1030, 64, True, ()), (1, 131, 64, True, ()),
     # too few columns to share (decode's scores @ V: 64): the batch loop (the heads) splits
     # instead of running on one thread, odd counts too; on the dot route each thread's share
     # of heads, uneven or not, keeps whole register tiles (a tile of 6 heads over a share of
     # 3 failed to vectorize)
     (3, 64, 1024, False, (4,)), (3, 64, 1024, False, (3,)), (3, 64, 1024, False, (2, 3)),
     (3, 64, 1024, True, (4,)), (1, 64, 64, True, (6,)), (3, 40, 64, True, (5,)),
     (2, 64, 33, True, (2, 3))],
)  # fmt: skip
def test_matmul_two_threads(m, n, k, tb, batch, parallel_everything):
    got, want = run_matmul(m, n, k, transposed_b=tb, batch=batch, schedule="threads=2 strict=true")
    check(got, want, f"matmul {batch}x{m}x{n}x{k} threads=2")
    for target in (AVX2, AVX512):  # split on either vector width, whichever the host has
        with ir.Context():
            module = ir.Module.parse(matmul_text(m, n, k, transposed_b=tb, batch=batch))
            options = ScheduleOptions(target=Target(target), threads=2, strict=True)
            schedule_function(module.body.operations[0].operation, options)
            assert "scf.forall" in str(module), target


@pytest.mark.parametrize(
    "knobs",
    [
        {"matmul.route": "packed", "matmul.kc": 128, "matmul.split": "n"},
        {"matmul.route": "packed", "matmul.kc": 512, "matmul.split": "m", "matmul.mr": 4},
        {"matmul.route": "packed", "matmul.split": "n", "matmul.cache_cols": 128},
        {"matmul.route": "rows", "matmul.mr": 6},
        {"matmul.route": "rows", "matmul.rows_block": 1},
    ],
    ids=lambda k: ",".join(f"{n.split('.')[-1]}={v}" for n, v in k.items()),
)
def test_matmul_tuned_knobs_keep_the_numbers(knobs):
    """The tuning space's K block and thread split (space.py), on a product whose K (300) is not
    a multiple of the block and whose M and N panels do not divide evenly between threads."""
    import json

    m, n, k = 70, 200, 300
    text = matmul_text(m, n, k).replace(
        "attributes {relax.prim_func}",
        f"attributes {{relax.prim_func, relax.schedule_knobs = {json.dumps(json.dumps(knobs))}}}",
    )
    a, b, c = rand(m, k), rand(k, n, seed=1), np.zeros((m, n), np.float32)
    Kernel.build(text, "mm", schedule="threads=2 strict=true")(a, b, c)
    check(c, a @ b, f"matmul {m}x{n}x{k} with {knobs}")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("knobs", [{}, {"matmul.rows_block": 8}], ids=["default", "block8"])
def test_matmul_rows_column_blocks_keep_the_numbers(threads, knobs):
    """B (520 x 512, 1 MB) over half of L2: the rows route takes B's panels in column blocks
    (2 of the 16 by default, 8 with the knob), with 70 rows that MR divides neither whole nor
    per thread, so the remainder rows run across each block's panels too."""
    m, n, k = 70, 512, 520
    text = _with_knobs(matmul_text(m, n, k), {"matmul.route": "rows", **knobs})
    a, b, c = rand(m, k), rand(k, n, seed=1), np.zeros((m, n), np.float32)
    Kernel.build(text, "mm", schedule=f"threads={threads} strict=true")(a, b, c)
    check(c, a @ b, f"matmul {m}x{n}x{k} threads={threads} {knobs}")


@pytest.mark.parametrize(
    "m,n,k,batch,threads",
    [(17, 64, 32, (2,), 1), (10, 32, 32, (), 2), (9, 200, 100, (3,), 2), (70, 512, 520, (), 2)],
)
def test_matmul_rows_tiles_start_from_zero(m, n, k, batch, threads):
    """The rows route's register tiles start from zero vectors and nothing zeroes the packed C
    (`zero_start_accumulators`): full tiles, remainder rows, batches, padded panels, column
    blocks. Each kernel runs twice with different inputs: the second call gets the first's
    workspace block back, so a tile that read its accumulator instead would add to the first
    call's result."""
    text = _with_knobs(matmul_text(m, n, k, batch=batch), {"matmul.route": "rows"})
    kernel = Kernel.build(text, "mm", schedule=f"threads={threads} strict=true")
    for seed in (0, 2):
        a, b = rand(*batch, m, k, seed=seed), rand(*batch, k, n, seed=seed + 1)
        c = np.full((*batch, m, n), 7.0, np.float32)
        kernel(a, b, c)
        check(c, a @ b, f"matmul {batch}x{m}x{n}x{k} threads={threads} call {seed // 2 + 1}")


@pytest.mark.parametrize(
    "m,n,k,threads", [(64, 96, 48, 1), (17, 64, 32, 1), (70, 512, 520, 2), (128, 256, 64, 2)]
)
def test_matmul_rows_epilogue_reads_the_panels(m, n, k, threads):
    """A rows-route product followed by an epilogue in place on C (bias + ReLU, as fusion
    leaves it): the epilogue reads C's panels through a reshape and writes the output
    (`view_accumulators`), no unpack pass, and the tiles still start from zero. Full tiles,
    remainder rows, column blocks, 1 and 2 threads; two calls, the output prefilled with 7."""
    c_t = f"tensor<{m}x{n}xf32>"
    text = matmul_text(m, n, k).replace(
        f"%c: {c_t}) -> {c_t}", f"%bias: tensor<{n}xf32>, %c: {c_t}) -> {c_t}"
    ).replace(
        f"  return %r : {c_t}",
        f"""  %e = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%bias : tensor<{n}xf32>) outs(%r : {c_t}) {{
  ^bb0(%b0: f32, %acc: f32):
    %zero1 = arith.constant 0.0 : f32
    %s = arith.addf %acc, %b0 : f32
    %y = arith.maximumf %s, %zero1 : f32
    linalg.yield %y : f32
  }} -> {c_t}
  return %e : {c_t}""",
    )
    text = _with_knobs(text, {"matmul.route": "rows"})
    with ir.Context():
        module = ir.Module.parse(text)
        opts = f"threads={threads} strict=true"
        run_pipeline(module, f"builtin.module(relax-schedule-cpu{{{opts}}})")
        printed = str(module)
    assert "linalg.unpack" not in printed and "tensor.collapse_shape" in printed
    assert "linalg.fill" not in printed  # the zero start still applies
    kernel = Kernel.build(text, "mm", schedule=f"threads={threads} strict=true")
    for seed in (0, 2):
        a, b = rand(m, k, seed=seed), rand(k, n, seed=seed + 1)
        bias = rand(n, seed=seed + 3)
        c = np.full((m, n), 7.0, np.float32)
        kernel(a, b, bias, c)
        want = np.maximum(a @ b + bias, 0.0)
        check(c, want, f"matmul+bias+relu {m}x{n}x{k} threads={threads} call {seed // 2 + 1}")


@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_rows_epilogue_reading_c_twice(threads):
    """An epilogue with C as both its input and its init (C * C) reads the panels' view for
    both after `view_accumulators` rewrites it (once)."""
    m, n, k = 64, 256, 512
    c_t = f"tensor<{m}x{n}xf32>"
    text = matmul_text(m, n, k).replace(
        f"  return %r : {c_t}",
        f"""  %e = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%r : {c_t}) outs(%r : {c_t}) {{
  ^bb0(%v: f32, %acc: f32):
    %y = arith.mulf %v, %acc : f32
    linalg.yield %y : f32
  }} -> {c_t}
  return %e : {c_t}""",
    )
    kernel = Kernel.build(text, "mm", schedule=f"threads={threads} strict=true")
    a, b = rand(m, k), rand(k, n, seed=1)
    c = np.full((m, n), 7.0, np.float32)
    kernel(a, b, c)
    check(c, (a @ b) ** 2, f"(a @ b)^2 threads={threads}")


def _with_knobs(text: str, knobs: dict) -> str:
    import json

    return text.replace(
        "attributes {relax.prim_func}",
        f"attributes {{relax.prim_func, relax.schedule_knobs = {json.dumps(json.dumps(knobs))}}}",
    )


def _schedule_pass(module: ir.Module, threads: int) -> None:
    """relax-schedule-cpu over `module` for AVX-512 (IR only), strict."""
    options = f'target="{AVX512}" threads={threads} strict=true'
    run_pipeline(module, f"builtin.module(relax-schedule-cpu{{{options}}})")


def _names_with_knobs(text: str, threads: int = 1) -> list[str]:
    """The rules' names after the schedule pass, which reads the kernel's knobs attribute."""
    with ir.Context():
        module = ir.Module.parse(text)
        _schedule_pass(module, threads)
        func_op = module.body.operations[0].operation
        return [ir.StringAttr(a).value for a in ir.ArrayAttr(func_op.attributes[SCHEDULE_ATTR])]


@pytest.mark.parametrize(
    "m,n,k,tb,batch,threads",
    [(64, 64, 300, False, (), 2), (32, 96, 40, True, (3,), 1), (16, 64, 600, False, (2,), 2)],
)
def test_matmul_inplace_c_layout(m, n, k, tb, batch, threads, parallel_everything):
    """`matmul.c_layout = inplace`: the register tiles accumulate in C (viewed as
    [M/8, 8, N/32, 32]) over several K blocks and thread panels; C starts at 7 so a missing
    zero fill shows."""
    text = _with_knobs(
        matmul_text(m, n, k, transposed_b=tb, batch=batch),
        {"matmul.route": "packed", "matmul.c_layout": "inplace"},
    )
    assert _names_with_knobs(text, threads) == ["matmul-packed-8x32-inplace"]
    a = rand(*batch, m, k)
    b = rand(*batch, n, k, seed=1) if tb else rand(*batch, k, n, seed=1)
    c = np.full((*batch, m, n), 7.0, np.float32)
    Kernel.build(text, "mm", schedule=f"threads={threads} strict=true")(a, b, c)
    check(c, a @ (np.swapaxes(b, -1, -2) if tb else b), f"in-place matmul {batch}x{m}x{n}x{k}")


def test_matmul_inplace_c_layout_needs_whole_tiles():
    """Rows that the register tile does not divide keep the packed accumulator (C is then not a
    reshape of the panels); an unknown layout is an error naming the knob."""
    packed = {"matmul.route": "packed"}
    text = _with_knobs(matmul_text(36, 64, 40), {**packed, "matmul.c_layout": "inplace"})
    assert _names_with_knobs(text) == ["matmul-packed-8x32"]
    bad = _with_knobs(matmul_text(64, 64, 40), {**packed, "matmul.c_layout": "rows"})
    with pytest.raises(Exception, match="matmul.c_layout=rows: expected one of packed, inplace"):
        _names_with_knobs(bad)


def test_schedule_off_gives_same_numbers():
    text = matmul_text(37, 53, 29, transposed_b=True)
    a, b = rand(37, 29), rand(53, 29, seed=1)
    outs = []
    for schedule in ("threads=1", "schedule=off", None):
        c = np.zeros((37, 53), np.float32)
        Kernel.build(text, "mm", schedule=schedule)(a, b, c)
        outs.append(c)
    check(outs[0], outs[1], "schedule on vs off")
    check(outs[1], outs[2], "schedule off vs no pass")


@pytest.mark.parametrize("m,n,k,tb", [(64, 96, 48, True), (37, 70, 29, False), (1, 128, 784, True)])
def test_prepacked_weight(m, n, k, tb):
    w = rand(n, k, seed=1) if tb else rand(k, n, seed=1)
    nr = micro_tile(Target("llvm")).nr
    packed, layout = pack_weight(w, transposed=tb, nr=nr)
    assert packed.shape == (-(-n // nr), k, nr) and layout.packed_shape == packed.shape
    with ir.Context():
        module = ir.Module.parse(matmul_text(m, n, k, transposed_b=tb))
        func_op = module.body.operations[0].operation
        use_prepacked_weight(func_op, 1, layout)
        text = str(module)
    assert "relax.prepacked" in text
    a = rand(m, k)
    for schedule in ("threads=1 strict=true", "schedule=off"):  # unscheduled: the unpack runs
        c = np.zeros((m, n), np.float32)
        Kernel.build(text, "mm", schedule=schedule)(a, packed, c)
        check(c, a @ (w.T if tb else w), f"prepacked {m}x{n}x{k} {schedule}")
    with ir.Context():
        module = ir.Module.parse(text)
        schedule_function(
            module.body.operations[0].operation, ScheduleOptions(threads=1, strict=True)
        )
        assert str(module).count("linalg.pack") == 0 and "vector.transfer_read %arg1" in str(module)


@pytest.mark.parametrize("n,k", [(1000, 1280), (200, 2816)])
def test_packed_gemv_splits_odd_panels_across_threads(n, k):
    """One row against prepacked weights whose panels (NR = 16 on AVX2) do not split evenly
    between two threads: the last thread takes fewer whole panels, rather than one thread
    taking them all (MobileNetV2's classifier on AVX2: 63 panels, 227 us at 1 and 2 threads)."""
    m = 1
    target = Target("llvm -mcpu=x86-64-v3")
    nr = micro_tile(target).nr
    assert -(-n // nr) % 2 == 1, "the panels must not divide between two threads"
    w = rand(n, k, seed=1)
    packed, layout = pack_weight(w, transposed=True, nr=nr)
    with ir.Context():
        module = ir.Module.parse(matmul_text(m, n, k, transposed_b=True))
        func_op = module.body.operations[0].operation
        use_prepacked_weight(func_op, 1, layout)
        text = str(module)
        schedule_function(func_op, ScheduleOptions(threads=2, strict=True, target=target))
        assert "scf.forall" in str(module), str(module)
    a, c = rand(m, k), np.zeros((m, n), np.float32)
    Kernel.build(text, "mm", schedule="threads=2 strict=true", target=target)(a, packed, c)
    check(c, a @ w.T, f"prepacked {m}x{n}x{k} on 2 threads")


@pytest.mark.parametrize("n,tile", [(192, 32), (320, 32), (224, 16), (480, 16)])
def test_packed_gemv_uneven_register_tiles_split_evenly(n, tile):
    """One row against prepacked weights whose panels (12, 20, 14, 30 of NR = 16 on AVX2)
    split between two threads but not in groups of GEMV_NB = 4: narrower register tiles (2 or 1
    panels) that split evenly. The last thread's share of 4-panel tiles had a size known only
    at run time, which the vectorizer refused: a batch-1 linear of 192 columns failed to build
    ("op was not bufferized" on the weight's unpack)."""
    m, k = 1, 768
    target = Target("llvm -mcpu=x86-64-v3")
    w = rand(n, k, seed=1)
    packed, layout = pack_weight(w, transposed=True, nr=micro_tile(target).nr)
    with ir.Context():
        module = ir.Module.parse(matmul_text(m, n, k, transposed_b=True))
        func_op = module.body.operations[0].operation
        use_prepacked_weight(func_op, 1, layout)
        text = str(module)
    with target:
        names = scheduled_names(text, "mm", threads=2)
    assert names == [f"matmul-packed-1x{tile}"], names
    a, c = rand(m, k), np.zeros((m, n), np.float32)
    Kernel.build(text, "mm", schedule="threads=2 strict=true", target=target)(a, packed, c)
    check(c, a @ w.T, f"prepacked {m}x{n}x{k} on 2 threads")


@pytest.mark.parametrize(
    ("m", "threads", "mcpu", "route"),
    [
        (2, 1, "x86-64-v4", "matmul-packed-2x128"),
        (4, 1, "x86-64-v4", "matmul-packed-4x64"),
        (7, 1, "x86-64-v4", "matmul-packed-7x32"),
        (5, 2, "x86-64-v4", "matmul-packed-5x32"),  # the threads split B's panels
        (4, 1, "x86-64-v3", "matmul-packed-4x16"),
        (3, 2, "x86-64-v3", "matmul-packed-3x32"),
    ],
)
def test_few_rows_against_prepacked_weights_share_a_register_tile(
    m, threads, mcpu, route, parallel_everything
):
    """Fewer rows than the register tile's (a batch of 2..7 through prepacked weights) run in
    one tile of all of them, as many panels wide as the MR x NR tile's accumulators allow: row
    by row, each row streamed B from L2 once more, one B vector per FMA (4 x 768 x 3072 on Zen 4:
    378 -> 172 us, 7 rows 672 -> 294). Against numpy."""
    n, k = 256, 96
    target = Target(f"llvm -mcpu={mcpu}")
    nr = micro_tile(target).nr
    w = rand(n, k, seed=1)
    packed, layout = pack_weight(w, transposed=True, nr=nr)
    with ir.Context():
        module = ir.Module.parse(matmul_text(m, n, k, transposed_b=True))
        use_prepacked_weight(module.body.operations[0].operation, 1, layout)
        text = str(module)
    options = ScheduleOptions(threads=threads, strict=True, target=target)
    with ir.Context():
        module = ir.Module.parse(text)
        assert schedule_function(module.body.operations[0].operation, options) == [route]
        assert ("scf.forall" in str(module)) == (threads > 1)
    if target.runs_on_host():
        pytest.skip(f"this machine lacks {target.runs_on_host()}")
    a, c = rand(m, k), np.zeros((m, n), np.float32)
    Kernel.build(text, "mm", schedule=f"threads={threads} strict=true", target=target)(a, packed, c)
    check(c, a @ w.T, f"prepacked {m}x{n}x{k} on {threads} thread(s), {mcpu}")


@pytest.mark.parametrize("mcpu", ["x86-64-v4", "x86-64-v3"])
@pytest.mark.parametrize(
    "m,n,k,threads,blocks",
    [(128, 1024, 256, 1, 0), (70, 1024, 300, 1, 0), (256, 1024, 160, 1, 0),
     (128, 1024, 256, 2, 0), (70, 2048, 160, 2, 0), (70, 1024, 300, 1, 1),
     (64, 1024, 300, 2, 1), (70, 1024, 300, 1, 16)],
)  # fmt: skip
def test_rows_blocks_prefetch_the_next_block(m, n, k, threads, blocks, mcpu):
    """Prepacked weights of 1 MB and more go through the rows route in column blocks, and each
    block's K loop prefetches the next block (lowering/prefetch.py): a remainder of rows past
    the MR-row tiles (70), more row tiles than fetch (256 rows: 32 tiles, 16 fetch), blocks of
    one panel (the `matmul.rows_block` knob; a deep K, BERT's 3072 -> 768, gets them: no panel
    loop), and the threads splitting the rows or B's panels (2048 columns). The code holds
    the prefetches, the numbers are numpy's, and without the knob there is none; nor where two
    blocks do not fit the L2 (16 panels: 614 KB on AVX-512, of the 1 MB that a target without
    cache sizes assumes), where the next would push out the one being computed."""
    target = Target(f"llvm -mcpu={mcpu}")
    both_fit = 2 * (blocks or 1) * 4 * k * micro_tile(target).nr <= 1 << 20
    size = {"matmul.rows_block": blocks} if blocks else {}
    _check_prefetches(m, n, k, threads, target, both_fit, size)


def _check_prefetches(m, n, k, threads, target, prefetches: bool, knobs: dict) -> None:
    """An m x n x k linear with prepacked weights built with `knobs`: its code prefetches
    (or not, as `prefetches` says; never with the `matmul.prefetch` knob off), and its numbers
    are numpy's, both ways."""
    text, w, packed = _prepacked_linear(m, n, k, target)
    if target.runs_on_host():
        pytest.skip(f"this machine lacks {target.runs_on_host()}")
    a = rand(m, k)
    for extra, expected in (({}, prefetches), ({"matmul.prefetch": 0}, False)):
        built = {**knobs, **extra}
        schedule = f"threads={threads} strict=true"
        kern = Kernel.build(_with_knobs(text, built), "mm", schedule=schedule, target=target)
        assert ("llvm.intr.prefetch" in str(kern.module)) == expected, built
        c = np.full((m, n), 7.0, np.float32)
        kern(a, packed, c)
        check(c, a @ w.T, f"prepacked {m}x{n}x{k} on {threads} thread(s), {target}, {built}")


@pytest.mark.parametrize("mcpu", ["x86-64-v4", "x86-64-v3"])
@pytest.mark.parametrize("threads", [1, 2])
def test_one_row_tile_prefetches_two_panels_ahead(mcpu, threads):
    """Exactly one full row tile (MR rows: 8 on AVX-512, 6 on AVX2; a batch of 8 through a
    model's weights) through prepacked weights of 4 MB: B goes in blocks of two panels and each
    block's K loop prefetches the next (it had one stream of B and no blocks: 8 x 3072 -> 768
    at 1 thread 1013 -> 750 us). The code holds the prefetches (none with the knob off) and the
    numbers are numpy's."""
    target = Target(f"llvm -mcpu={mcpu}")
    _check_prefetches(micro_tile(target).mr, 1024, 1024, threads, target, True, {})


def _prepacked_linear(
    m: int | None, n: int, k: int, target: Target
) -> tuple[str, np.ndarray, np.ndarray]:
    """A linear layer of m rows (None: any number, `?`), `x @ w.T` with w: n x k, whose weight
    is packed ahead for `target`: (its PrimFunc text, w, the packed w it takes)."""
    w = rand(n, k, seed=1)
    packed, layout = pack_weight(w, transposed=True, nr=micro_tile(target).nr)
    with ir.Context():
        text = matmul_text(m or 5, n, k, transposed_b=True)
        text = text if m else text.replace("tensor<5x", "tensor<?x")
        module = ir.Module.parse(text)
        use_prepacked_weight(module.body.operations[0].operation, 1, layout)
        return str(module), w, packed


@pytest.mark.parametrize("threads", [1, 2])
def test_symbolic_rows_prefetch_the_next_block(threads):
    """Built once for any number of rows (a sequence length `n`) through 1.2 MB of prepacked
    weights: the 8-row tiles count themselves when they run (lowering/prefetch.py) and fetch
    the next column block; the numbers at 1, 7, 70, 256 and 1000 rows are numpy's. BERT-base
    built for a symbolic sequence had run 1.45x slower than its static build at n = 32 once
    only the static one prefetched."""
    n, k = 1024, 300
    target = Target(AVX512 if not Target(AVX512).runs_on_host() else AVX2)
    text, w, packed = _prepacked_linear(None, n, k, target)
    kern = Kernel.build(text, "mm", schedule=f"threads={threads} strict=true", target=target)
    assert "llvm.intr.prefetch" in str(kern.module)
    for m in (1, 7, 70, 256, 1000):
        a, c = rand(m, k), np.full((m, n), 7.0, np.float32)
        kern(a, packed, c)
        check(c, a @ w.T, f"symbolic rows m={m} on {threads} thread(s), {target}")


@pytest.mark.parametrize("mcpu", ["x86-64-v4", "x86-64-v3"])
def test_one_thread_dispatches_few_and_many_symbolic_rows(mcpu):
    """Built once for any number of rows on one thread, through prepacked weights with a deep
    K (2048: panels of 256 KB on AVX-512, 128 KB on AVX2, against the 1 MB of L2 a target
    without cache sizes assumes): a few rows run the GEMV tile over whole panel groups, too
    large to prefetch the next beside, and from 8 rows on a second copy runs small column
    blocks, each next one prefetched (`matmul.rows_dispatch`). The code holds both copies (the
    prefetches come from the second), and the numbers on either side of the switch are
    numpy's. With one copy, BERT-base's 3072 -> 768 projection at n = 32 ran 1.75x slower
    than built for 32."""
    n, k = 256, 2048
    target = Target(f"llvm -mcpu={mcpu}")
    text, w, packed = _prepacked_linear(None, n, k, target)
    with ir.Context():
        scheduled = ir.Module.parse(text)
        options = ScheduleOptions(threads=1, strict=True, target=target)
        schedule_function(scheduled.body.operations[0].operation, options)
        assert "scf.if" in str(scheduled)  # the run-time dispatch on the row count
    if target.runs_on_host():
        pytest.skip(f"this machine lacks {target.runs_on_host()}")
    kern = Kernel.build(text, "mm", schedule="threads=1 strict=true", target=target)
    assert "llvm.intr.prefetch" in str(kern.module)
    for m in (1, 4, 7, 8, 9, 33):
        a, c = rand(m, k), np.full((m, n), 7.0, np.float32)
        kern(a, packed, c)
        check(c, a @ w.T, f"symbolic rows m={m} on 1 thread, {mcpu}")


@pytest.mark.parametrize(
    ("m", "route"), [(12, "matmul-rows-8x32+4x32"), (9, "matmul-rows-8x32+1x32")]
)
def test_rows_between_one_and_two_tiles_split_wide_weights(m, route):
    """MR to 2 MR - 1 rows on 2 threads through weights beyond L2 (BERT-base at a sequence of
    12): the threads split B's panels and each runs every row (8-row tiles, then the rest in one
    tile, B in column blocks), where the packed route padded 12 rows to 16 and packed them
    (BERT-base at n = 12: 30 -> 22 ms at 1 thread). Against numpy."""
    target = Target({"kind": "llvm", "mcpu": "x86-64-v4", "l2-cache": 1 << 20, "num-cores": 2})
    n, k = 1280, 256  # B: 1.3 MB
    text = matmul_text(m, n, k, transposed_b=True)
    options = ScheduleOptions(threads=2, strict=True, target=target)
    with ir.Context():
        module = ir.Module.parse(text)
        assert schedule_function(module.body.operations[0].operation, options) == [route]
        assert "scf.forall" in str(module)
    if target.runs_on_host():
        pytest.skip(f"this machine lacks {target.runs_on_host()}")
    a, b, c = rand(m, k), rand(n, k, seed=1), np.full((m, n), 7.0, np.float32)
    Kernel.build(text, "mm", schedule="threads=2 strict=true", target=target)(a, b, c)
    check(c, a @ b.T, f"{m}x{n}x{k} on 2 threads")


def test_pack_weight_layout():
    w = np.arange(5 * 3, dtype=np.float32).reshape(5, 3)  # [K=5, N=3]
    packed, _ = pack_weight(w, transposed=False, nr=2)
    assert packed.shape == (2, 5, 2)
    assert np.array_equal(packed[0], w[:, 0:2]) and np.array_equal(packed[1][:, 0], w[:, 2])
    assert np.all(packed[1][:, 1] == 0)  # zero padding past N
    packed_t, _ = pack_weight(np.ascontiguousarray(w.T), transposed=True, nr=2)
    assert np.array_equal(packed, packed_t)


# ---------------------------------------------------------------------------------------------
# Reductions and elementwise chains

REDUCE = """
func.func private @red(%a: tensor<{shape}xf32>, %c: tensor<{m}xf32>) -> tensor<{m}xf32> attributes {{relax.prim_func}} {{
  %init = arith.constant {init} : f32
  %f = linalg.fill ins(%init : f32) outs(%c : tensor<{m}xf32>) -> tensor<{m}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> ({amap})>, affine_map<(d0, d1) -> (d0)>],
                        iterator_types = ["parallel", "reduction"]}}
      ins(%a : tensor<{shape}xf32>) outs(%f : tensor<{m}xf32>) {{
  ^bb0(%x: f32, %acc: f32):
    %s = {op} %acc, %x : f32
    linalg.yield %s : f32
  }} -> tensor<{m}xf32>
  return %r : tensor<{m}xf32>
}}
"""


@pytest.mark.parametrize(
    "m,k,kind,axis",
    [
        (37, 100, "sum", 1),
        (64, 784, "max", 1),
        (5, 7, "sum", 1),
        (48, 33, "sum", 0),
        (16, 300, "max", 0),
    ],
)
def test_reduction_matches_numpy(m, k, kind, axis):
    op, init, ref = {
        "sum": ("arith.addf", "0.0", np.sum),
        "max": ("arith.maximumf", "0xFF800000", np.max),
    }[kind]
    shape = (m, k) if axis == 1 else (k, m)
    text = REDUCE.format(
        shape=f"{shape[0]}x{shape[1]}",
        m=m,
        init=init,
        op=op,
        amap="d0, d1" if axis == 1 else "d1, d0",
    )
    a, c = rand(*shape), np.zeros(m, np.float32)
    Kernel.build(text, "red", schedule="threads=1 strict=true")(a, c)
    check(c, ref(a, axis=axis), f"{kind} over axis {axis} of {shape}")
    route = scheduled_names(text, "red")[0]
    assert route.startswith("reduction-inner" if axis == 1 else "reduction-outer"), route


ROW_MAX = """
func.func private @rowmax(%a: tensor<{h}x{n}x{n}xf32>, %c: tensor<{h}x{n}xf32>) -> tensor<{h}x{n}xf32> attributes {{relax.prim_func}} {{
  %init = arith.constant 0xFF800000 : f32
  %f = linalg.fill ins(%init : f32) outs(%c : tensor<{h}x{n}xf32>) -> tensor<{h}x{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%a : tensor<{h}x{n}x{n}xf32>) outs(%f : tensor<{h}x{n}xf32>) {{
  ^bb0(%x: f32, %acc: f32):
    %s = arith.maximumf %acc, %x : f32
    linalg.yield %s : f32
  }} -> tensor<{h}x{n}xf32>
  return %r : tensor<{h}x{n}xf32>
}}
"""


@pytest.mark.parametrize(
    "h,n,threads,route",
    [
        (12, 197, 1, "reduction-inner-8x16+5x16"),  # ViT-B/16's attention rows
        (12, 197, 2, "reduction-inner-8x16+5x16"),  # the threads split the heads, 6 each
        (3, 197, 2, "reduction-inner-1x16"),  # they split the rows unevenly: one row a step
        (4, 40, 1, "reduction-inner-8x16"),  # 8 divides the rows
        (4, 13, 1, "reduction-inner-8x16+5x16"),  # 13 (masked vectors)
        (4, 7, 1, "reduction-inner-7x16"),  # one block of all the rows
    ],
)
def test_prime_rows_reduce_in_blocks_and_a_rest(h, n, threads, route):
    """A row max (softmax's first pass) over rows that no block of 4 or more divides runs in
    8-row blocks and one block of the rest (197 = 24 x 8 + 5), unless the threads split the
    rows themselves in unequal shares; the numbers are numpy's."""
    text = ROW_MAX.format(h=h, n=n)
    assert scheduled_names(text, "rowmax", threads=threads) == [route]
    a, c = rand(h, n, n), np.zeros((h, n), np.float32)
    Kernel.build(text, "rowmax", schedule=f"threads={threads} strict=true", target=AVX512)(a, c)
    check(c, a.max(axis=2), f"row max of {h}x{n}x{n} on {threads} thread(s)")


BIAS_RELU = """
func.func private @bias_relu(%a: tensor<{d}x{n}xf32>, %b: tensor<{n}xf32>, %c: tensor<{d}x{n}xf32>) -> tensor<{d}x{n}xf32> attributes {{relax.prim_func}} {{
  %e = tensor.empty({dyn}) : tensor<{d}x{n}xf32>
  %1 = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : tensor<{d}x{n}xf32>, tensor<{n}xf32>) outs(%e : tensor<{d}x{n}xf32>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }} -> tensor<{d}x{n}xf32>
  %2 = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%1 : tensor<{d}x{n}xf32>) outs(%c : tensor<{d}x{n}xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %s = arith.maximumf %x, %z : f32
    linalg.yield %s : f32
  }} -> tensor<{d}x{n}xf32>
  return %2 : tensor<{d}x{n}xf32>
}}
"""


def _bias_relu_text(rows, n, dynamic=False):
    if not dynamic:
        return BIAS_RELU.format(d=rows, n=n, dyn="")
    rows_dim = (
        f"  %i0 = arith.constant 0 : index\n  %rows = tensor.dim %a, %i0 : tensor<?x{n}xf32>\n"
    )
    return BIAS_RELU.format(d="?", n=n, dyn="%rows").replace(
        "  %e = tensor.empty", rows_dim + "  %e = tensor.empty"
    )


@pytest.mark.parametrize("rows,n,threads", [(37, 53, 1), (256, 128, 1), (1, 10, 1), (600, 520, 2)])
def test_elementwise_chain_matches_numpy(rows, n, threads, parallel_everything):
    a, b, c = rand(rows, n), rand(n, seed=1), np.zeros((rows, n), np.float32)
    Kernel.build(_bias_relu_text(rows, n), "bias_relu", schedule=f"threads={threads} strict=true")(
        a, b, c
    )
    check(c, np.maximum(a + b, 0), f"bias+relu {rows}x{n}")


def test_dynamic_batch_schedules():
    """Dynamic rows: a matmul narrower than a panel takes the row-by-row dot route, a wide one
    the peeled 8-row tiles and the rows past them in parts of 4, 2 and 1
    (tests/lit/schedule/symbolic-matmul.mlir); elementwise ops vectorize. Every row count from 1
    to 17 (each part present or not) against numpy."""
    mm = matmul_text(5, 24, 16, transposed_b=True).replace("tensor<5x", "tensor<?x")
    assert scheduled_names(mm, "mm") == ["matmul-dot-8x16"]
    wide = matmul_text(5, 64, 16, transposed_b=True).replace("tensor<5x", "tensor<?x")
    assert scheduled_names(wide, "mm") == ["matmul-rows-8x32+4x64+2x64+1x64"]
    kernel = Kernel.build(wide, "mm", schedule="threads=1 strict=true")
    for rows in range(1, 18):
        a, b, c = rand(rows, 16), rand(64, 16, seed=1), np.full((rows, 64), 7.0, np.float32)
        kernel(a, b, c)
        check(c, a @ b.T, f"dynamic wide matmul rows={rows}")
    for rows in (3, 17):
        a, b, c = rand(rows, 16), rand(24, 16, seed=1), np.zeros((rows, 24), np.float32)
        Kernel.build(mm, "mm", schedule="threads=1 strict=true")(a, b, c)
        check(c, a @ b.T, f"dynamic matmul rows={rows}")
        x, bias, out = rand(rows, 10), rand(10, seed=2), np.zeros((rows, 10), np.float32)
        Kernel.build(
            _bias_relu_text(rows, 10, dynamic=True), "bias_relu", schedule="threads=1 strict=true"
        )(x, bias, out)
        check(out, np.maximum(x + bias, 0), f"dynamic bias+relu rows={rows}")


# ---------------------------------------------------------------------------------------------
# Classification and the pass interface


def test_classify_patterns():
    with ir.Context():
        module = ir.Module.parse(
            matmul_text(8, 32, 16, transposed_b=True)
            + _bias_relu_text(4, 8).replace("@bias_relu", "@br")
            + REDUCE.format(shape="4x8", m=4, init="0.0", op="arith.addf", amap="d0, d1")
        )
        funcs = [op.operation for op in module.body.operations]
        kinds = [[classify(op).pattern for op in linalg_ops(f)] for f in funcs]
        info = classify(linalg_ops(funcs[0])[0])
    assert kinds == [["matmul"], ["elementwise", "elementwise"], ["reduction"]]
    assert (info.m, info.n, info.k, info.batch) == (0, 1, 2, [])


def test_pass_options_and_attribute():
    text = matmul_text(64, 64, 64)
    with ir.Context():
        module = ir.Module.parse(text)
        _schedule_pass(module, 2)
        out = str(module)
    assert f'{SCHEDULE_ATTR} = ["matmul-rows-8x32+1x64"]' in out
    assert (
        "linalg.pack" not in out and "vector.outerproduct" in out
    )  # packs vectorized, FMAs formed
    with ir.Context():
        module = ir.Module.parse(text)
        run_pipeline(module, "builtin.module(relax-schedule-cpu{schedule=off})")
        assert SCHEDULE_ATTR not in str(module)
    with ir.Context(), pytest.raises(Exception, match=r"expected threads=N"):
        run_pipeline(ir.Module.parse(text), "builtin.module(relax-schedule-cpu{threads=0})")


@pytest.mark.slow
@pytest.mark.parametrize("size", [128, 300, 512, 1000])
@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_sweep(size, threads):
    for tb in (False, True):
        got, want = run_matmul(
            size, size + 8, size - 8, transposed_b=tb, schedule=f"threads={threads} strict=true"
        )
        check(got, want, f"sweep {size} tb={tb} threads={threads}")


# ---------------------------------------------------------------------------------------------
# Direct convolution and per-op fallback

CONV = """
func.func private @conv(%x: tensor<{n}x{c}x{h}x{h}xf32>, %w: tensor<{f}x{c}x{k}x{k}xf32>, %o: tensor<{n}x{f}x{oh}x{oh}xf32>) -> tensor<{n}x{f}x{oh}x{oh}xf32> attributes {{relax.prim_func}} {{
  %zero = arith.constant 0.0 : f32
  %fill = linalg.fill ins(%zero : f32) outs(%o : tensor<{n}x{f}x{oh}x{oh}xf32>) -> tensor<{n}x{f}x{oh}x{oh}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 + d5, d3 + d6)>,
                                         affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>,
                                         affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}}
      ins(%x, %w : tensor<{n}x{c}x{h}x{h}xf32>, tensor<{f}x{c}x{k}x{k}xf32>) outs(%fill : tensor<{n}x{f}x{oh}x{oh}xf32>) {{
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> tensor<{n}x{f}x{oh}x{oh}xf32>
  return %r : tensor<{n}x{f}x{oh}x{oh}xf32>
}}
"""


def conv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    k = w.shape[-1]
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))  # n c oh ow kh kw
    return np.einsum("nchwij,fcij->nfhw", windows, w)


@pytest.mark.parametrize(
    "n,c,h,f,k,route",
    [
        (2, 1, 32, 6, 5, "conv-6x4x14"),
        (2, 6, 14, 16, 5, "conv-4x5x10"),
        (1, 3, 20, 4, 3, "conv-4x6x9"),
    ],
)
def test_conv_matches_numpy(n, c, h, f, k, route):
    oh = h - k + 1
    text = CONV.format(n=n, c=c, h=h, f=f, k=k, oh=oh)
    x, w, o = rand(n, c, h, h), rand(f, c, k, k, seed=1), np.zeros((n, f, oh, oh), np.float32)
    Kernel.build(text, "conv", schedule="threads=1 strict=true")(x, w, o)
    check(o, conv_reference(x, w), f"conv {n}x{c}x{h}x{h} * {f}x{c}x{k}x{k}")
    # a batch of 2 (784 and 100 output rows per sample): the kernel of one sample in a loop
    expected = [route] if n == 1 or (h - k + 1) ** 2 < 32 else ["per-sample", route]
    assert scheduled_names(text, "conv") == expected


BLOCKED_CONV_IN_PLACE = """
#img = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d5, d2 + d6, d3 + d7, d8)>
#wgt = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d1, d5, d6, d7, d8, d4)>
#out = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d1, d2, d3, d4)>
#id = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#bias = affine_map<(d0, d1, d2, d3, d4) -> (0, d1, 0, 0, d4)>
func.func private @conv(%x: tensor<4x2x14x14x16xf32>, %w: tensor<2x2x3x3x16x16xf32>, %b: tensor<1x2x1x1x16xf32>, %out: tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32> attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %acc0 = tensor.empty() : tensor<4x2x14x14x16xf32>
  %pe = tensor.empty() : tensor<4x2x16x16x16xf32>
  %pf = linalg.fill ins(%cst : f32) outs(%pe : tensor<4x2x16x16x16xf32>) -> tensor<4x2x16x16x16xf32>
  %inner = tensor.extract_slice %pf[0, 0, 1, 1, 0] [4, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<4x2x16x16x16xf32> to tensor<4x2x14x14x16xf32>
  %copied = linalg.copy ins(%x : tensor<4x2x14x14x16xf32>) outs(%inner : tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32>
  %padded = tensor.insert_slice %copied into %pf[0, 0, 1, 1, 0] [4, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<4x2x14x14x16xf32> into tensor<4x2x16x16x16xf32>
  %zero = linalg.fill ins(%cst : f32) outs(%acc0 : tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32>
  %conv = linalg.generic {indexing_maps = [#img, #wgt, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%padded, %w : tensor<4x2x16x16x16xf32>, tensor<2x2x3x3x16x16xf32>) outs(%zero : tensor<4x2x14x14x16xf32>) {
  ^bb0(%in: f32, %k: f32, %o: f32):
    %m = arith.mulf %in, %k : f32
    %a = arith.addf %o, %m : f32
    linalg.yield %a : f32
  } -> tensor<4x2x14x14x16xf32>
  %y = linalg.generic {indexing_maps = [#bias, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%b : tensor<1x2x1x1x16xf32>) outs(%conv : tensor<4x2x14x14x16xf32>) {
  ^bb0(%bb: f32, %o: f32):
    %a = arith.addf %o, %bb : f32
    %r = arith.maximumf %a, %cst : f32
    linalg.yield %r : f32
  } -> tensor<4x2x14x14x16xf32>
  return %y : tensor<4x2x14x14x16xf32>
}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_conv_in_place_epilogue_matches_numpy(threads):
    """A static batch's bias + ReLU updating a channel-blocked conv's result in place (as
    `fuse_tir.make_inplace` leaves ResNet-18 at batch 8) is computed through the conv's
    register tiles, per sample, with the right values."""
    x, w, b = rand(4, 2, 14, 14, 16), rand(2, 2, 3, 3, 16, 16, seed=1), rand(1, 2, 1, 1, 16, seed=2)
    out = np.zeros((4, 2, 14, 14, 16), np.float32)
    Kernel.build(BLOCKED_CONV_IN_PLACE, "conv", schedule=f"threads={threads} strict=true")(
        x, w, b, out
    )
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    want = np.einsum("ncyxiuv,fcuvio->nfyxo", windows, w) + b
    check(out, np.maximum(want, 0), f"blocked conv + bias + relu in place, {threads} threads")
    names = scheduled_names(BLOCKED_CONV_IN_PLACE, "conv", threads)
    assert names[:3] == ["per-sample", "elementwise-16", "conv-2x7x16+epilogue"]


CALL_THEN_RELU = """
func.func private @twice(%x: f32) -> f32 {
  %y = arith.addf %x, %x : f32
  return %y : f32
}
func.func private @call_relu(%x: tensor<8x20xf32>, %out: tensor<8x20xf32>) -> tensor<8x20xf32> attributes {relax.prim_func} {
  %e = tensor.empty() : tensor<8x20xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x20xf32>) outs(%e : tensor<8x20xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = func.call @twice(%a) : (f32) -> f32
    linalg.yield %v : f32
  } -> tensor<8x20xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<8x20xf32>) outs(%out : tensor<8x20xf32>) {
  ^bb0(%a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<8x20xf32>
  return %r : tensor<8x20xf32>
}
"""


def test_unschedulable_op_falls_back_alone():
    """A payload the vectorizer rejects (a call): that op keeps its generic, the relu next to it
    is still scheduled, a warning names the skipped op, and the results are right."""
    with pytest.warns(RuntimeWarning, match=r"op\(s\) #0 linalg.generic left unscheduled"):
        used = scheduled_names(CALL_THEN_RELU, "call_relu", strict=False)
    assert used == ["elementwise-20"]
    x, out = rand(8, 20), np.zeros((8, 20), np.float32)
    with pytest.warns(RuntimeWarning):
        Kernel.build(CALL_THEN_RELU, "call_relu", schedule="threads=1")(x, out)
    check(out, np.maximum(2 * x, 0), "call + relu")


def test_unschedulable_kernel_with_a_prepacked_weight_still_builds(monkeypatch):
    """A kernel whose every rule fails keeps naive loops, and its prepacked weight's unpack is
    still lowered (bufferization has no rule for it): the build works, with a warning."""
    from lowering.schedule import driver

    def fail(*args, **kwargs):
        raise ValueError("no rule applies")

    monkeypatch.setattr(driver, "apply_rules", fail)
    m, n, k = 1, 96, 64
    w = rand(n, k, seed=1)
    packed, layout = pack_weight(w, transposed=True, nr=micro_tile(Target("llvm")).nr)
    with ir.Context():
        module = ir.Module.parse(matmul_text(m, n, k, transposed_b=True))
        func_op = module.body.operations[0].operation
        use_prepacked_weight(func_op, 1, layout)
        text = str(module)
        with pytest.warns(RuntimeWarning, match="left unscheduled"):
            assert driver.schedule_function(func_op, ScheduleOptions(threads=1)) == []
        assert "linalg.unpack" not in str(module)
    a, c = rand(m, k), np.zeros((m, n), np.float32)
    with pytest.warns(RuntimeWarning, match="left unscheduled"):
        Kernel.build(text, "mm", schedule="threads=1")(a, packed, c)
    check(c, a @ w.T, f"prepacked {m}x{n}x{k} unscheduled")


PAD = """
func.func private @pad(%x: tensor<8x16xf32>, %out: tensor<8x20xf32>) -> tensor<8x20xf32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%out : tensor<8x20xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %c18 = arith.constant 18 : index
    %lo = arith.cmpi sge, %j, %c2 : index
    %hi = arith.cmpi slt, %j, %c18 : index
    %in = arith.andi %lo, %hi : i1
    %v = scf.if %in -> (f32) {
      %jj = arith.subi %j, %c2 : index
      %x_ij = tensor.extract %x[%i, %jj] : tensor<8x16xf32>
      scf.yield %x_ij : f32
    } else {
      %zero = arith.constant 0.0 : f32
      scf.yield %zero : f32
    }
    linalg.yield %v : f32
  } -> tensor<8x20xf32>
  return %r : tensor<8x20xf32>
}
"""


def test_guarded_pad_becomes_a_copy():
    """TE's pad (bounds test + scf.if + tensor.extract) is raised to fill + a vectorized copy."""
    assert scheduled_names(PAD, "pad") == ["elementwise-16"]
    x, out = rand(8, 16), np.zeros((8, 20), np.float32)
    Kernel.build(PAD, "pad", schedule="threads=1 strict=true")(x, out)
    check(out, np.pad(x, ((0, 0), (2, 2))), "pad")


GATHER = """
func.func private @gather(%x: tensor<{src}xf32>, %out: tensor<8x16xf32>) -> tensor<8x16xf32> attributes {{relax.prim_func}} {{
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}} outs(%out : tensor<8x16xf32>) {{
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
{index}
    %v = tensor.extract %x[{at}] : tensor<{src}xf32>
    %twice = arith.addf %v, %v : f32
    linalg.yield %twice : f32
  }} -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}}
"""

GATHERS = [
    # (source shape, index arithmetic, extract indices, numpy reference of x, route)
    ("16x8", "", "%j, %i", lambda x: x.T, "transpose-8x16"),  # transpose
    (  # reshape [4, 32] -> [8, 16]: flat = i * 16 + j, unflattened with floordiv / remsi
        "4x32",
        "    %f = arith.muli %i, %c16 : index\n    %fj = arith.addi %f, %j : index\n"
        "    %a = arith.floordivsi %fj, %c8 : index\n    %row = arith.floordivsi %a, %c4 : index\n"
        "    %t = arith.muli %i, %c2 : index\n    %u = arith.floordivsi %j, %c16 : index\n"
        "    %col0 = arith.remsi %fj, %c16 : index\n    %half = arith.remsi %i, %c2 : index\n"
        "    %h16 = arith.muli %half, %c16 : index\n    %col = arith.addi %h16, %j : index",
        "%row, %col",
        lambda x: x.reshape(8, 16),
        "elementwise-16",
    ),
    (  # x[(i * j) mod 16, 0]: not affine in the loop indices, left to naive loops
        "16x2",
        "    %p = arith.muli %i, %j : index\n    %m = arith.remsi %p, %c16 : index\n"
        "    %z = arith.subi %i, %i : index",
        "%m, %z",
        lambda x: x[(np.arange(8)[:, None] * np.arange(16)[None, :]) % 16, 0],
        "fallback",
    ),
]


@pytest.mark.parametrize("src,index,at,ref,route", GATHERS)
def test_gathers_become_views(src, index, at, ref, route):
    """TE's gathers (linalg.index arithmetic + tensor.extract) whose address is affine in the
    loop indices read a view of the source instead; the others keep their naive loops."""
    text = GATHER.format(src=src, index=index, at=at)
    assert scheduled_names(text, "gather") == [route]
    x, out = rand(*map(int, src.split("x"))), np.zeros((8, 16), np.float32)
    Kernel.build(text, "gather", schedule="threads=1 strict=true")(x, out)
    check(out, 2 * ref(x), f"gather from {src}")


def test_integer_division_is_not_masked():
    """Masked-off lanes would divide by zero (SIGFPE): only exact-fit vectors, or none."""
    text = """
func.func private @idiv(%a: tensor<4x10xi32>, %b: tensor<4x10xi32>, %out: tensor<4x10xi32>) -> tensor<4x10xi32> attributes {relax.prim_func} {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x10xi32>, tensor<4x10xi32>) outs(%out : tensor<4x10xi32>) {
  ^bb0(%x: i32, %y: i32, %o: i32):
    %q = arith.floordivsi %x, %y : i32
    linalg.yield %q : i32
  } -> tensor<4x10xi32>
  return %r : tensor<4x10xi32>
}
"""
    assert scheduled_names(text, "idiv") == ["elementwise-10"]
    rng = np.random.default_rng(3)
    a, b = (
        rng.integers(-50, 50, (4, 10), dtype=np.int32),
        rng.integers(1, 9, (4, 10), dtype=np.int32),
    )
    out = np.zeros((4, 10), np.int32)
    Kernel.build(text, "idiv", schedule="threads=1 strict=true")(a, b, out)
    assert np.array_equal(out, a // b)


EXP = """
func.func private @ex(%x: tensor<4096xf32>, %out: tensor<4096xf32>) -> tensor<4096xf32> attributes {{relax.prim_func}} {{
  %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      ins(%x : tensor<4096xf32>) outs(%out : tensor<4096xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %e = math.{fn} %a : f32
    linalg.yield %e : f32
  }} -> tensor<4096xf32>
  return %r : tensor<4096xf32>
}}
"""


def test_exp_is_a_vector_polynomial():
    """math.exp becomes FMAs on vectors (no per-lane libm call), within 2.5e-7 relative of
    numpy on normal results; exp(-inf) = 0, exp(inf) = inf, NaN stays NaN; results below the
    normal range are 0 (a subnormal product costs a microcode assist per lane), from the
    smallest x whose exp is normal on."""
    x = np.linspace(-110, 100, 4096).astype(np.float32)
    x[:4] = [-np.inf, np.inf, np.nan, 0.0]
    smallest = np.float32(-126 * np.log(2))  # log(FLT_MIN), rounded to f32 ...
    x[4:8] = [np.nextafter(smallest, np.float32(0)), smallest, -87.0, -90.0]  # ... just below
    out = np.zeros_like(x)
    kern = Kernel.build(EXP.format(fn="exp"), "ex", schedule="threads=1 strict=true")
    kern(x, out)
    assert "expf" not in str(kern.module) and "llvm.intr.exp" not in str(kern.module)
    assert out[0] == 0 and out[1] == np.inf and np.isnan(out[2]) and out[3] == 1
    want = np.exp(x[4:].astype(np.float64))
    normal = (want > np.finfo(np.float32).tiny) & (want < np.finfo(np.float32).max)
    np.testing.assert_allclose(out[4:][normal], want[normal], rtol=2.5e-7)
    assert np.all(out[4:][want < np.finfo(np.float32).tiny] == 0) and out[5] == 0
    assert np.all(out[4:][x[4:] > 88.8] == np.inf)


@pytest.mark.parametrize(
    "shape,axes,route",
    [
        ((1, 3, 10, 12, 16), (2, 3), "reduction-outer-16"),  # spatial mean, channel-blocked
        # NCHW8c: its exact 8-lane rows, not masked 16-lane ones on AVX-512 (whose masked sum
        # kept the accumulator in memory: RegNetY's squeeze-excite pools, 62 -> 5.7 us)
        ((1, 3, 10, 12, 8), (2, 3), "reduction-outer-8"),
        ((5, 6, 7), (1, 2), "reduction-inner-"),  # the merged loop is the contiguous one
        ((6, 7, 5), (0, 1), "reduction-outer-"),
    ],
)
def test_adjacent_reduction_loops_merge(shape, axes, route):
    """Two reduction loops over consecutive axes become one over a collapsed view
    (`normalize.merge_loops`), which the reduction rule vectorizes (two left it to
    scalar loops)."""
    from relaxmlir import te, topi

    x_te = te.placeholder(shape, "float32", name="x")
    y_te = topi.mean(x_te, axis=list(axes), keepdims=True)
    text = str(te.create_prim_func([x_te, y_te]).module)
    text = text.replace("func.func @main", "func.func private @m")
    names = scheduled_names(text, "m")
    assert names[0].startswith(route), names
    x = rand(*shape)
    out = np.zeros([int(d) for d in y_te.shape], np.float32)
    Kernel.build(text, "m", schedule="threads=2 strict=true")(x, out)
    check(out, x.mean(axis=axes, keepdims=True), f"mean over {axes} of {shape}")


@pytest.mark.parametrize("target", [None, AVX2], ids=["host", "avx2"])
@pytest.mark.parametrize("batch,cin,cout,size", [(1, 64, 85, 12), (2, 16, 24, 7)])
def test_nchw_pointwise_conv_is_a_matmul(batch, cin, cout, size, target):
    """An NCHW 1x1 convolution (`conv2d_nchw_1x1.contraction`) has two output-column loops, H
    and W; merged into one (`normalize.merge_loops`) it is the product of the
    [O, C] weight and the [C, H * W] image the matmul rule tiles (85 filters, a detection
    head, ran as scalar loops before). A batch of 2 keeps them apart (loops batch, O, H, W, C):
    on AVX2, where 24 filters are more than one panel, packing B had moved the loops under
    the rows route's tiles and the script failed (`_packs_in_place`)."""
    from relaxmlir import te
    from relaxmlir.relax.op.strategy import conv2d_1x1

    x_te = te.placeholder((batch, cin, size, size), "float32", name="x")
    w_te = te.placeholder((cout, cin, 1, 1), "float32", name="w")
    y_te = conv2d_1x1(x_te, w_te)
    text = str(te.create_prim_func([x_te, w_te, y_te]).module)
    text = text.replace("func.func @main", "func.func private @pw")
    names = scheduled_names(text, "pw")
    assert len(names) == 1 and names[0].startswith("matmul-"), names
    x, w = rand(batch, cin, size, size), rand(cout, cin, 1, 1, seed=1)
    out = np.zeros((batch, cout, size, size), np.float32)
    Kernel.build(text, "pw", schedule="threads=2 strict=true", target=target)(x, w, out)
    check(out, np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0]), f"pointwise conv on {target}")


@pytest.mark.parametrize("stride", [1, 2])
def test_blocked_depthwise_conv_is_tiled(stride):
    """A channel-blocked depthwise convolution takes the conv rule's register tile, a strided
    one once per input phase (4 phase convolutions for a 3x3 / 2 window), never scalar loops."""
    import torch

    from relaxmlir import te
    from relaxmlir.topi.nn.blocked import depthwise_conv2d_nchwc

    x_te = te.placeholder((1, 2, 10, 10, 16), "float32", name="x")
    w_te = te.placeholder((2, 3, 3, 16), "float32", name="w")
    y_te = depthwise_conv2d_nchwc(x_te, w_te, (stride, stride), (1, 1, 1, 1))
    text = str(te.create_prim_func([x_te, w_te, y_te]).module)
    text = text.replace("func.func @main", "func.func private @dw")
    names = scheduled_names(text, "dw")
    assert names[0].startswith("elementwise") and len(names) == 1 + stride**2, names  # the pad
    assert all(n.startswith("conv-") for n in names[1:]), names
    x, w = rand(1, 2, 10, 10, 16), rand(2, 3, 3, 16, seed=1)
    out = np.zeros([int(d) for d in y_te.shape], np.float32)
    Kernel.build(text, "dw", schedule="threads=2 strict=true")(x, w, out)
    nchw = torch.from_numpy(x.transpose(0, 1, 4, 2, 3).reshape(1, 32, 10, 10))
    oihw = torch.from_numpy(w.transpose(0, 3, 1, 2).reshape(32, 1, 3, 3))
    want = torch.nn.functional.conv2d(nchw, oihw, stride=stride, padding=1, groups=32).numpy()
    got = out.transpose(0, 1, 4, 2, 3).reshape(want.shape)
    check(got, want, f"depthwise conv, stride {stride}")


FMA_CHAIN = """
func.func @taps(%a: vector<16xf32>, %b: vector<16xf32>, %c: vector<16xf32>, %d: vector<16xf32>,
                %e: vector<16xf32>, %f: vector<16xf32>) -> vector<16xf32> {
  %0 = arith.mulf %a, %b : vector<16xf32>
  %1 = arith.mulf %c, %d : vector<16xf32>
  %2 = arith.addf %0, %1 : vector<16xf32>
  %3 = arith.mulf %e, %f : vector<16xf32>
  %4 = arith.addf %2, %3 : vector<16xf32>
  return %4 : vector<16xf32>
}
"""


def test_fma_chain_adds_onto_the_previous_fma():
    """A sum of products (a depthwise convolution's taps) becomes a chain of FMAs, each adding
    onto the one before: the addend is read after the previous rewrite erased the add it was
    (reading it before used a freed operation and corrupted the heap)."""
    from lowering.schedule.math_approx import contract_fma

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(FMA_CHAIN)
        assert contract_fma(module.operation) == 2
        assert module.operation.verify()
        ops = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations]
        assert [op.name for op in ops] == ["arith.mulf", "math.fma", "math.fma", "func.return"]
        cd, first, second, ret = ops
        args = module.body.operations[0].regions[0].blocks[0].arguments
        assert list(first.operands) == [args[0], args[1], cd.results[0]]
        assert list(second.operands) == [args[4], args[5], first.results[0]]
        assert ret.operands[0] == second.results[0]


@pytest.mark.parametrize(
    "shape,kernel,stride,route",
    [
        ((2, 3, 8, 12), 2, 2, "reduction-window-6x2"),  # LeNet's pooling: windows tile the image
        ((2, 3, 9, 10), 3, 3, "reduction-window-3x3"),  # 9x10 -> 3x3: the last column unread
        ((2, 3, 9, 9), 3, 2, "fallback"),  # overlapping windows: left to naive loops
    ],
)
def test_max_pool_matches_numpy(shape, kernel, stride, route):
    """TE max pooling: non-overlapping windows become a reduction over a [.., Y, KY, X, KX] view
    (gather.raise_strided_inputs) read a whole window row at a time."""
    from relaxmlir import te, topi

    x_te = te.placeholder(shape, "float32", name="x")
    y_te = topi.nn.pool2d(x_te, (kernel,) * 2, (stride,) * 2, (1, 1), (0, 0, 0, 0), "max")
    text = str(te.create_prim_func([x_te, y_te]).module)
    text = text.replace("func.func @main", "func.func private @pool")
    assert scheduled_names(text, "pool") == [route]
    x = rand(*shape)
    out = np.zeros([int(d) for d in y_te.shape], np.float32)
    Kernel.build(text, "pool", schedule="threads=1 strict=true")(x, out)
    windows = np.lib.stride_tricks.sliding_window_view(x, (kernel, kernel), axis=(2, 3))
    check(out, windows[:, :, ::stride, ::stride].max(axis=(-1, -2)), f"max pool {shape}")


@pytest.mark.parametrize("fn", ["tanh", "erf"])
def test_tanh_erf_are_vector_rationals(fn):
    """math.tanh / math.erf become FMAs and one division on vectors, within 3e-7 of float64."""
    import math

    x = np.linspace(-9, 9, 4096).astype(np.float32)
    x[:3] = [0.0, 1e-5, -3e-4]
    out = np.zeros_like(x)
    kern = Kernel.build(EXP.format(fn=fn), "ex", schedule="threads=1 strict=true")
    kern(x, out)
    assert f"{fn}f" not in str(kern.module) and f"llvm.intr.{fn}" not in str(kern.module)
    want = np.array([getattr(math, fn)(float(v)) for v in x])
    np.testing.assert_allclose(out, want, rtol=0, atol=3e-7)
    assert out[0] == 0 and (fn != "tanh" or out[1] == np.float32(1e-5))


POWF = """
func.func private @pw(%x: tensor<4096xf32>, %out: tensor<4096xf32>) -> tensor<4096xf32> attributes {{relax.prim_func}} {{
  %e = arith.constant {exp} : f32
  %r = linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}}
      ins(%x : tensor<4096xf32>) outs(%out : tensor<4096xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %p = math.powf %a, %e : f32
    linalg.yield %p : f32
  }} -> tensor<4096xf32>
  return %r : tensor<4096xf32>
}}
"""


@pytest.mark.parametrize(
    "exp,libm",
    [(3.0, False), (2.0, False), (-2.0, False), (0.0, False), (13.0, False), (2.5, True)],
)
def test_powf_by_constant_integer_is_multiplies(exp, libm):
    """pow(x, n) for a constant integer n (GPT-2's GELU: pow(x, 3)) becomes vector multiplies,
    not one powf libm call per lane; other exponents keep the libm call. Within 4 ulp of numpy."""
    x = np.linspace(-3, 3, 4096).astype(np.float32)
    x[:3] = [0.0, -0.0, np.nan]
    out = np.zeros_like(x)
    kern = Kernel.build(POWF.format(exp=exp), "pw", schedule="threads=1 strict=true")
    kern(x, out)
    code = str(kern.module)
    assert ("llvm.intr.pow" in code or "powf" in code) == libm
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), exp).astype(np.float32)
    np.testing.assert_allclose(out, want, rtol=5e-7 * max(1.0, abs(exp)), atol=0)


TRANSPOSE = """
func.func private @tr(%x: tensor<{n}x{m}xf32>, %out: tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32> attributes {{relax.prim_func}} {{
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}}
      ins(%x : tensor<{n}x{m}xf32>) outs(%out : tensor<{m}x{n}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }} -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""


@pytest.mark.parametrize(
    "n,m,route",
    [(64, 48, "transpose-16x16"), (40, 24, "transpose-12x10"), (37, 50, "elementwise-37")],
)
def test_transpose_matches_numpy(n, m, route):
    """Transposing copies go by square tiles (rows read, columns written through registers)."""
    text = TRANSPOSE.format(n=n, m=m)
    assert scheduled_names(text, "tr") == [route]
    x, out = rand(n, m), np.zeros((m, n), np.float32)
    Kernel.build(text, "tr", schedule="threads=1 strict=true")(x, out)
    check(out, x.T, f"transpose {n}x{m}")


def test_elementwise_loops_reach_llvm_ir_rolled():
    """The elementwise rule's loops carry llvm.loop.unroll.disable into LLVM IR: each step is a
    whole vector of a memory-bound op, and LLVM's full unrolling of short loops (DenseNet-121's
    concat parts, 2 x 7 x 7 steps each) made 77% of that model's LLVM IR and half its build
    (44 -> 29.5 s), for no speed. The result against numpy."""
    import re

    from mlir.dialects import llvm as llvm_d

    import relaxmlir as rm
    from relaxmlir import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2, 7, 7, 16), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(x))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), "llvm")
    module = ex.code.module
    with module.context:
        text = str(llvm_d.translate_module_to_llvmir(module.operation))
    loops = re.findall(r"br label %\d+, !llvm.loop (![0-9]+)", text)
    assert loops, "no loop latch in the relu kernel"
    assert '!{!"llvm.loop.unroll.disable"}' in text, text
    xs = np.random.default_rng(0).standard_normal((2, 7, 7, 16)).astype("float32")
    got = relax.VirtualMachine(ex, rm.cpu())["main"](xs).numpy()
    np.testing.assert_array_equal(got, np.maximum(xs, 0))


def _relu_into_border(src: tuple[int, ...], pad: list[tuple[int, int]]) -> str:
    """A relu written into the interior of a padded buffer whose border is filled side by side,
    as `pad._border` builds it (a fill of a slice per padded side, inserted back), in text."""
    out = [s + lo + hi for s, (lo, hi) in zip(src, pad)]
    rank = len(src)

    def ty(shape):
        return "tensor<" + "x".join(map(str, shape)) + "xf32>"

    def attrs(values):
        return ", ".join(map(str, values))

    ids = ", ".join(f"d{i}" for i in range(rank))
    ident = f"affine_map<({ids}) -> ({ids})>"
    iters = ", ".join(['"parallel"'] * rank)
    lines = [
        f"func.func @border(%x: {ty(src)}, %o: {ty(out)}) -> {ty(out)} attributes {{relax.prim_func}} {{",
        "  %zero = arith.constant 0.0 : f32",
        f"  %e = tensor.empty() : {ty(src)}",
        f"  %r = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = [{iters}]}}"
        f" ins(%x : {ty(src)}) outs(%e : {ty(src)}) {{",
        "  ^bb0(%in: f32, %init: f32):",
        "    %m = arith.maximumf %in, %zero : f32",
        "    linalg.yield %m : f32",
        f"  }} -> {ty(src)}",
        f"  %b0 = tensor.empty() : {ty(out)}",
    ]
    cur = "%b0"
    for k, (offsets, slab) in enumerate(border_slabs(out, [lo for lo, _ in pad], list(src))):
        box = f"[{attrs(offsets)}] [{attrs(slab)}] [{attrs([1] * rank)}]"
        lines += [
            f"  %s{k} = tensor.extract_slice {cur}{box} : {ty(out)} to {ty(slab)}",
            f"  %f{k} = linalg.fill ins(%zero : f32) outs(%s{k} : {ty(slab)}) -> {ty(slab)}",
            f"  %b{k + 1} = tensor.insert_slice %f{k} into {cur}{box} : {ty(slab)} into {ty(out)}",
        ]
        cur = f"%b{k + 1}"
    box = f"[{attrs([lo for lo, _ in pad])}] [{attrs(src)}] [{attrs([1] * rank)}]"
    lines += [
        f"  %res = tensor.insert_slice %r into {cur}{box} : {ty(src)} into {ty(out)}",
        f"  return %res : {ty(out)}",
        "}",
    ]
    return "\n".join(lines)


@pytest.mark.parametrize(
    "src,pad",
    [
        ((1, 9, 56, 56, 16), [(0, 0), (0, 0), (1, 1), (1, 1), (0, 0)]),  # MobileNetV2's NCHW16c
        ((1, 3, 10, 100), [(0, 0), (0, 0), (1, 2), (3, 1)]),  # rows past 4 vectors: masked
        ((2, 5, 7), [(1, 0), (0, 2), (2, 2)]),
    ],
    ids=["nchw16c", "nchw", "odd"],
)
def test_border_fills_are_vector_loops_kept_rolled(src, pad):
    """The fills of a padded buffer's border (one per side, around an interior that an op of the
    same function writes) become vector stores in loops LLVM may not unroll: as scalar loops they
    were 64-byte memsets, 1044 of them unrolled into one block of a MobileNetV2 kernel, whose
    instruction scheduling took llc 0.58 s. Against numpy's pad, border and interior alike."""
    text = _relu_into_border(src, pad)
    x = rand(*src)
    out = np.full([s + lo + hi for s, (lo, hi) in zip(src, pad)], 7.0, np.float32)
    Kernel.build(text, "border", schedule="threads=1 strict=true")(x, out)
    np.testing.assert_array_equal(out, np.pad(np.maximum(x, 0), pad))
    with ir.Context():
        module = ir.Module.parse(text)
        schedule_function(module.body.operations[0].operation, ScheduleOptions(threads=1, strict=True))
        scheduled = str(module)
    sides = sum((lo > 0) + (hi > 0) for lo, hi in pad)
    assert "linalg.fill" not in scheduled, scheduled
    assert scheduled.count("vector.transfer_write %cst") >= sides, scheduled
    assert scheduled.count("unroll = #loop_unroll") + scheduled.count("{loop_annotation = #loop") >= sides


ROW_CHAIN = {
    # softmax as LegalizeOps writes it: max, exp(x - max), sum, exp * (1 / sum)
    "softmax": """
func.func private @chain(%x: tensor<{r}x{c}xf32>, %g: tensor<{c}xf32>, %o: tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32> attributes {{relax.prim_func}} {{
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e0 = tensor.empty() : tensor<{r}xf32>
  %f0 = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<{r}xf32>) -> tensor<{r}xf32>
  %max = linalg.generic {{indexing_maps = [#full, #row], iterator_types = ["parallel", "reduction"]}} ins(%x : tensor<{r}x{c}xf32>) outs(%f0 : tensor<{r}xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %acc, %a : f32
    linalg.yield %m : f32
  }} -> tensor<{r}xf32>
  %e1 = tensor.empty() : tensor<{r}x{c}xf32>
  %exp = linalg.generic {{indexing_maps = [#full, #row, #full], iterator_types = ["parallel", "parallel"]}} ins(%x, %max : tensor<{r}x{c}xf32>, tensor<{r}xf32>) outs(%e1 : tensor<{r}x{c}xf32>) {{
  ^bb0(%a: f32, %m: f32, %out: f32):
    %d = arith.subf %a, %m : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  }} -> tensor<{r}x{c}xf32>
  %e2 = tensor.empty() : tensor<{r}xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<{r}xf32>) -> tensor<{r}xf32>
  %sum = linalg.generic {{indexing_maps = [#full, #row], iterator_types = ["parallel", "reduction"]}} ins(%exp : tensor<{r}x{c}xf32>) outs(%f2 : tensor<{r}xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }} -> tensor<{r}xf32>
  %y = linalg.generic {{indexing_maps = [#full, #row, #full], iterator_types = ["parallel", "parallel"]}} ins(%exp, %sum : tensor<{r}x{c}xf32>, tensor<{r}xf32>) outs(%o : tensor<{r}x{c}xf32>) {{
  ^bb0(%a: f32, %s: f32, %out: f32):
    %inv = arith.divf %one, %s : f32
    %p = arith.mulf %a, %inv : f32
    linalg.yield %p : f32
  }} -> tensor<{r}x{c}xf32>
  return %y : tensor<{r}x{c}xf32>
}}""",
    # layer norm: mean (a sum, then a value per row), the centred squares' mean, the output
    # scaled by a per-column weight (`%g`)
    "layer_norm": """
func.func private @chain(%x: tensor<{r}x{c}xf32>, %g: tensor<{c}xf32>, %o: tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32> attributes {{relax.prim_func}} {{
  %zero = arith.constant 0.0 : f32
  %n = arith.constant {c}.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e0 = tensor.empty() : tensor<{r}xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<{r}xf32>) -> tensor<{r}xf32>
  %sum = linalg.generic {{indexing_maps = [#full, #row], iterator_types = ["parallel", "reduction"]}} ins(%x : tensor<{r}x{c}xf32>) outs(%f0 : tensor<{r}xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }} -> tensor<{r}xf32>
  %e1 = tensor.empty() : tensor<{r}xf32>
  %mean = linalg.generic {{indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}} ins(%sum : tensor<{r}xf32>) outs(%e1 : tensor<{r}xf32>) {{
  ^bb0(%s: f32, %out: f32):
    %m = arith.divf %s, %n : f32
    linalg.yield %m : f32
  }} -> tensor<{r}xf32>
  %e2 = tensor.empty() : tensor<{r}x{c}xf32>
  %sq = linalg.generic {{indexing_maps = [#full, #row, #full], iterator_types = ["parallel", "parallel"]}} ins(%x, %mean : tensor<{r}x{c}xf32>, tensor<{r}xf32>) outs(%e2 : tensor<{r}x{c}xf32>) {{
  ^bb0(%a: f32, %m: f32, %out: f32):
    %d = arith.subf %a, %m : f32
    %q = arith.mulf %d, %d : f32
    linalg.yield %q : f32
  }} -> tensor<{r}x{c}xf32>
  %e3 = tensor.empty() : tensor<{r}xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<{r}xf32>) -> tensor<{r}xf32>
  %var = linalg.generic {{indexing_maps = [#full, #row], iterator_types = ["parallel", "reduction"]}} ins(%sq : tensor<{r}x{c}xf32>) outs(%f3 : tensor<{r}xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }} -> tensor<{r}xf32>
  %y = linalg.generic {{indexing_maps = [#full, #row, #row, #col, #full], iterator_types = ["parallel", "parallel"]}} ins(%x, %mean, %var, %g : tensor<{r}x{c}xf32>, tensor<{r}xf32>, tensor<{r}xf32>, tensor<{c}xf32>) outs(%o : tensor<{r}x{c}xf32>) {{
  ^bb0(%a: f32, %m: f32, %v: f32, %w: f32, %out: f32):
    %vn = arith.divf %v, %n : f32
    %ve = arith.addf %vn, %eps : f32
    %r = math.rsqrt %ve : f32
    %d = arith.subf %a, %m : f32
    %s = arith.mulf %d, %r : f32
    %p = arith.mulf %s, %w : f32
    linalg.yield %p : f32
  }} -> tensor<{r}x{c}xf32>
  return %y : tensor<{r}x{c}xf32>
}}""",
}
ROW_CHAIN_MAPS = """#full = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#id1 = affine_map<(d0) -> (d0)>
"""


def _row_chain_reference(kind: str, x: np.ndarray, g: np.ndarray) -> np.ndarray:
    if kind == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * g


@pytest.mark.parametrize("target", ["", AVX2], ids=["native", "avx2"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", list(ROW_CHAIN))
def test_row_chain_over_memory_sized_rows(kind, threads, target):
    """A softmax or layer norm whose input is beyond the caches (2200 x 1000, 8.8 MB) runs as
    one loop over blocks of rows with every op fused in it (`reduction.row_chain`): 8 rows per
    block on one thread, 5 of each thread's 1100 on two; a smaller one keeps a loop nest per
    op."""
    r, c = 2200, 1000
    text = ROW_CHAIN_MAPS + ROW_CHAIN[kind].format(r=r, c=c)
    opts = f"threads={threads} strict=true" + (f' target="{target}"' if target else "")
    ops, block = {"softmax": 4, "layer_norm": 5}[kind], 8 if threads == 1 else 5
    assert scheduled_names(text, "chain", threads=threads)[0] == f"row-chain-{ops}x{block}"
    kernel = Kernel.build(text, "chain", schedule=opts, target=Target(target or "llvm"))
    x, g = rand(r, c) * 3, rand(c, seed=1)
    out = np.full((r, c), 7.0, np.float32)
    kernel(x, g, out)
    check(out, _row_chain_reference(kind, x, g), f"{kind} {r}x{c} threads={threads} {target}")
    small = ROW_CHAIN_MAPS + ROW_CHAIN[kind].format(r=64, c=c)
    assert not any(n.startswith("row-chain") for n in scheduled_names(small, "chain"))
