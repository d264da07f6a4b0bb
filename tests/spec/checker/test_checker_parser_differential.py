"""The parser differential: SANY and the embedded front end over every .tla of tla-examples (its
_modules included), each file parsed as SANY would (its own folder, then the corpus's libraries): every
accept/reject disagreement is a failure. Slow: two passes over 279 files (about 100 s here)."""

from __future__ import annotations

import pytest

from kvexact.spec.checker.corpus import corpus_lib_dirs
from kvexact.spec.checker.frontend import front_end_error
from kvexact.spec.checker.sany import sany_verdicts


@pytest.mark.slow
def test_front_end_accepts_and_rejects_as_sany_on_tla_examples(examples_root, tla2tools_jar):
    libs = corpus_lib_dirs(examples_root)
    files = sorted(examples_root.rglob("*.tla"))
    assert len(files) > 250 and any(p.parent.name == "community" for p in files)
    sany = sany_verdicts(files, tla2tools_jar, libs)
    wrong = []
    for path in files:
        ours = front_end_error(path, libs)
        if (ours is None) != sany[path].accepted:
            wrong.append(f"{path.relative_to(examples_root)}: SANY {sany[path].first_error() or 'accepts'}; "
                         f"embedded {ours or 'accepts'}")
    assert wrong == []
