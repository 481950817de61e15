"""Find_Tools' embeddings (`gateway.skills.semantic`), kept across restarts and shared by replicas.

One table behind the store seam (`gateway.stores`): `vectors.db` under the data directory, or the
PostgreSQL database replicas share. A vector is stored under its model and the fingerprint of the
text it embeds, so a changed tool gets a new row and an unchanged one is never embedded again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway.stores import MigratedStore

STORE = "vectors"
"""The vectors' store in the seam (their SQLite file is `vectors.db`)."""
# Fingerprints asked for in one statement: SQLite allows 32,766 parameters, PostgreSQL 65,535.
_BATCH = 500


class VectorStore(MigratedStore):
    """Vectors in `db` by model and fingerprint. Every method may raise `DatabaseError`."""

    STORE = STORE

    def get(self, model: str, fingerprints: Sequence[str]) -> dict[str, bytes]:
        """The stored vectors of `model` among `fingerprints`, by fingerprint."""
        found: dict[str, bytes] = {}
        wanted = list(dict.fromkeys(fingerprints))
        for start in range(0, len(wanted), _BATCH):
            batch = wanted[start : start + _BATCH]
            marks = ", ".join("?" * len(batch))
            rows = self._db.fetch_all(
                f"SELECT fingerprint, vector FROM tool_vectors WHERE model = ? AND fingerprint IN ({marks})",
                [model, *batch],
            )
            found.update((fingerprint, bytes(vector)) for fingerprint, vector in rows)
        return found

    def put(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Store `vectors` of `model` by fingerprint; one already stored stays as it is."""
        if vectors:
            self._db.execute_many(
                "INSERT INTO tool_vectors (model, fingerprint, vector) VALUES (?, ?, ?)"
                " ON CONFLICT (model, fingerprint) DO NOTHING",
                [(model, fingerprint, vector) for fingerprint, vector in vectors.items()],
            )
