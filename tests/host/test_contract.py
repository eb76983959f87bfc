"""The result contract: bench's JSON Schema, strict JSON, schema-1 files, and a fuzzed report.

Every mutation of a real result either is refused with the file named (and the report goes on
with the others) or is a valid result that renders; nothing in a file ends in a traceback.
"""
from __future__ import annotations

import ast
import copy
import io
import json
import math
import random
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_fixture import make_record

from bench import result
from envbench.commands import dispatch
from envbench.report import pages
from envbench.results import contract, identity

SCHEMA_1_FILE = Path(__file__).resolve().parent / "data" / "result-schema1.json"


def real_record() -> dict:
    import random

    return make_record("torch2.5-cu124", "gpu", 256, 0, random.Random(3))


def real_set() -> list[dict]:
    """A GPU and a CPU target at two batch sizes: enough for speedups, batch-size tables,
    effects and the write-up's reference rows to be computed from what is mutated."""
    import random

    rng = random.Random(3)
    return [make_record("seed", target, batch, 0, rng, torch="1.12.1+cu116", cuda="11.6")
            for target in ("gpu", "cpu") for batch in (32, 256)]


def test_the_schema_is_a_valid_json_schema_and_bench_writes_by_it():
    jsonschema.Draft202012Validator.check_schema(result.SCHEMA_DOCUMENT)
    assert result.SCHEMA == "envbench.result/5"
    assert contract.problems(real_record()) == []
    assert contract.problems(result.new_record({})) != []  # a bare start is not a result


@pytest.mark.parametrize("path, value, expected", [
    (("summary", "epoch_s_median"), None, "summary.epoch_s_median: None is not of type"),
    (("epochs", 0, "wall_s"), "1.0", "epochs[0].wall_s: '1.0' is not of type 'number'"),
    (("epochs", 0, "wall_s"), 0, "epochs[0].wall_s: 0 is less than the minimum"),
    (("epochs", 0, "wall_s"), -3.5, "epochs[0].wall_s: -3.5 is less than the minimum"),
    (("epochs", 0, "phases_s"), None, "epochs[0].phases_s: None is not of type 'object'"),
    (("cell", "price_per_hour"), "0.35", "cell.price_per_hour: '0.35' is not of type"),
    (("cell", "variant"), [1, 2], "cell.variant: [1, 2] is not of type 'object'"),
    (("config", "batch_size"), 1.0, "config.batch_size: 1.0 is not of type 'integer'"),
    (("config", "batch_size"), True, "config.batch_size: True is not of type 'integer'"),
    (("epochs", 0, "test_acc"), 1.5, "epochs[0].test_acc: 1.5 is greater than the maximum"),
    (("status",), "done", "status: 'done' is not one of ['ok', 'failed']"),
    (("error",), {"type": "X", "message": "y"}, "error: {'type': 'X', 'message': 'y'} is not"),
])
def test_mistyped_values_are_refused_with_their_path(path, value, expected):
    record = real_record()
    target = record
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    with pytest.raises(contract.InvalidResult) as caught:
        contract.check(record)
    assert str(caught.value).startswith(expected), str(caught.value)


@pytest.mark.parametrize("text, expected", [
    ('{"a": NaN}', "not valid JSON (NaN is not a number JSON allows"),
    ('{"a": -Infinity}', "not valid JSON (-Infinity is not a number JSON allows"),
    ('{"a": 1e400}', "not valid JSON (1e400 is out of range"),
    ('{"a": %s}' % ("9" * 40), "not valid JSON (integer 999999999999… is out of range"),
    ("[" * 100000 + "]" * 100000, "not a result: nested too deeply"),
    ("[" * 40 + "]" * 40, "not a result: nested more than 32 levels deep"),
    ("[]", "not a result: the file holds no JSON object"),
    ('{"schema": "envbench.result/9"}', "schema 'envbench.result/9' is not one this envbench"),
])
def test_json_that_no_result_can_be_is_refused(text, expected):
    with pytest.raises(contract.InvalidResult) as caught:
        contract.check(contract.parse(text))
    assert str(caught.value).startswith(expected), str(caught.value)


