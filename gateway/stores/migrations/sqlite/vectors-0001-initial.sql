-- Find_Tools' embeddings: each tool text's vector (float32, little-endian) under the model that made
-- it and the SHA-256 of the text, so that a restart or another replica embeds only what changed.
CREATE TABLE IF NOT EXISTS tool_vectors (
    model TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, fingerprint)
);
