"""Plain, obviously-correct NumPy/Python references for every kernel. Tests check kernel == reference.

Slow by design: per-row Python is fine here and nowhere else.
"""
from __future__ import annotations

# ==== hashing references (kernels/hashing.py) ====


# ==== merge / key-order / lookup references (kernels/keys.py, kernels/merge.py, kernels/lookup.py) ====
