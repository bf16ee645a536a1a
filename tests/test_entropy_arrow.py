"""sim.entropy on Arrow inputs: zero-copy views, slices, nulls, chunked data, IPC files."""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from entropy_reference import sk_entropy_grouped, sk_entropy_rows
from sim import entropy as E
from sim.errors import TraceError
from test_entropy import assert_matches

KERNELS = ("c", "numba", "reference")


def fsl(x: np.ndarray) -> pa.FixedSizeListArray:
    n, c = x.shape
    return pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), c)


def rows_of(x):
    return x.astype(np.float64).tolist()


@pytest.fixture
def x32():
    return (np.random.default_rng(0).standard_normal((37, 12)) * 3).astype(np.float32)


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_fixed_size_list_each_float_type(impl, dtype, x32):
    x = x32.astype(dtype)
    assert_matches(E.normalized_entropy(fsl(x), impl=impl), sk_entropy_rows(rows_of(x)))


@pytest.mark.parametrize("impl", KERNELS)
def test_sliced_array_with_offset(impl, x32):
    arr = fsl(x32).slice(5, 20)
    assert arr.offset == 5
    assert_matches(E.normalized_entropy(arr, impl=impl), sk_entropy_rows(rows_of(x32[5:25])))
    # a slice of a child that is itself sliced
    child = pa.array(np.concatenate([np.zeros(7, np.float32), x32.reshape(-1)])).slice(7)
    arr2 = pa.FixedSizeListArray.from_arrays(child, 12).slice(3, 4)
    assert_matches(E.normalized_entropy(arr2, impl=impl), sk_entropy_rows(rows_of(x32[3:7])))


@pytest.mark.parametrize("impl", KERNELS)
def test_null_rows_give_nan(impl, x32):
    mask = np.zeros(len(x32), bool)
    mask[[0, 9, 10, 36]] = True
    arr = pa.FixedSizeListArray.from_arrays(pa.array(x32.reshape(-1)), 12,
                                            mask=pa.array(mask))
    want = np.array(sk_entropy_rows(rows_of(x32)))
    want[mask] = np.nan
    assert_matches(E.normalized_entropy(arr, impl=impl), want)
    # sliced: the validity bitmap offset follows the slice
    assert_matches(E.normalized_entropy(arr.slice(9, 5), impl=impl), want[9:14])
    # null rows are skipped in group means
    g = np.arange(len(x32)) % 3
    keep = [None if m else r for r, m in zip(rows_of(x32), mask)]
    assert_matches(E.grouped_mean_entropy(arr, g, impl=impl), sk_entropy_grouped(keep, g, 3))


@pytest.mark.parametrize("impl", KERNELS)
def test_null_value_inside_a_row_gives_nan(impl):
    child = pa.array([1.0, 2.0, None, 0.5, 0.5, 0.5], type=pa.float32())
    arr = pa.FixedSizeListArray.from_arrays(child, 3)
    got = E.normalized_entropy(arr, impl=impl)
    assert math.isnan(got[0]) and abs(got[1] - 1.0) < 1e-6


@pytest.mark.parametrize("impl", KERNELS)
def test_fixed_shape_tensor(impl, x32):
    ttype = pa.fixed_shape_tensor(pa.float32(), (12,))
    arr = pa.ExtensionArray.from_storage(ttype, fsl(x32))
    assert_matches(E.normalized_entropy(arr, impl=impl), sk_entropy_rows(rows_of(x32)))
    # a (T, C) tensor per row gives T rows each
    ttype2 = pa.fixed_shape_tensor(pa.float32(), (3, 4))
    arr2 = pa.ExtensionArray.from_storage(ttype2, fsl(x32))
    want = sk_entropy_rows(x32.reshape(-1, 4).astype(np.float64).tolist())
    assert_matches(E.normalized_entropy(arr2, impl=impl), want)


@pytest.mark.parametrize("impl", KERNELS)
def test_chunked_array_table_and_record_batch(impl, x32):
    chunked = pa.chunked_array([fsl(x32[:10]), fsl(x32[10:])])
    want = sk_entropy_rows(rows_of(x32))
    assert_matches(E.normalized_entropy(chunked, impl=impl), want)
    table = pa.table({"logits": chunked, "worker": pa.array(np.arange(37) % 4)})
    assert_matches(E.normalized_entropy(table, impl=impl, column="logits"), want)
    batch = table.to_batches()[0]
    assert_matches(E.normalized_entropy(batch, impl=impl, column="logits"), want[:10])
    assert_matches(E.grouped_mean_entropy(table, "worker", impl=impl, column="logits"),
                   sk_entropy_grouped(rows_of(x32), (np.arange(37) % 4).tolist(), 4))


