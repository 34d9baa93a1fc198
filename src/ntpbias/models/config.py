"""The names the models accept, for the configs that choose among them (importing no torch)."""

#: Paper B's models: one-layer attention, eq. (1), and the two-layer model, eq. (17) (:mod:`.attention`).
ATTENTION_MODELS = ("one_layer", "two_layer")
#: Paper C's token embeddings (:func:`ntpbias.models.transformer.token_embeddings`): one-hot, a random orthonormal
#: basis, random unit-norm columns.
EMBEDDINGS = ("onehot", "orthonormal", "unit")
