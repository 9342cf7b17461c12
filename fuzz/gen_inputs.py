#!/usr/bin/env python3
"""Writes the structured targets' seeds and hand-made reproducers.

`bank_ops` and `c_abi` decode their input with `arbitrary` 1.5, so a seed is
the byte string that decodes to a chosen list of operations:

- an enum variant is a little-endian u32 `x` with `(x * variants) >> 32`
  equal to the variant's index (declaration order);
- integers are little-endian, a bool is a byte whose low bit is set;
- a `Vec` is a byte with the low bit set before each element and one
  without after the last; the top-level `Vec<Op>` ends with the input.

The encoders below follow the declaration order of the targets' enums:
change them together. Run from `fuzz/`:  python3 gen_inputs.py
"""
import os
import struct


def var(i, n):
    x = -(-(i << 32) // n)
    assert (x * n) >> 32 == i
    return struct.pack('<I', x)


def u8(v):
    return struct.pack('<B', v)


def u16(v):
    return struct.pack('<H', v)


def u32(v):
    return struct.pack('<I', v)


def u64(v):
    return struct.pack('<Q', v)


def vec(items):
    return b''.join(b'\x01' + i for i in items) + b'\x00'


def ops(items):
    return b''.join(b'\x01' + i for i in items)


# ---- c_abi: Op has 12 variants, BankSel 3, DepSel 2, StrArg 7,
# DeadlineSel 5, OutPtr 3, OutcomeSel 4, PermitSel 4, Change 11, BufSel 4.
MAIN, OTHER = var(0, 3), var(1, 3)
VALID = var(0, 3)
NO_TENANT = var(5, 7)
NO_DEADLINE = var(0, 5)
SUCCESS, FAILURE, CANCELLED = var(0, 4), var(1, 4), var(2, 4)


def c_dep(i):
    return var(0, 2) + u8(i)


def c_tenant(i):
    return var(0, 7) + u8(i)


def c_admit(dep, tenant=NO_TENANT, bank=MAIN):
    return var(2, 12) + bank + c_dep(dep) + tenant + NO_DEADLINE + VALID


def c_record(permit, outcome, bank=MAIN):
    return var(3, 12) + bank + permit + outcome


def c_advance(ns):
    return var(8, 12) + MAIN + u64(ns)


def c_prometheus(buf):
    return var(9, 12) + MAIN + buf + VALID


def genuine(i):
    return var(0, 4) + u8(i)


def again(i):
    return var(1, 4) + u8(i)


def altered(i, changes):
    return var(2, 4) + u8(i) + vec(changes)


def started_ns(v):
    return var(2, 11) + u64(v)


FLIP_PROBE = var(10, 11)
LEDGER = 3  # ledger_client: global, trips on one failure, probe budget 2

def c_str(kind, arg=b''):
    """StrArg: 0 Known(u8), 2 Zeros(u16), 3 ZerosHuge, 4 NullLen(u32), 5 Null, 6 Empty."""
    return var(kind, 7) + arg


MISALIGNED, NULL_PTR = var(2, 3), var(1, 3)

C_SEEDS = {
    'strings_and_pointers': ops([
        var(1, 12) + MAIN + c_str(2, u16(300)) + VALID,
        var(1, 12) + MAIN + c_str(4, u32(5)) + VALID,
        var(1, 12) + var(2, 3) + c_str(0, u8(1)) + VALID,
        c_admit(0, c_str(3)),
        c_admit(0, c_str(6)),
        var(4, 12) + MAIN + var(1, 2) + u32(99) + c_str(6) + MISALIGNED,
        var(5, 12) + MAIN + c_dep(0) + c_str(6),
        var(6, 12) + MAIN + c_dep(2) + c_str(0, u8(1)),
        var(7, 12) + MAIN + NULL_PTR,
        var(11, 12) + var(2, 4) + u16(3) + VALID,
        var(10, 12) + MAIN + c_dep(0) + var(0, 4) + VALID,
        var(0, 12) + c_str(0, u8(0)) + u8(1) + VALID,
        var(0, 12) + c_str(2, u16(10)) + u8(0) + VALID]),
    'tenant_cycle': ops([
        c_admit(0, c_tenant(0)), c_record(genuine(0), FAILURE),
        c_admit(0, c_tenant(0)), c_record(genuine(0), FAILURE), c_advance(10**10),
        c_admit(0, c_tenant(0)), c_record(genuine(0), SUCCESS), c_record(again(0), SUCCESS),
        c_prometheus(var(0, 4)), c_prometheus(var(2, 4) + u16(7)), c_prometheus(var(3, 4))]),
    'other_bank': ops([
        c_admit(1, bank=OTHER), c_record(genuine(0), SUCCESS, bank=MAIN),
        c_record(genuine(0), SUCCESS, bank=OTHER)]),
}
C_REPRODUCERS = {
    'c7_altered_copy_frees_probe_slot': ops([
        c_admit(LEDGER), c_record(genuine(0), FAILURE), c_advance(10**9),
        c_admit(LEDGER), c_admit(LEDGER), c_record(altered(0, [started_ns(5)]), CANCELLED),
        c_admit(LEDGER)]),
    'c13_altered_permit_accepted': ops([
        c_admit(LEDGER), c_record(altered(0, [FLIP_PROBE]), SUCCESS)]),
}

# ---- bank_ops: Op has 10 variants, TenantSel 3, DeadlineSel 4,
# OutcomeSel 3, AdvanceSel 2.
B_METRICS, B_PROMETHEUS, B_STUCK = var(7, 10), var(8, 10), var(9, 10)
B_NO_DEADLINE, B_NOW = var(0, 4), var(2, 4)


def b_pool(t):
    return var(2, 3) + u8(t)


def b_admit(dep, t=0, deadline=B_NO_DEADLINE):
    return var(0, 10) + u8(dep) + b_pool(t) + deadline


def b_record(i, outcome):
    return var(1, 10) + u8(i) + var(outcome, 3)


def b_step(i):
    return var(3, 10) + var(0, 2) + u8(i)


def b_reset(dep, t):
    return var(4, 10) + u8(dep) + b_pool(t)


def b_force_open(dep, t):
    return var(5, 10) + u8(dep) + b_pool(t)


def b_force_open_all(dep):
    return var(5, 10) + u8(dep) + var(0, 3)


def b_trip_payments(t):
    return [b_admit(0, t), b_record(0, 1), b_admit(0, t), b_record(0, 1)]


S, F = 0, 1
B_SEEDS = {
    'payments_cycle': ops([
        b_admit(0), b_record(0, F), b_admit(0), b_record(0, F), b_step(8),
        b_admit(0), b_admit(0), b_record(0, S), b_record(0, S),
        b_admit(0), b_record(0, F), b_admit(0), b_record(0, F), b_step(8),
        b_admit(0), b_record(0, F), b_step(8), b_admit(0), B_PROMETHEUS, B_STUCK]),
    'ledger_threshold': ops([
        b_admit(3), b_record(0, F), b_step(3), b_admit(3), b_admit(3), b_admit(3),
        b_record(0, S), b_admit(3), b_record(1, S), b_record(0, S), B_METRICS]),
    'catalog_overflow': ops([
        b_admit(2, 0), b_admit(2, 1), b_record(0, F), b_record(0, F), b_record(0, F),
        b_record(0, F), b_admit(2, 2), b_admit(2, 3), b_force_open(2, 3), b_reset(2, 3),
        b_force_open(4, 0), B_METRICS]),
    'deadline_known_tenant': ops([
        b_admit(4, 1), b_record(0, S), b_admit(4, 1, B_NOW),
        b_admit(1, 0, var(1, 4) + u16(5))]),
}
# (regressions/bank_ops/c10_expired_deadline_inserts_partition is the
# target's own crash input, not made here.)
B_REPRODUCERS = {
    'c11_force_open_of_overflow_tenant_reads_closed': ops(
        b_trip_payments(0) + b_trip_payments(1) + b_trip_payments(2) + [b_force_open(0, 3)]),
    'c11_reset_after_force_all_reads_forced': ops([b_force_open_all(0), b_reset(0, 4)]),
}


def write(folder, files):
    os.makedirs(folder, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(folder, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    write('seeds/c_abi', C_SEEDS)
    write('regressions/c_abi', C_REPRODUCERS)
    write('seeds/bank_ops', B_SEEDS)
    write('regressions/bank_ops', B_REPRODUCERS)
