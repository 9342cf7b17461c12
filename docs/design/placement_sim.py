#!/usr/bin/env python3
"""How many tenants a hash-placed arena keeps at home (docs/design/tenant-table.md).

Tenants are inserted one by one into a table of `max_tenants`; each has
`homes` lines chosen by its hash, a line holds `per_line` slots, and the
arena has `slots_per_tenant` slots per tenant. Partitions never move
(permits name them), so a tenant whose homes are full takes any free
slot, which is some later tenant's home. `first_fit`: the first home if
it has room, else the second; otherwise the emptier of the homes.

    python3 docs/design/placement_sim.py
"""

import random


def place(per_line, slots_per_tenant, homes, first_fit, tenants=200_000, seed=7):
    rng = random.Random(seed)
    lines = int(tenants * slots_per_tenant) // per_line
    used = [0] * lines
    spare = list(range(lines))
    rng.shuffle(spare)
    at = [0] * homes
    elsewhere = 0
    for _ in range(tenants):
        choice = [rng.randrange(lines) for _ in range(homes)]
        if not first_fit:
            choice.sort(key=lambda line: used[line])
        for k, line in enumerate(choice):
            if used[line] < per_line:
                used[line] += 1
                at[k] += 1
                break
        else:
            while used[spare[-1]] >= per_line:
                spare.pop()
            used[spare[-1]] += 1
            elsewhere += 1
    return [a / tenants for a in at], elsewhere / tenants


ROWS = [
    # slots a line, slots a tenant, homes, first fit
    (1, 1.0, 1, True),
    (1, 1.0, 2, False),
    (2, 1.0, 2, False),
    (2, 1.5, 2, True),
    (2, 2.0, 1, True),
    (2, 2.0, 2, True),
]

if __name__ == "__main__":
    print("slots/line  slots/tenant  homes  policy      at home (by home)      elsewhere")
    for per_line, spt, homes, ff in ROWS:
        at, out = place(per_line, spt, homes, ff)
        # The emptier-home policy has no first or second home: one share.
        policy, shares = (
            ("first fit", " + ".join(f"{a:.1%}" for a in at)) if ff else ("emptier", f"{sum(at):.1%}")
        )
        print(f"{per_line:10}  {spt:12}  {homes:5}  {policy:10}  {shares:21}  {out:.1%}")
