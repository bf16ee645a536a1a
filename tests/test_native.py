"""The one error convention of the C kernels (sim._native.check) and policy discovery."""
from __future__ import annotations

import pytest

from sim._native import check, lib
from sim.errors import KernelError, SimError


def test_check_passes_codes_that_are_not_errors_and_reads_no_message():
    def never():
        raise AssertionError("message read for a success code")

    assert check(0, "f", never) == 0 and check(lib.SK_DECISION, "f", never) == lib.SK_DECISION


def test_check_raises_kernel_error_with_code_and_lazy_message():
    with pytest.raises(KernelError, match=r"sk_x failed \(code -1\): bad size") as info:
        check(lib.SK_EINVAL, "sk_x", lambda: "bad size")
    assert info.value.code == lib.SK_EINVAL
    with pytest.raises(KernelError, match=r"sk_entropy_rows failed \(code -2\)$"):
        check(lib.SK_ENTROPY_EDTYPE, "sk_entropy_rows")


def test_a_stall_is_the_simulated_systems_fault_not_the_kernels():
    with pytest.raises(SimError, match="nothing can happen") as info:
        check(lib.SK_ESTALL, "sk_engine_step", "nothing can happen")
    assert not isinstance(info.value, KernelError)


def test_a_real_entropy_kernel_code_raises_through_check():
    import numpy as np

    from sim._native import ffi

    x, out = np.ones((1, 2)), np.zeros(1)
    rc = lib.sk_entropy_rows(ffi.from_buffer(x), 99, 1, 2, 2, ffi.NULL, 0, 1,
                             ffi.cast("double *", ffi.from_buffer(out, require_writable=True)))
    assert rc == lib.SK_ENTROPY_EDTYPE
    with pytest.raises(KernelError, match=r"sk_entropy_rows failed \(code -2\)"):
        check(rc, "sk_entropy_rows")


def test_registry_discovers_every_policy_module():
    from sim.policies import list_policies
    from sim.policies.registry import builtin_modules

    mods = builtin_modules()
    assert mods == sorted(mods)
    assert {"sim.policies.queue", "sim.policies.tiresias", "sim.policies.eghs"} <= set(mods)
    assert {"fifo", "sjf", "srtf", "las", "tiresias", "eghs"} <= set(list_policies())
