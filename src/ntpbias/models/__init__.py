"""Torch modules: linear decoder, one- and two-layer cls attention, one-layer transformer."""
