"""Optimizers, the training loop (batched seeds, log-spaced metrics, checkpoints), and each paper's training problem."""
