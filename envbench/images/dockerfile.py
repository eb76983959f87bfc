"""An environment's image planned: its Dockerfile rendered from templates/*.j2, and the content
hash of everything that decides the image, which is its tag."""
from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from bench import fingerprint
from envbench.engine import spec
from envbench.images.lock import Lock
from envbench.matrix import grammars, sources
from envbench.matrix.models import Environment
from envbench.user_errors import UserError

# Package data, so that a plain (non-editable) install builds images from any folder.
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
BENCH_DIR = Path(fingerprint.__file__).resolve().parent
REPOSITORY = "envbench"


@dataclass(frozen=True)
class Plan:
    """Everything that decides an image's content; its hash is the tag."""

    name: str
    env: Environment
    dockerfile: str
    base: str
    # bench/'s sources as read once: the tag and the build context come from the same bytes.
    bench_files: tuple[tuple[str, bytes], ...]
    lock: Lock | None = None          # a pip stack's wheels, by hash; None: Debian's packages
    wheelhouse: Path | None = None    # where wheels locked from a wheelhouse are found
    compiler: bool = False            # gcc, g++ and Python's headers, for torch.compile
    index_url: str | None = None      # the index a wheel without a URL is fetched through

    @property
    def tag(self) -> str:
        digest = hashlib.sha256()
        digest.update(self.dockerfile.encode())
        for name, content in self.bench_files:
            digest.update(name.encode() + b"\0" + content)
        if self.lock is not None:
            digest.update(("lock %s\n" % self.lock.sha256).encode())
        # The matrix checked that the lower-cased name is a valid, unique repository component.
        return "%s/%s:%s" % (REPOSITORY, self.name.lower(), digest.hexdigest()[:16])

    @property
    def offline(self) -> bool:
        """Built with no network: everything but apt packages arrives in the context."""
        return not self.env.apt and not self.compiler and self.env.source == "pip"

    @property
    def labels(self) -> dict[str, str]:
        env = self.env
        return {
            "org.opencontainers.image.title": "envbench %s" % self.name,
            "org.opencontainers.image.base.name": self.base,
            "org.opencontainers.image.source": "envbench",
            "envbench.environment": self.name,
            "envbench.python": env.python,
            "envbench.torch": env.torch or "debian",
            "envbench.torchvision": env.torchvision or "",
            "envbench.cuda": env.cuda or "",
            "envbench.source": env.source,
            "envbench.lock.sha256": self.lock.sha256 if self.lock else "",
        }


def default_base(env: Environment) -> str:
    return "debian:bookworm-slim" if env.source == "debian" else "python:%s-slim" % env.python


# torch.compile builds code when it runs: Triton compiles its CUDA driver shim with gcc and
# Python.h, inductor on CPU needs g++. An image whose cells compile gets them (from apt).
COMPILER = ("gcc", "g++", "python3-dev")


def plan(name: str, env: Environment, matrix_dir: Path, lock: Lock | None = None,
         compiler: bool = False, default: str | None = None) -> Plan:
    """The image of an environment: its Dockerfile rendered, its tag computed. A pip stack's
    image needs its lock (see envbench.lock); without one the plan is a draft whose tag
    is not the one a build would have. ``compiler``: some of its cells use torch.compile
    (the matrix says, see Matrix.needs_compiler). ``default``: the base of a stack that
    names none, where the registry's is not the one (envbench.images.bases)."""
    where = "environments.%s" % name
    if env.dockerfile:
        template_path = (matrix_dir / env.dockerfile).resolve()
        # A matrix names templates beside it, not any file this user can read.
        if not template_path.is_relative_to(matrix_dir.resolve()):
            raise UserError("%s.dockerfile: %s lies outside the matrix's folder %s: refused"
                            % (where, env.dockerfile, matrix_dir.resolve()))
        if not template_path.is_file():
            raise UserError("%s.dockerfile: %s does not exist" % (where, template_path))
    else:
        template_path = TEMPLATES_DIR / ("%s.Dockerfile.j2" % env.kind)
    wheelhouse = sources.wheelhouse(name, env, matrix_dir)
    base = sources.checked(sources.expand(env.base, where + ".base"),
                           grammars.image_reference, where + ".base") \
        if env.base else (default or default_base(env))
    # Checked here too: `check` must refuse what a lock would.
    index_url = sources.index_url(name, env)
    apt = list(env.apt)
    if env.source == "debian":
        apt = ["python3", "python3-torch", "python3-torchvision"] + apt
    if compiler:
        apt += [package for package in COMPILER if package not in apt]
    loader = jinja2.FileSystemLoader([str(template_path.parent), str(TEMPLATES_DIR)])
    # Sandboxed: a template is text from the matrix's folder, and `./noxw -s check` renders it
    # ("nothing is built or run"); an unsandboxed one runs any Python it names, such as
    # {{ cycler.__init__.__globals__.os.getcwd() }}.
    jinja = SandboxedEnvironment(loader=loader, undefined=jinja2.StrictUndefined,
                                 keep_trailing_newline=True, autoescape=False)  # noqa: S701 - not HTML
    # Every value a RUN line takes goes through `sh` (shell quoting) on top of the checks.
    jinja.filters["sh"] = shlex.quote
    try:
        text = jinja.get_template(template_path.name).render(
            name=name, template=template_path.name, base=base, source=env.source, apt=apt,
            python=env.python, torch=env.torch, cuda=env.cuda, home=spec.HOME,
            user=spec.USER, workdir=spec.WORKDIR, entrypoint=json.dumps(list(spec.ENTRY)))
    except SecurityError as exc:
        raise UserError("%s.dockerfile: %s reaches outside the template's sandbox (%s): "
                        "refused" % (where, template_path, exc))
    except jinja2.TemplateError as exc:
        raise UserError("%s.dockerfile: %s cannot be rendered (%s)"
                        % (where, template_path, exc))
    bench_files = tuple((name, (BENCH_DIR / name).read_bytes())
                        for name in fingerprint.source_names(str(BENCH_DIR)))
    return Plan(name, env, text, base, bench_files, lock, wheelhouse, compiler, index_url)
