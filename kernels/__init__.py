"""Numba kernels over Arrow buffers (hashing, merge, lookup) and their plain references.

Nothing here imports pyspark or knows about tables: inputs are Arrow arrays / NumPy views, outputs NumPy arrays.
"""
