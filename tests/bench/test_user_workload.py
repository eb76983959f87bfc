"""A user's own workload through bench's CLI: the contract's happy paths (a file, a package
folder, token-like inputs with their own loss and optimizer) and each way it can break, which
must end the run with one sentence and its traceback in the log."""
from __future__ import annotations

import os
import textwrap

import pytest
import torch
from bench_helpers import run_bench

from bench import workloads
from bench.errors import WorkloadError

RUN = ("--device", "cpu", "--synthetic", "--pipeline", "resident", "--epochs", "2",
       "--batch-size", "32", "--limit", "128", "--limit-test", "64")

MLP = '''
import torch
from torch import nn


def build(ctx):
    train, test = ctx.cifar10()
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 64), nn.ReLU(), nn.Linear(64, 10))
    return {"model": model, "train": train, "test": test, "inputs": "images",
            "unit": "images"}
'''


def _write(folder, name, text):
    path = os.path.join(str(folder), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def _run(tmp_path, path, *extra, name="mine"):
    return run_bench(tmp_path, *RUN, "--workload", name, "--workload-file", path, *extra)


def test_a_file_workload_runs_and_records_its_digest(tmp_path):
    path = _write(tmp_path, "mlp.py", MLP)
    digest = workloads.digest(path)
    code, record, out = _run(tmp_path, path, "--workload-sha256", digest)
    assert code == 0, out
    model = record["model"]
    assert (model["name"], model["source"], model["sha256"]) == ("mine", "file", digest)
    assert model["unit"] == "images" and model["quality"] == "accuracy"
    assert model["parameters"] == 3 * 32 * 32 * 64 + 64 + 64 * 10 + 10
    assert model["flops"]["forward"] == 2 * (3 * 32 * 32 * 64 + 64 * 10)
    config = record["config"]
    assert (config["workload"], config["workload_file"], config["workload_function"],
            config["workload_sha256"]) == ("mine", path, "build", digest)
    assert record["epochs"][-1]["samples"] == 128


def test_a_package_folder_with_its_own_modules_files_loss_and_optimizer(tmp_path):
    """Token-like tensor inputs (no image transforms), a relative import, a file read from
    the folder, a loss and an optimizer of its own, counted in tokens."""
    folder = tmp_path / "lm"
    _write(folder, "__init__.py", '''
        import os
        import torch
        from .net import Bigram


        def make(ctx):
            with open(os.path.join(ctx.folder, "vocab.txt")) as f:
                vocab = int(f.read())
            g = torch.Generator().manual_seed(ctx.seed)
            tokens = torch.randint(0, vocab, (96, 9), generator=g)
            pair = (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())
            return {"model": Bigram(vocab), "train": pair, "test": pair, "unit": "tokens",
                    "units_per_sample": 8, "quality": "loss",
                    "loss": lambda out, y: torch.nn.functional.cross_entropy(
                        out.reshape(-1, out.shape[-1]), y.reshape(-1)),
                    "optimizer": lambda params: torch.optim.Adam(params, lr=0.01)}
    ''')
    _write(folder, "net.py", '''
        from torch import nn


        class Bigram(nn.Module):
            def __init__(self, vocab):
                super().__init__()
                self.table = nn.Embedding(vocab, vocab)

            def forward(self, tokens):
                return self.table(tokens)
    ''')
    _write(folder, "vocab.txt", "50")
    code, record, out = _run(tmp_path, str(folder), "--workload-function", "make", name="lm")
    assert code == 0, out
    assert record["model"]["unit"] == "tokens" and record["model"]["units_per_sample"] == 8
    assert record["model"]["quality"] == "loss" and "tok/s" in out
    assert record["model"]["sha256"] == workloads.digest(str(folder))


def _fails(tmp_path, source, *extra, name="broken.py"):
    path = _write(tmp_path, name, source) if source is not None else str(tmp_path / name)
    code, record, out = _run(tmp_path, path, *extra)
    assert code == 1 and record["status"] == "failed", out
    assert record["error"]["type"] == "WorkloadError", record["error"]
    message = record["error"]["message"]
    assert "\n" not in message, message
    return message, out


def test_a_missing_file(tmp_path):
    message, out = _fails(tmp_path, None)
    assert "broken.py does not exist" in message and "Traceback" not in out


def test_a_missing_function_names_what_the_file_defines(tmp_path):
    message, _ = _fails(tmp_path, "def make(ctx):\n    pass\n\n\ndef _helper():\n    pass\n")
    assert "defines no function 'build' (it defines: make)" in message


def test_a_build_that_raises_says_so_and_logs_its_traceback(tmp_path):
    message, out = _fails(tmp_path, '''
        def build(ctx):
            raise ValueError("no such dataset: imagenet-21k")
    ''')
    assert "build() in broken.py raised ValueError: no such dataset: imagenet-21k" in message
    assert "Traceback" in out and 'raise ValueError("no such dataset' in out


def test_an_import_error_in_the_workload(tmp_path):
    message, out = _fails(tmp_path, "import timm\n")
    assert "importing broken.py failed: ModuleNotFoundError" in message and "timm" in message
    assert "Traceback" in out


def test_outputs_of_the_wrong_shape(tmp_path):
    message, _ = _fails(tmp_path, MLP.replace("nn.Linear(64, 10))", "nn.Linear(64, 10), "
                                              "nn.Unflatten(1, (5, 2)))"))
    assert "outputs (32, 5, 2) do not fit targets (32,)" in message


def test_a_loss_that_is_not_finite(tmp_path):
    message, _ = _fails(tmp_path, MLP.replace('"unit": "images"}', '"unit": "images", '
                                              '"loss": lambda out, y: out.sum() * float("nan")}'))
    assert "training loss was not finite (NaN or infinite) in epoch 1 of 2" in message


def test_a_workload_changed_after_the_host_hashed_it(tmp_path):
    message, _ = _fails(tmp_path, MLP, "--workload-sha256", "0" * 64)
    assert "changed since the host hashed it" in message


def test_a_loss_led_workload_may_score_accuracy_and_add_its_own_facts(tmp_path):
    """quality "loss" with accuracy asked for (as the GPTs score their next tokens), and
    facts of the workload's own beside the kit's in the record's model section."""
    source = MLP.replace('"unit": "images"}', '"unit": "images", "quality": "loss", '
                         '"accuracy": True, "attention": "explicit", '
                         '"record": {"width": 64, "note": "mine", "tied": None}}')
    path = _write(tmp_path, "scored.py", source)
    code, record, out = _run(tmp_path, path)
    assert code == 0, out
    model = record["model"]
    assert (model["quality"], model["attention"]) == ("loss", "explicit")
    assert (model["width"], model["note"], model["tied"]) == (64, "mine", None)
    for epoch in record["epochs"]:
        assert 0 <= epoch["test_acc"] <= 1
    # Without it, a loss-led workload computes no accuracy.
    plain = _write(tmp_path, "plain.py", MLP.replace('"unit": "images"}',
                                                    '"unit": "images", "quality": "loss"}'))
    folder = tmp_path / "plain"
    folder.mkdir()
    code, record, out = _run(folder, plain)
    assert code == 0, out
    assert record["epochs"][-1]["test_acc"] is None


@pytest.mark.parametrize("returned,said", [
    ("[1, 2]", "returned a list, not a dict"),
    ('{"model": None}', "returned no train, test"),
    ('{"model": 3, "train": 1, "test": 1}', "model: a int, not a torch.nn.Module"),
    ('dict(OK, unit="frames")', "unit: 'frames' (one of images, tokens, samples)"),
    ('dict(OK, extra=1)', "unknown key(s) extra"),
    ('dict(OK, train=(OK["train"][0][:5], OK["train"][1]))', "train: 5 inputs for 128 targets"),
    ('dict(OK, inputs="images", train=(OK["train"][0].float(), OK["train"][1]))',
     "inputs 'images' are uint8 N x C x H x W (one tensor), got torch.float32"),
    ('dict(OK, accuracy="yes")', "accuracy: 'yes' (true or false)"),
    ('dict(OK, accuracy=False)', 'accuracy: false, but quality is "accuracy"'),
    ('dict(OK, attention="flash")', "attention: 'flash' (one of sdpa, explicit)"),
    ('dict(OK, record={"parameters": 3})', "record: 'parameters' is the kit's own"),
    ('dict(OK, record={"shape": [1, 2]})', "record: shape is a list (a string, number"),
    ('dict(OK, record=[1])', "record: a list, not a dict"),
])
def test_a_build_that_breaks_the_contract(tmp_path, returned, said):
    source = MLP.replace("def build(ctx):", "def ok(ctx):") + textwrap.dedent('''

        def build(ctx):
            OK = ok(ctx)
            return %s
    ''' % returned)
    message, _ = _fails(tmp_path, source)
    assert said in message, message


def test_the_digest_is_of_names_and_bytes_and_refuses_links(tmp_path):
    folder = tmp_path / "w"
    _write(folder, "__init__.py", "x = 1\n")
    _write(folder, "sub/data.txt", "abc")
    first = workloads.digest(str(folder))
    assert workloads.digest(str(folder)) == first and len(first) == 64
    _write(folder, "__pycache__/x.pyc", "compiled")  # caches are not the workload
    assert workloads.digest(str(folder)) == first
    _write(folder, "sub/data.txt", "abd")
    assert workloads.digest(str(folder)) != first
    os.rename(str(folder / "sub" / "data.txt"), str(folder / "sub" / "other.txt"))
    _write(folder, "sub/other.txt", "abc")
    assert workloads.digest(str(folder)) != first  # same bytes, another name
    os.symlink("/etc/passwd", str(folder / "link"))
    with pytest.raises(WorkloadError, match="symbolic link"):
        workloads.digest(str(folder))
    with pytest.raises(WorkloadError, match="does not exist"):
        workloads.digest(str(tmp_path / "nothing"))


LENET_AS_BUILD = '''
from bench.workloads.lenet import LeNet


def build(ctx):
    train, test = ctx.cifar10()
    return {"model": LeNet(), "train": train, "test": test, "inputs": "images",
            "unit": "images"}
'''


def test_the_kits_lenet_written_as_a_build_trains_exactly_as_the_built_in(tmp_path):
    """The user's interface carries a built-in whole: LeNet given as build(ctx) (its data
    from ctx, the default loss and optimizer) is counted, trained and scored as the kit's
    own lenet, to the last bit of its weights, on the same seed. A user's model is measured
    by the same loop, not an approximation of it."""
    path = _write(tmp_path, "lenet_build.py", LENET_AS_BUILD)
    runs = {}
    for name, extra in (("lenet", ()), ("mine", ("--workload-file", path))):
        folder = tmp_path / name
        folder.mkdir()
        code, record, out = run_bench(folder, *RUN, "--deterministic", "--workload", name,
                                      *extra)
        assert code == 0, out
        runs[name] = record
    builtin, mine = runs["lenet"], runs["mine"]
    for key in ("parameters", "flops_per_image", "flops", "unit", "units_per_sample",
                "quality"):
        assert mine["model"][key] == builtin["model"][key], key
    assert (builtin["model"]["source"], mine["model"]["source"]) == ("builtin", "file")
    for ours, kits in zip(mine["epochs"], builtin["epochs"]):
        assert (ours["samples"], ours["train_loss"], ours["test_acc"], ours["test_loss"]) == \
            (kits["samples"], kits["train_loss"], kits["test_acc"], kits["test_loss"])
    digest = builtin["summary"]["weights_sha256"]
    assert isinstance(digest, str) and len(digest) == 64
    assert mine["summary"]["weights_sha256"] == digest


BUILTIN_AS_FILE = '''
from bench.workloads import %(module)s


def build(ctx):
    # Its module's own build(), given the built-in's name: a file may not take that name,
    # which the command line keeps for the built-in.
    ctx.workload = %(name)r
    return %(module)s.build(ctx)
'''
# Every built-in the tests train (gpt2-small is built, not trained, in test_workloads.py);
# the two whose runs take a minute each on a reference BLAS (Debian's torch) are left to the
# suite's other leg there, which runs the same interface.py.
HEAVY = ("resnet50", "gpt-tiny")
on_reference_blas = pytest.mark.skipif(
    "BLAS_INFO=generic" in torch.__config__.show(),
    reason="this torch's BLAS is the reference one (Debian's build): resnet50's and gpt-tiny's "
           "two runs take a minute each; the host's torch runs them through the same code")
TRAINED = [pytest.param(name, marks=on_reference_blas) if name in HEAVY else name
           for name in workloads.NAMES if name != "gpt2-small"]


@pytest.mark.parametrize("name", TRAINED)
def test_each_built_in_module_given_as_a_file_trains_exactly_as_the_built_in(tmp_path, name):
    """One contract: a built-in's build(ctx), loaded from a file as a user's is, passes the
    same checks and trains to the same weights, losses, scores and record, bit for bit."""
    info = workloads.info(name)
    path = _write(tmp_path, "as_file.py", BUILTIN_AS_FILE % {"module": info.module,
                                                              "name": name})
    train, test, batch = info.smoke
    lr = workloads.default_optimizer(name, batch)
    sizes = ("--device", "cpu", "--synthetic", "--pipeline", "resident", "--epochs", "2",
             "--limit", str(train), "--limit-test", str(test), "--batch-size", str(batch),
             "--lr", repr(lr["lr"]), "--momentum", repr(lr["momentum"]), "--deterministic")
    runs = {}
    for shown, extra in ((name, ()), ("mine", ("--workload-file", path))):
        folder = tmp_path / shown
        folder.mkdir()
        code, record, out = run_bench(folder, *sizes, "--workload", shown, *extra)
        assert code == 0, out
        runs[shown] = record
    builtin, mine = runs[name], runs["mine"]
    assert (builtin["model"]["source"], mine["model"]["source"]) == ("builtin", "file")
    assert (mine["model"]["file"], mine["model"]["function"]) == ("as_file.py", "build")
    for key in set(builtin["model"]) - {"name", "source", "sha256"}:
        assert mine["model"][key] == builtin["model"][key], key
    assert [(e["samples"], e["train_loss"], e["test_acc"], e["test_loss"])
            for e in mine["epochs"]] == \
        [(e["samples"], e["train_loss"], e["test_acc"], e["test_loss"])
         for e in builtin["epochs"]]
    assert len(builtin["summary"]["weights_sha256"]) == 64
    assert mine["summary"]["weights_sha256"] == builtin["summary"]["weights_sha256"]


INPUTS_MLP = '''
import os
import torch
from torch import nn


def build(ctx):
    # Pretrained weights, read from the input the matrix names, as a fine-tuning starts.
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
    model.load_state_dict(torch.load(os.path.join(ctx.inputs["weights"], "model.pt")))
    with open(ctx.inputs["labels"]) as f:
        assert f.read() == "ten classes"
    train, test = ctx.cifar10()
    return {"model": model, "train": train, "test": test, "inputs": "images"}
'''


def test_inputs_reach_build_by_name_and_are_recorded_with_their_digests(tmp_path):
    import torch
    from torch import nn

    weights = tmp_path / "pretrained"
    weights.mkdir()
    torch.manual_seed(1)
    torch.save(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).state_dict(),
               str(weights / "model.pt"))
    labels = _write(tmp_path, "labels.txt", "ten classes")
    path = _write(tmp_path, "ft.py", INPUTS_MLP)
    code, record, out = _run(tmp_path, path, "--input", "weights=%s" % weights,
                             "--input", "labels=%s" % labels,
                             "--input-sha256", "weights=%s" % ("a" * 64))
    assert code == 0, out
    assert record["config"]["inputs"] == {
        "weights": {"path": str(weights), "sha256": "a" * 64},
        "labels": {"path": labels, "sha256": None}}
    # An input that is not there (not mounted) ends the run with one sentence.
    code, record, out = _run(tmp_path, path, "--input", "weights=%s" % (tmp_path / "gone"))
    assert code == 1 and record["error"]["type"] == "WorkloadError", out
    assert record["error"]["message"] == ("input weights: %s does not exist in the container "
                                          "(was it mounted?)" % (tmp_path / "gone"))


