"""The docs cannot drift from the code: the generated pages are what the code makes today,
every YAML block is a matrix (or part of one) the kit accepts, and every nox command line
names sessions that exist with options that a verb of its chain takes."""
from __future__ import annotations

import dataclasses
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from envbench import command_options as options
from envbench.matrix import models
from envbench.user_errors import MatrixError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import docs_gen  # noqa: E402

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# Enough of a matrix for a block that shows one part of it.
FILL = {"environments": {"e": {"torch": "2.13.0"}}, "targets": {"cpu": {"device": "cpu"}}}


def _blocks(kind: str) -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for lang, body in FENCE.findall(path.read_text(encoding="utf-8")):
            if lang == kind:
                found.append(("%s" % path.relative_to(ROOT), body))
    return found


def test_the_generated_pages_are_what_the_code_makes_today():
    for name, make in docs_gen.PAGES.items():
        committed = (docs_gen.REFERENCE / name).read_text(encoding="utf-8")
        assert committed == make(), "docs/reference/%s is stale: python tools/docs_gen.py" % name
    assert docs_gen.without_charts(docs_gen.EXAMPLE.read_text(encoding="utf-8")) == \
        docs_gen.without_charts(docs_gen.example_page()), \
        "docs/assets/report.html is stale: python tools/docs_gen.py --screenshot"


def test_a_renamed_flag_makes_the_cli_page_stale_and_the_docs_command_lines_wrong(monkeypatch):
    renamed = dict(options.OPTIONS, quick=dataclasses.replace(options.OPTIONS["quick"],
                                                              flag="--fast"))
    monkeypatch.setattr(options, "OPTIONS", renamed)
    assert docs_gen.cli_reference() != (docs_gen.REFERENCE / "cli.md").read_text()
    assert any("--quick" in problem for problem in _command_problems())


@pytest.mark.parametrize("where, body", _blocks("yaml"))
def test_every_yaml_block_is_a_matrix_or_part_of_one(where, body):
    data = yaml.safe_load(body)
    assert isinstance(data, dict), where
    assert set(data) <= {"environments", "targets", "benchmark"}, (where, sorted(data))
    whole = dict(FILL, **data)
    try:
        models.parse(yaml.safe_dump(whole, sort_keys=False))
    except MatrixError as exc:
        pytest.fail("%s: a YAML block the kit refuses: %s" % (where, exc))


def _sessions() -> dict[str, str | None]:
    """nox's sessions and the envbench verb each calls (None: not an envbench verb)."""
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    found: dict[str, str | None] = {}
    for match in re.finditer(r'@nox\.session(?:\(name="([^"]+)"\))?\ndef (\w+)\(.*?(?=\n@nox|\Z)',
                             text, re.S):
        name = match.group(1) or match.group(2)
        verb = re.search(r'_envbench\(session, "([a-z-]+)"|"envbench", "([a-z-]+)"',
                         match.group(0))
        found[name] = (verb.group(1) or verb.group(2)) if verb else None
    return found


def _command_lines(pages: list[Path] | None = None) -> list[tuple[str, str]]:
    lines = []
    for path in pages or DOCS:
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
        for lang, body in FENCE.findall(text):
            if lang in ("bash", "sh", ""):
                lines += [(where, line.split("#")[0].strip()) for line in body.splitlines()
                          if re.match(r"\s*(nox|\./noxw)( |$)", line)]
        lines += [(where, code) for code in re.findall(r"`((?:nox|\./noxw) -[^`]+)`", text)]
    return lines


