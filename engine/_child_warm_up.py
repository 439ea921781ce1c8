"""Imported once by the crash runner's forkserver: loads the Numba kernels (from the on-disk cache) so that every
child forked from it starts with them ready instead of loading them again."""
from kernels import hashing, keys, merge

for _module in (hashing, keys, merge):
    _module.warm_up()