def test_schema_1_files_are_read_and_what_they_lack_is_not_measured():
    """A file the previous envbench wrote (a real one, kept as test data)."""
    old = json.loads(SCHEMA_1_FILE.read_text())
    assert old["schema"] == "envbench.result/1" and "host_peak_rss_bytes" in old["memory"]
    record = contract.load(SCHEMA_1_FILE)
    assert record["schema"] == result.SCHEMA and record["upgraded_from"] == contract.SCHEMA_1
    assert record["memory"]["process_rss_peak_bytes"] is None  # schema 1's was no peak
    assert record["memory"]["cgroup_peak_bytes"] == old["memory"]["cgroup_peak_bytes"]
    assert record["summary"]["forward_dtype"] is None
    assert record["cell"]["resources"]["threads"] is None
    assert record["epochs"] == old["epochs"]
    assert identity.of_record(record).environment == "torch2.13-cpu"
    assert record["config"]["workload"] == "lenet" and record["parallel"]["world_size"] == 1
    assert record["model"]["unit"] == "images" and record["model"]["flops"]["train"] is None


def test_schema_2_files_read_as_what_that_bench_ran():
    """Schema 2's bench trained LeNet on one device, pinning and copying asynchronously
    exactly on cuda: the upgrade says so, and nothing else changes."""
    new = _as_schema_3(real_record())
    old = json.loads(json.dumps(new))
    old["schema"] = contract.SCHEMA_2
    for key in ("model", "parallel", "quantize_eval", "pin_memory", "non_blocking", "nproc"):
        old["config"].pop(key)
    old.pop("model")
    old.pop("parallel")
    assert contract.problems(old) != []  # not schema 4 as it stands
    record = contract.check(old)
    upgraded = contract.check(new)
    assert record["upgraded_from"] == contract.SCHEMA_2 and contract.problems(record) == []
    assert record["config"] == upgraded["config"]  # cuda: pin_memory and non_blocking on
    assert record["model"] == upgraded["model"]
    assert record["parallel"]["mode"] == "none" and record["parallel"]["global_batch"] == 256
    assert identity.of_record(record) == identity.of_record(upgraded)


def _as_schema_3(record: dict) -> dict:
    """A schema-4 LeNet result as schema-3 bench wrote it: `model` for the workload, a model
    section of name, parameters and forward FLOPs."""
    old = json.loads(json.dumps(record))
    old["schema"] = contract.SCHEMA_3
    config = old["config"]
    config["model"] = config.pop("workload")
    for key in ("workload_file", "workload_function", "workload_sha256"):
        config.pop(key)
    old["model"] = {k: old["model"][k] for k in ("name", "parameters", "flops_per_image")}
    for epoch in old["epochs"]:
        epoch.pop("test_loss", None)
    old["summary"].pop("final_test_loss", None)
    return old


def test_schema_3_results_are_the_same_measurements_as_schema_4_ones():
    """A LeNet result keeps its identity: read through the upgrade, schema 3's `model` is
    the workload, a swept `model` a swept `workload`, and its model section says images,
    accuracy and forward FLOPs counted by hooks (what schema-3 bench did)."""
    new = real_record()
    new["cell"]["variant"] = {"workload": "lenet", "batch_size": 256}
    old = _as_schema_3(new)
    old["cell"]["variant"] = {"model": "lenet", "batch_size": 256}
    assert contract.problems(old) != []
    record = contract.check(old)
    assert record["upgraded_from"] == contract.SCHEMA_3 and contract.problems(record) == []
    assert record["config"] == new["config"] and record["cell"] == new["cell"]
    assert record["model"] == dict(new["model"], flops={"forward": 1303440, "train": None,
                                                        "method": "hooks", "note": None})
    assert identity.of_record(record) == identity.of_record(new)
    assert identity.of_record(record).digest == identity.of_record(new).digest


# --- fuzzing: every field of a real result, every wrong type ----------------------------

