"""One cell identity: each part of a measurement changes it; the repeat changes only the file."""
from __future__ import annotations

import hashlib
import json

import pytest
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


RESOURCES = {"device": "cpu", "cpus": 4, "cpuset": "0-3", "threads": 4, "memory": "8g",
             "swap": None, "gpus": None}


def test_the_digest_is_the_sha256_of_the_fields_as_written_here():
    """Stored results are found again by these digests (file names, resume, grouping), so
    their recipe is a contract: written out by hand, not by calling the code."""
    made = identity.make("env", "cpu", "sha256:9", dict(RESOURCES, host_cpus=16, extra=1),
                         {"epochs": 2, "amp": "bf16", "data": "/data", "out": "/r/x.json",
                          "save_weights": "/w"}, DataIdentity("cifar10", "c" * 64),
                         quick=1, repeat=2.0)
    fields = {"environment": "env", "target": "cpu", "image_id": "sha256:9",
              "resources": RESOURCES, "options": {"amp": "bf16", "epochs": 2},
              "data": {"source": "cifar10", "sha256": "c" * 64}, "quick": True}
    group = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    digest = hashlib.sha256(json.dumps(dict(fields, repeat=2), sort_keys=True).encode()
                            ).hexdigest()
    assert made.fields() == dict(fields, repeat=2) and made.fields(repeat=False) == fields
    assert (made.digest, made.group) == (digest, group)
    # As JSON: true and 2, not 1 and 2.0 (which would make another digest).
    assert json.dumps(made.fields(), sort_keys=True) == json.dumps(dict(fields, repeat=2),
                                                                   sort_keys=True)
    assert made.file_stem({"batch_size": 32, "amp": "bf16"}) == (
        "env__cpu__amp-bf16_batchsize-32__quick__r2__" + digest[:12])


def test_a_file_stem_is_safe_marked_and_at_most_160_readable_characters():
    plain = identity.make("Seed/v1.12 x", "cpu", None, {}, {}, SYNTHETIC_DATA, False, 0)
    assert plain.file_stem({}) == "Seed-v1.12-x__cpu__base__synthetic__r0__" + plain.digest[:12]
    long = identity.make("x" * 200, "cpu", None, {}, {}, DATA, False, 0)
    assert long.file_stem({}) == "x" * 160 + "__" + long.digest[:12]


def test_differences_name_every_changed_part_in_order():
    mine = identity.make("env", "cpu", "sha256:1", RESOURCES, {"epochs": 2, "amp": "off"},
                         DATA, False, 0)
    theirs = identity.make("other", "cpu", None, dict(RESOURCES, threads=2, cpus=None),
                           {"epochs": 2, "amp": "bf16", "seed": 3}, SYNTHETIC_DATA, True, 1)
    assert mine.differences(theirs) == [
        "environment other (expected env)",
        "image_id null (expected sha256:1)",
        "resources.cpus null (expected 4)",
        "resources.threads 2 (expected 4)",
        "options.amp bf16 (expected off)",
        "options.seed 3 (expected null)",
        "data.sha256 null (expected %s)" % ("a" * 64),
        "data.source synthetic (expected cifar10)",
        "quick true (expected false)",
        "repeat 1 (expected 0)"]
    assert mine.differences(mine) == []


def test_a_record_missing_parts_gets_the_same_defaults_every_time():
    bare = identity.of_record({"cell": {}, "config": {"device": "cuda"}, "env": {}})
    assert (bare.environment, bare.target, bare.image_id, bare.quick, bare.repeat) == (
        "?", "cuda", None, False, 0)
    assert dict(bare.resources) == dict.fromkeys(identity.RESOURCE_KEYS)
    assert bare.data == DataIdentity("cifar10", None)
    nothing = identity.of_record({"cell": {"data": {"source": None, "sha256": "d" * 64},
                                           "repeat": 4, "quick": 1}, "config": {},
                                  "env": {"image": None}})
    assert (nothing.target, nothing.data, nothing.repeat, nothing.quick) == (
        "?", DataIdentity("cifar10", "d" * 64), 4, True)


def test_data_and_variant_words():
    assert SYNTHETIC_DATA.synthetic and not DATA.synthetic
    assert DATA.as_record() == {"source": "cifar10", "sha256": "a" * 64}
    assert identity.variant_text({"b": 1, "a": "x"}) == "a=x b=1"
    assert identity.variant_text({}) == "—" and identity.variant_text({}, "") == ""


def test_inputs_named_in_any_order_are_one_identity_usable_as_a_key():
    """A mapping among the options (a workload's inputs, by name) is held as its canonical
    JSON: the same inputs written in another order are the same measurement, and an identity
    stays hashable (results are grouped by it)."""
    def made(inputs):
        return identity.make("env", "cpu", None, RESOURCES, {"epochs": 2, "inputs": inputs},
                             DATA, False, 0)

    one = made({"weights": "a" * 64, "tokenizer": "b" * 64})
    other = made({"tokenizer": "b" * 64, "weights": "a" * 64})
    assert {one: "found"}[other] == "found"
    assert (one.digest, one.group) == (other.digest, other.group)
    assert one != made({"weights": "a" * 64, "tokenizer": "c" * 64})


@pytest.mark.parametrize("key, default, other", [("inputs", None, {"w": "a" * 64}),
                                                 ("nodes", 1, 2)])
def test_an_option_added_later_is_left_out_at_its_default(key, default, other):
    """A result written before an option existed (no such key) is the same measurement as
    one written since at the option's default; any other value is another measurement."""
    def made(**extra):
        return identity.make("env", "cpu", None, RESOURCES, {"epochs": 2, **extra}, DATA,
                             False, 0)

    before = made()
    assert made(**{key: default}) == before
    assert made(**{key: other}) != before
    assert made(**{key: other}).digest != before.digest
