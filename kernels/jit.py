"""The one place where kernel compilation flags are defined."""
import numba

# cache=True: compiled code is kept in __pycache__ so later processes (and Spark workers) load it instead of
# compiling. nogil=True: kernels release the GIL so callers may run buckets on threads.
njit = numba.njit(cache=True, nogil=True)
