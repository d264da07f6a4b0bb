"""Sample the mutants that put ``is``/``is not`` where ``==``/``!=`` stood (cosmic-ray's
ReplaceComparisonOperator_Eq_Is, NotEq_Is, NotEq_IsNot) over the given modules, and write them as a file that
``kvexact bench mutation --rejudge FILE`` judges (every entry marked unkilled, so all are run).

Usage: python scripts/mutation_identity_sample.py SEED COUNT OUT.json reference.prefix reference.radix ...
"""

from __future__ import annotations

import json
import random
import sys

from kvexact.gate import mutation as mu

FAMILY = ("_Eq_Is", "_NotEq_Is", "_NotEq_IsNot")


def main(argv: list[str]) -> int:
    seed, count, out, modules = int(argv[0]), int(argv[1]), argv[2], argv[3:]
    every = mu.enumerate_mutants(mu.select_modules(modules))
    family = [m for m in every if m.operator.endswith(FAMILY)]
    picked = [family[i] for i in random.Random(seed).sample(range(len(family)), min(count, len(family)))]
    rows = [mu.MutantResult(full, mu.Outcome.SURVIVED).as_dict() for m in picked if (full := mu.with_after(m))]
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"seed": seed, "family": list(FAMILY), "of": len(family), "mutants": rows}, fh, indent=1)
    print(f"{len(every)} mutants, {len(family)} in the family, {len(rows)} written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