def _command_problems(pages: list[Path] | None = None) -> list[str]:
    sessions = _sessions()
    taken = {flag for verb in options.COMMANDS.values() for name in verb.options
             for flag in [options.OPTIONS[name].flag] if flag}
    problems = []
    for where, line in _command_lines(pages):
        words = shlex.split(line.replace("…", ""))
        if words[0] == "nox":
            # ./noxw keeps nox in its own cache: after the README's first command a reader
            # has ./noxw and no `nox` on PATH ("nox: command not found").
            problems.append("%s: `%s`: nox is not on PATH after `./noxw -s demo`; write "
                            "./noxw" % (where, line))
        named = []
        rest = words[1:]
        while rest and rest[0] != "--":
            word = rest.pop(0)
            if word == "-s":
                while rest and not rest[0].startswith("-"):
                    named.append(rest.pop(0))
        for name in named:
            if name not in sessions:
                problems.append("%s: `%s`: no session %s" % (where, line, name))
        verbs = [sessions.get(n) for n in named]
        if not verbs or None in verbs:
            continue  # tests, mutants, overhead, docs: their options are not envbench's
        chain = {n for v in verbs if v for n in options.COMMANDS[v].options}
        for word in rest[1:]:
            flag = word.split("=", 1)[0]
            if not flag.startswith("--"):
                continue
            owner = [n for n, o in options.OPTIONS.items() if o.flag == flag]
            if flag not in taken or not set(owner) & chain:
                problems.append("%s: `%s`: no session of %s takes %s"
                                % (where, line, " ".join(named), flag))
    return problems


def test_every_command_line_names_sessions_that_exist_and_options_they_take():
    assert len(_command_lines()) > 20  # the check reads the docs' commands at all
    assert _command_problems() == []


def test_a_planted_session_that_does_not_exist_and_a_bare_nox_are_caught(tmp_path):
    page = tmp_path / "planted.md"
    page.write_text("Then `./noxw -s nosuch`, or:\n\n```bash\nnox -s doctor\n```\n\n"
                    "and `nox -x -s report -- --quick`.\n", encoding="utf-8")
    assert _command_problems([page]) == [
        "planted.md: `nox -s doctor`: nox is not on PATH after `./noxw -s demo`; write ./noxw",
        "planted.md: `./noxw -s nosuch`: no session nosuch",
        "planted.md: `nox -x -s report -- --quick`: nox is not on PATH after `./noxw -s demo`; "
        "write ./noxw"]


def test_the_readme_is_short_and_its_links_lead_somewhere():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def test_the_readme_shows_the_shipped_matrix():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What to run: the matrix", 1)[1]
    block = FENCE.search(section)
    assert block is not None and block.group(1) == "yaml"
    assert yaml.safe_load(block.group(2)) == yaml.safe_load(
        (ROOT / "matrix.yaml").read_text(encoding="utf-8"))



def test_the_environment_page_lists_every_variable_the_kit_reads_and_no_other():
    """docs/environment.md against the code: each ENVBENCH_ variable and each of Docker's
    that the kit names (and PYTORCH_INDEX_URL, which the shipped matrix reads)."""
    sources = [ROOT / "noxw", ROOT / "noxfile.py", ROOT / "matrix.yaml",
               *sorted((ROOT / "envbench").rglob("*.py")), *sorted((ROOT / "bench").rglob("*.py")),
               *sorted((ROOT / "tools").glob("*.py")), *sorted((ROOT / "bootstrap").glob("*.py"))]
    pattern = re.compile(r"\b(ENVBENCH_[A-Z_]+|DOCKER_(?:HOST|CONTEXT|CONFIG|TLS_VERIFY|"
                         r"CERT_PATH)|PYTORCH_INDEX_URL)\b")
    read = {name for path in sources for name in pattern.findall(path.read_text("utf-8"))}
    page = set(pattern.findall((ROOT / "docs" / "environment.md").read_text("utf-8")))
    assert read - page == set(), "read by the kit, missing from docs/environment.md"
    assert page - read == set(), "on docs/environment.md, read nowhere"


def test_running_lists_every_session_once_in_its_table():
    """The sessions' table is written once (docs/running.md; the README's first commands and
    the generated CLI reference point at it): every nox session has its row, and no row names
    one that is gone."""
    text = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    cells = [row.split("|")[1] for row in text.splitlines() if row.startswith("| `./noxw -s ")]
    listed = {name for cell in cells
              for name in re.findall(r"`(?:\./noxw -s )?([a-z-]+)", cell)}
    assert listed == set(_sessions()), (sorted(set(_sessions()) - listed),
                                        sorted(listed - set(_sessions())))
