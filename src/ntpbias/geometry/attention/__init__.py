"""Paper B's objects: one-layer attention with trained embeddings, stage 1 and token selection."""