def _leaves(value, path=()):
    """Every path into the record, containers included (so whole sections get replaced)."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:2]):
            yield from _leaves(item, path + (index,))


def _deep(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


WRONG = [None, "NaN", "Infinity", -1, -1e-9, 0, 10**17, 1e300, 1.5, True, "", "text",
         "<b>x</b>|[a](b)\n", [], [1, 2], {}, {"a": 1}, _deep(10), _deep(40)]
RAW = ["NaN", "Infinity", "-Infinity", "1e999"]  # written as bare tokens: not JSON


def _write(path: Path, record, raw_token=None) -> None:
    text = json.dumps(record)
    if raw_token is not None:
        text = text.replace('"@RAW@"', raw_token)
    path.write_text(text)


def _mutate(record: dict, path: tuple, value) -> dict:
    mutated = copy.deepcopy(record)
    if not path:
        return value
    target = mutated
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return mutated


def _report(folder: Path, out: Path, *options: str) -> tuple[int, str]:
    """The report CLI in-process, as `./noxw -s report -- FOLDER` runs it."""
    stdout, stderr = io.StringIO(), io.StringIO()
    limit = sys.getrecursionlimit()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = dispatch.main(["report", str(folder), "--out", str(out), *options])
    assert sys.getrecursionlimit() == limit
    return code, stdout.getvalue() + stderr.getvalue()


def test_every_field_mutated_to_every_wrong_type(tmp_path):
    """The exhaustive sweep: every field of a set of real results, set to every wrong value
    (the same in each record, so comparisons across records see it too). Each refused file
    is named; the accepted ones render, many sets to a report, beside an untouched set."""
    base = real_set()
    batches = [tmp_path / ("batch%d" % i) for i in range(8)]
    for folder in batches:
        folder.mkdir()
        for i, record in enumerate(base):
            _write(folder / ("good-%d.json" % i), record)
    refused: list[Path] = []
    accepted = 0
    count = 0
    for n, path in enumerate(_leaves(base[0])):
        for m, value in enumerate(WRONG + RAW):
            folder = batches[count % len(batches)]
            count += 1
            for i, record in enumerate(base):
                name = folder / ("m%03d-%02d-%d.json" % (n, m, i))
                # Each set its own environment, so that its GPU rows meet its CPU rows.
                record = dict(record, cell=dict(record["cell"], environment=name.stem[:-2]))
                try:
                    if value in RAW:
                        _write(name, _mutate(record, path, "@RAW@"), raw_token=value)
                    else:
                        _write(name, _mutate(record, path, value))
                except (KeyError, IndexError, TypeError):
                    continue  # this record has no such field
                try:
                    contract.load(name)
                    accepted += 1
                except contract.InvalidResult:
                    refused.append(name)
    assert len(refused) > 4000 and accepted > 500  # both kinds happen, in numbers
    for folder in batches:
        # A fixed baseline: a mutated target name must not take the baseline from the others.
        code, output = _report(folder, folder / "out", "--baseline", "cpu")
        assert code == 0 and "Traceback" not in output, output[-2000:]
        page = (folder / "out" / "index.html").read_text()
        missing = [p.name for p in refused if p.parent == folder and str(p) not in page]
        assert not missing, missing[:5]


@st.composite
def mutations(draw):
    """1 to 3 (path, wrong value) pairs, the values drawn from every JSON type."""
    paths = list(_leaves(real_record()))
    pairs = []
    for _ in range(draw(st.integers(1, 3))):
        value = draw(st.one_of(
            st.sampled_from(WRONG),
            st.text(max_size=30),
            st.integers(-10**20, 10**20),
            st.floats(allow_nan=False, allow_infinity=False),
            st.lists(st.integers(), max_size=3),
            st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
            st.integers(0, 60).map(_deep)))
        pairs.append((draw(st.sampled_from(paths)), value))
    every_record = draw(st.booleans())
    raw = draw(st.one_of(st.none(), st.sampled_from(RAW)))
    return pairs, every_record, raw


def _apply(record: dict, pairs: list) -> object:
    for path, value in pairs:
        try:
            record = _mutate(record, path, value)
        except (TypeError, KeyError, IndexError):
            pass  # an earlier mutation removed the path
    return record


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutations())
def test_hypothesis_mutations_never_break_the_report(tmp_path_factory, mutation):
    """Mutate one record, or all four of a set alike; report the folder."""
    pairs, every_record, raw = mutation
    folder = tmp_path_factory.mktemp("fuzz")
    names = []
    for i, record in enumerate(real_set()):
        mutated = _apply(record, pairs) if every_record or i == 0 else record
        if raw is not None and i == 0 and isinstance(mutated, dict):
            mutated = dict(mutated, extra="@RAW@")
        name = folder / ("r%d.json" % i)
        _write(name, mutated, raw_token=raw if i == 0 else None)
        names.append(name)
    valid = []
    for name in names:
        try:
            contract.load(name)
            valid.append(name)
        except contract.InvalidResult:
            pass
    code, output = _report(folder, folder / "out")
    if not valid:
        assert code == 1 and "no results to report" in output and "Traceback" not in output
        return
    assert code == 0 and "Traceback" not in output, output
    page = (folder / "out" / "index.html").read_text()
    for name in names:
        assert (str(name) in page) is (name not in valid), name  # named iff left out
    assert "reported %d results" % len(valid) in output


def test_a_non_finite_loss_is_written_as_null():
    assert result.finite_or_none(float("nan")) is None
    assert result.finite_or_none(math.inf) is None and result.finite_or_none(2.5) == 2.5
    with pytest.raises(ValueError):
        result.write_atomic("/dev/null", {"a": math.nan})  # never written as NaN


def test_the_report_renders_a_schema_1_file(tmp_path):
    written = pages.render_files([SCHEMA_1_FILE], tmp_path)
    page = written["html"].read_text()
    assert "torch2.13-cpu" in page and "AMD EPYC · 2 threads" in page


def test_the_reader_refuses_links_fifos_and_oversized_files_without_hanging(tmp_path):
    """A results folder is written by containers and VMs: what lies there is not trusted."""
    import os

    from envbench.results import store

    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "zero.json").symlink_to("/dev/zero")          # stat() says 0 bytes
    (folder / "key.json").symlink_to(tmp_path / "secret")   # would copy a file into reports
    (tmp_path / "secret").write_text('{"schema": 2}')
    os.mkfifo(folder / "fifo.json")                          # open() would wait forever
    (folder / "big.json").write_bytes(b" " * (contract.MAX_BYTES + 1))
    loaded, skipped = store.load_all([folder])
    assert loaded == []
    reasons = {Path(path).name: why for path, why in skipped}
    assert reasons == {
        "zero.json": "not a result: a symbolic link (results are plain files)",
        "key.json": "not a result: a symbolic link (results are plain files)",
        "fifo.json": "not a result: not a regular file",
        "big.json": "not a result: more than %d bytes (results are a few kB)"
                    % contract.MAX_BYTES}


def test_the_matrix_bench_and_the_schema_agree_on_the_most_epochs(tmp_path):
    """A record of more epochs than any matrix allows is refused by the contract (a bootstrap
    over 100,000 epochs takes minutes), and bench refuses to run that many."""
    import random

    from bench import options as bench_options
    from envbench.matrix.models import Benchmark

    bound = next(m.le for m in Benchmark.model_fields["epochs"].metadata if hasattr(m, "le"))
    schema = json.loads((Path(contract.__file__).resolve().parents[2] / "bench" /
                         "result.schema.json").read_text())
    assert bound == bench_options.MAX_EPOCHS == schema["properties"]["epochs"]["maxItems"]
    record = make_record("e", "cpu", 256, 0, random.Random(5))
    record["epochs"] = record["epochs"][:1] * (bound + 1)
    with pytest.raises(contract.InvalidResult, match="epochs"):
        contract.check(record)
    with pytest.raises(SystemExit), redirect_stderr(io.StringIO()) as err:
        bench_options.parse_config(["--device", "cpu", "--synthetic", "--epochs", str(bound + 1),
                             "--batch-size", "8", "--pipeline", "classic", "--out", "x.json"])
    assert "must be <= %d" % bound in err.getvalue()


def test_a_list_far_past_the_schema_is_refused_by_its_length_with_its_reason(tmp_path):
    """A profile of 100,000 operators took 18 s per file to refuse, and the message was cut
    before it said why; now its length is the reason, said at once, with where it is."""
    record = make_record("a", "cpu", 256, 0, random.Random(1))
    operator = {"name": "aten::mm", "calls": 1, "self_cpu_s": 0.001, "self_device_s": None,
                "share": 0.0}
    record["profile"] = {"steps": 5, "warmup_steps": 2, "samples": 320, "window_s": 0.1,
                         "ranked_by": "self_cpu", "total_s": 0.1,
                         "operators": [dict(operator) for _ in range(100_000)],
                         "trace": None, "trace_bytes": None, "note": None}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    with pytest.raises(contract.InvalidResult) as caught:
        contract.load(path)
    assert str(caught.value) == ("profile.operators: 100000 items, more than any list of a "
                                 "result holds (%d)" % contract.MAX_ITEMS)
    # Under that bound the schema says it, and a long message keeps its reason (its tail).
    record["profile"]["operators"] = record["profile"]["operators"][:contract.MAX_ITEMS]
    path.write_text(json.dumps(record))
    with pytest.raises(contract.InvalidResult) as caught:
        contract.load(path)
    said = str(caught.value)
    assert said.startswith("profile.operators: ") and said.endswith("is too long"), said
    assert len(said) <= 260


def test_the_schema_names_things_as_bench_rules_say():
    """Each pattern the schema checks a record by is bench.rules', which the matrix and
    bench's parser use: a name either accepts is one the contract takes."""
    from bench import rules

    schema = json.loads((Path(contract.__file__).resolve().parents[2] / "bench" /
                         "result.schema.json").read_text())
    config = schema["$defs"]["config"]["properties"]
    assert config["workload"]["pattern"] == rules.json_schema_pattern(rules.NAME)
    assert config["workload_function"]["pattern"] == rules.json_schema_pattern(
        rules.FUNCTION_NAME)
    assert schema["$defs"]["sha256_or_null"]["pattern"] == rules.json_schema_pattern(
        rules.SHA256)
    assert config["inputs"]["propertyNames"]["pattern"] == rules.json_schema_pattern(
        rules.INPUT_NAME)
    assert schema["properties"]["epochs"]["maxItems"] == rules.MAX_EPOCHS
    # The kinds of failure the kit records, listed where a reader of a result looks them up.
    assert schema["$defs"]["error"]["properties"]["type"]["examples"] == sorted(
        rules.FAILURE_KINDS)


def _string_literals(path: Path) -> list[tuple[str, int]]:
    return [(node.value, node.lineno) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_each_failure_kind_and_the_cifar_folder_is_spelled_in_bench_rules_alone():
    """A kind written as a string in a second module is one a rename leaves behind (the
    cloud path recorded "NoResults" where Docker and Slurm said "NoResult"); every writer
    and reader takes bench.rules' names."""
    from bench import rules

    root = Path(contract.__file__).resolve().parents[2]
    facts = set(rules.FAILURE_KINDS) | {rules.CIFAR_FOLDER}
    assert len(facts) == len(rules.FAILURE_KINDS) + 1
    spelled = ["%s:%d %r" % (path.relative_to(root), line, text)
               for folder in ("bench", "envbench")
               for path in sorted((root / folder).rglob("*.py"))
               if path != root / "bench" / "rules.py"
               for text, line in _string_literals(path) if text in facts]
    assert spelled == []
    # The scan sees what it looks for: rules.py itself spells each one.
    assert facts <= {text for text, _ in _string_literals(root / "bench" / "rules.py")}
