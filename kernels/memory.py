"""Raw loads and stores at integer byte addresses, for kernels that read Arrow buffers of several arrays at once
(an address table instead of one NumPy view per array) or read unaligned words.

Contract: the caller guarantees that every address it passes lies inside a live buffer it holds a reference to;
no alignment is assumed. These are Numba intrinsics: usable only inside ``@njit`` code.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["load8", "load16", "load32", "load64", "store64"]


def _make_load(bits: int):
    nb_type = {8: types.uint8, 16: types.uint16, 32: types.uint32, 64: types.uint64}[bits]

    @intrinsic
    def load(typingctx, addr):
        """The unsigned integer of ``bits`` bits at byte address ``addr``."""
        if not isinstance(addr, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ptr = builder.inttoptr(args[0], ir.IntType(bits).as_pointer())
            return builder.load(ptr, align=1)
        return nb_type(addr), codegen
    return load


load8, load16, load32, load64 = (_make_load(b) for b in (8, 16, 32, 64))


@intrinsic
def store64(typingctx, addr, value):
    """Store ``value`` as a uint64 at byte address ``addr``."""
    if not isinstance(addr, types.Integer) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        val = context.cast(builder, args[1], sig.args[1], types.uint64)
        builder.store(val, ptr, align=1)
        return context.get_dummy_value()
    return types.void(addr, value), codegen