@pytest.mark.parametrize("extra, expected", [
    (("--input", "w=/x", "--input", "w=/y"), "--input w given twice"),
    (("--input", "w=/x", "--input-sha256", "v=%s" % ("a" * 64)), "--input-sha256 v names no "
                                                                   "--input"),
    (("--input", "w=/x", "--input-sha256", "w=%s" % ("a" * 64), "--input-sha256",
      "w=%s" % ("b" * 64)), "--input-sha256 w given twice"),
    (("--input", "1w=/x"), "is not NAME=PATH"),
    (("--input", "w="), "is not PATH"),
    (("--input", "w=/x", "--input-sha256", "w=abc"), "is not a sha256"),
])
def test_bad_inputs_are_refused_by_the_parser(tmp_path, extra, expected, capsys):
    from bench import options

    path = _write(tmp_path, "mlp.py", MLP)
    with pytest.raises(SystemExit):
        options.parse_config(["--device", "cpu", "--synthetic", "--epochs", "1",
                              "--batch-size", "8", "--pipeline", "resident", "--out", "o.json",
                              "--workload", "m", "--workload-file", path, *extra])
    assert expected in capsys.readouterr().err


def test_an_input_needs_a_workload_file(capsys):
    from bench import options

    with pytest.raises(SystemExit):
        options.parse_config(["--device", "cpu", "--synthetic", "--epochs", "1",
                              "--batch-size", "8", "--pipeline", "resident", "--out", "o.json",
                              "--input", "w=/x"])
    assert "--input needs --workload-file" in capsys.readouterr().err
