"""One cell identity: each part of a measurement changes it; the repeat changes only the file."""
from __future__ import annotations

from test_matrix import GOOD

from envbench.cells import expansion
from envbench.matrix import models
from envbench.matrix.models import Target
from envbench.results import identity
from envbench.results.identity import SYNTHETIC as SYNTHETIC_DATA
from envbench.results.identity import DataIdentity

M = models.parse(GOOD)
CELL = next(c for c in expansion.expand(M) if c.environment == "a" and c.repeat == 0)
DATA = DataIdentity("cifar10", "a" * 64)


def ident(cell=CELL, target=None, host=2, data=DATA, image="sha256:1"):
    return expansion.prepare(cell, target or M.targets["cpu"], host, data, image).identity


def test_each_part_of_a_measurement_changes_the_identity():
    base = ident()
    assert ident() == base and ident().digest == base.digest
    quick = next(c for c in expansion.expand(M, quick=True) if c.environment == "a"
                 and c.variant == CELL.variant)
    other_settings = next(c for c in expansion.expand(M) if c.environment == "a"
                          and c.variant != CELL.variant and c.repeat == 0)
    changed = {
        "image": ident(image="sha256:2"),
        "data set": ident(data=DataIdentity("cifar10", "b" * 64)),
        "synthetic": ident(data=SYNTHETIC_DATA),
        "quick": ident(cell=quick),
        "option": ident(cell=other_settings),
        "memory": ident(target=Target(device="cpu", cpus=8, memory="4g")),
        "threads": ident(host=1),  # cpus: 8 capped to a 1-core host
    }
    for what, other in changed.items():
        assert other != base and other.group != base.group, what
        assert other.file_stem(CELL.variant) != base.file_stem(CELL.variant), what


def test_repeats_share_a_group_but_not_a_file():
    second = next(c for c in expansion.expand(M) if c.environment == "a" and c.repeat == 1
                  and c.variant == CELL.variant)
    one, two = ident(), ident(cell=second)
    assert one != two and one.group == two.group
    assert one.file_stem(CELL.variant) != two.file_stem(CELL.variant)


def test_file_names_are_readable_safe_and_marked():
    quick = next(c for c in expansion.expand(M, quick=True) if c.environment == "a")
    stem = ident(cell=quick, data=SYNTHETIC_DATA).file_stem(quick.variant)
    readable, digest = stem.rsplit("__", 1)
    assert readable.startswith("a__cpu__") and "__quick__synthetic__r0" in readable
    assert len(digest) == 12 and all(ch.isalnum() or ch in "._-" for ch in stem)


def test_differences_say_what_changed():
    words = ident().differences(ident(image="sha256:2", host=1))
    assert "image_id sha256:2 (expected sha256:1)" in words
    assert any(w.startswith("resources.threads 1 (expected 2)") for w in words)


def test_a_record_carries_its_identity():
    record = {"cell": {"environment": "a", "target": "cpu", "repeat": 0, "quick": False,
                       "resources": None, "data": None},
              "config": {"device": "cpu", "synthetic": True, "epochs": 1},
              "env": {"image": {"id": "sha256:1", "tag": None}}}
    again = identity.of_record(record)
    assert again.environment == "a" and again.data.synthetic
    assert again.image_id == "sha256:1" and dict(again.options) == {"device": "cpu",
                                                                     "synthetic": True,
                                                                     "epochs": 1}