def test_equal_length_lists_accepted_ragged_rejected(x32):
    offsets = pa.array(np.arange(0, 37 * 12 + 1, 12, dtype=np.int32))
    lists = pa.ListArray.from_arrays(offsets, pa.array(x32.reshape(-1)))
    assert_matches(E.normalized_entropy(lists), sk_entropy_rows(rows_of(x32)))
    ragged = pa.array([[1.0, 2.0], [1.0, 2.0, 3.0]], type=pa.list_(pa.float32()))
    with pytest.raises(TraceError, match="ragged"):
        E.normalized_entropy(ragged)


def test_non_float_lists_rejected():
    ints = pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.int32()), 2)
    with pytest.raises(TraceError, match="float16, float32 or float64"):
        E.normalized_entropy(ints)
    with pytest.raises(TraceError, match="fixed_size_list"):
        E.normalized_entropy(pa.array([1.0, 2.0]))
    with pytest.raises(TraceError, match="C = 0"):
        E.normalized_entropy(pa.array([[], []], type=pa.list_(pa.float32())))


def test_zero_copy_views_share_arrow_memory(x32):
    arr = fsl(x32).slice(2, 30)
    (block,) = list(E.iter_logit_blocks(arr))
    data = arr.values.buffers()[1]
    assert block.flat.ctypes.data == data.address + 2 * 12 * 4
    assert np.shares_memory(block.flat, np.frombuffer(data, dtype=np.float32))
    # float16 is read through a uint16 view of the same bytes
    h = fsl(x32.astype(np.float16))
    (bh,) = list(E.iter_logit_blocks(h))
    assert bh.flat.dtype == np.float16
    assert bh.flat.ctypes.data == h.values.buffers()[1].address


def test_no_arrow_pool_growth_proportional_to_input():
    x = np.random.default_rng(5).standard_normal((20000, 50)).astype(np.float32)
    arr = fsl(x)
    ttype = pa.fixed_shape_tensor(pa.float16(), (50,))
    tens = pa.ExtensionArray.from_storage(ttype, fsl(x.astype(np.float16)))
    for impl in ("c", "numba"):
        for a in (arr, arr.slice(100), pa.chunked_array([arr, arr]), tens):
            E.normalized_entropy(a, impl=impl)  # warm up
            before = pa.total_allocated_bytes()
            E.normalized_entropy(a, impl=impl)
            E.grouped_mean_entropy(a, np.zeros(len(a), np.int64), impl=impl)
            assert pa.total_allocated_bytes() - before < 4096


def write_ipc(path, x, batch_rows=7, groups=None, stream=False):
    cols = {"logits": fsl(x)}
    if groups is not None:
        cols["worker"] = pa.array(groups)
    table = pa.table(cols)
    with pa.OSFile(str(path), "wb") as sink:
        writer = (pa.ipc.new_stream if stream else pa.ipc.new_file)(sink, table.schema)
        for b in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(b)
        writer.close()


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("stream", [False, True])
def test_ipc_file_memory_mapped_batch_by_batch(tmp_path, impl, stream, x32):
    g = (np.arange(37) * 7) % 5
    path = tmp_path / "logits.arrow"
    write_ipc(path, x32, groups=g, stream=stream)
    want = sk_entropy_rows(rows_of(x32))
    assert_matches(E.normalized_entropy_ipc(path, column="logits", impl=impl), want)
    assert_matches(E.grouped_mean_entropy_ipc(path, column="logits", group_column="worker",
                                              impl=impl),
                   sk_entropy_grouped(rows_of(x32), g.tolist(), 5))
    if not stream:
        before = pa.total_allocated_bytes()
        E.normalized_entropy(str(path), column="logits", impl=impl)
        assert pa.total_allocated_bytes() - before < 4096


def test_ipc_errors(tmp_path, x32):
    bad = tmp_path / "not_arrow.arrow"
    bad.write_bytes(b"this is not an arrow file at all" * 10)
    with pytest.raises(TraceError, match="not an Arrow IPC file") as info:
        E.normalized_entropy_ipc(bad, column="logits")
    assert str(bad) in str(info.value)
    with pytest.raises(TraceError, match="cannot open"):
        E.normalized_entropy_ipc(tmp_path / "missing.arrow", column="logits")
    path = tmp_path / "ok.arrow"
    write_ipc(path, x32, groups=np.arange(37) - 3)
    with pytest.raises(TraceError, match="no column 'nope'"):
        E.normalized_entropy_ipc(path, column="nope")
    with pytest.raises(TraceError, match="negative") as info:
        E.grouped_mean_entropy_ipc(path, column="logits", group_column="worker")
    assert "row 0" in str(info.value)
