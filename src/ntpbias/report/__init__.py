"""Figures (matplotlib, PNG + SVG) and the self-contained HTML report, built from saved results only."""
