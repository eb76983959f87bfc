"""./noxw's Python half: nox for this repository on a machine with only python3 >= 3.8.

Stock Debian and Ubuntu images ship python3 without venv, ensurepip or pip (and Ubuntu 24.04
refuses `pip install` outside a venv), so `python3 -m venv .venv && pip install nox` stops
before the kit runs. This needs none of them:

1. uv, pinned: its wheel for this platform is taken from a find-links folder or fetched from
   the package index (retried, resumed, its size capped), its sha256 checked against the pin
   below, and its binary kept in the cache (ENVBENCH_CACHE, else ~/.cache/envbench).
2. nox, hash-locked (bootstrap/noxw-requirements.txt), in a venv that uv makes on a Python >= 3.10:
   this one where it fits, else another on PATH, else a Python uv downloads.
3. nox runs with uv as its venv backend; what is set for pip (PIP_INDEX_URL, pip.conf's
   index-url, extra-index-url, find-links, constraint, cert) is passed on to uv, which does not
   read pip's configuration, so both clients see the same packages.

Standard library only, and Python 3.8 syntax: it runs before anything is installed.
"""
import base64
import fcntl
import hashlib
import http.client
import json
import os
import platform
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench's shared modules: standard library only, like this file
from bench.pipconfig import PIP_DEFAULT_QUERY, pip_settings  # noqa: E402
from bench.urls import http_url, without_credentials  # noqa: E402

UV_VERSION = "0.13.9"
# (wheel file, sha256, size in bytes) per platform, from the index's own listing of uv 0.13.9.
UV_WHEELS = {
    ("linux", "x86_64", "glibc"): (
        "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19", 17606939),
    ("linux", "x86_64", "musl"): (
        "uv-0.13.9-py3-none-musllinux_1_1_x86_64.whl",
        "2c45530751517d6c3bbc69a19473f6effe47cce047bede01ffd8af7ea7b36b25", 19295638),
    ("linux", "aarch64", "glibc"): (
        "uv-0.13.9-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64"
        ".musllinux_1_1_aarch64.whl",
        "5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe", 18026789),
    ("darwin", "x86_64", ""): (
        "uv-0.13.9-py3-none-macosx_10_12_x86_64.whl",
        "c16ed11e013557536b3e60065f1b912f6407bd6518e041b961e23ef9e6b4fbf5", 17529974),
    ("darwin", "arm64", ""): (
        "uv-0.13.9-py3-none-macosx_11_0_arm64.whl",
        "66c512266d633bef48384a1f53003f41f2a8e7b36fe6e7fbfd3e0fd52d96fa63", 14660755),
}
UV_WHEELS[("linux", "aarch64", "musl")] = UV_WHEELS[("linux", "aarch64", "glibc")]
UV_WHEELS[("darwin", "aarch64", "")] = UV_WHEELS[("darwin", "arm64", "")]
REQUIREMENTS = ROOT / "bootstrap" / "noxw-requirements.txt"
ATTEMPTS = 5


class NoxwError(Exception):
    pass


def say(text):
    print("[noxw] %s" % text, file=sys.stderr, flush=True)


def cache_root():
    return Path(os.environ.get("ENVBENCH_CACHE") or Path.home() / ".cache" / "envbench") \
        / "noxw"


# --- pip's configuration (bench.pipconfig reads it the way pip does), passed on to uv

def uv_environment(pip):
    """uv's names for what pip has configured, where uv's own are not set."""
    env = dict(os.environ)
    named = os.environ.get("ENVBENCH_INDEX_URL")
    if named:  # what the user named for the kit serves uv and pip, before their own settings
        env["UV_DEFAULT_INDEX"] = named
        env["PIP_INDEX_URL"] = named
        env.pop("UV_INDEX_URL", None)
    pairs = (("index-url", "UV_DEFAULT_INDEX", None), ("extra-index-url", "UV_INDEX", " "),
             ("find-links", "UV_FIND_LINKS", ","), ("constraint", "UV_CONSTRAINT", " "),
             ("cert", "SSL_CERT_FILE", None))
    for key, name, joiner in pairs:
        value = pip.get(key)
        legacy = {"UV_DEFAULT_INDEX": "UV_INDEX_URL", "UV_INDEX": "UV_EXTRA_INDEX_URL"}.get(name)
        if not value or env.get(name) or (legacy and env.get(legacy)):
            continue
        env[name] = joiner.join(value.split()) if joiner else value.strip()
        if name == "UV_INDEX":  # pip weighs all its indexes alike; uv stops at the first
            env.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")
    if no_index(pip) and not env.get("UV_CONFIG_FILE"):
        # uv has no environment variable for --no-index; its configuration file has.
        config = cache_root() / "uv-no-index.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("no-index = true\n\n[pip]\nno-index = true\n")
        env["UV_CONFIG_FILE"] = str(config)
    return env


def no_index(pip):
    """pip's no-index (a machine that installs from find-links folders only)."""
    return (pip.get("no-index") or "").strip().lower() in ("1", "true", "yes", "on")


# --- uv

def wheel_for_platform():
    system = sys.platform if sys.platform != "linux2" else "linux"
    machine = platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64") \
        if system == "linux" else platform.machine().lower()
    libc = ""
    if system == "linux":
        libc = "glibc" if platform.libc_ver()[0] == "glibc" else "musl"
    key = (system, machine, libc)
    if key not in UV_WHEELS:
        raise NoxwError("no pinned uv wheel for %s %s %s; install uv %s yourself and run "
                        "`uvx nox`" % (system, machine, libc or "", UV_VERSION))
    return UV_WHEELS[key]


def ssl_context(pip):
    cafile = pip.get("cert") or os.environ.get("SSL_CERT_FILE") or None
    return ssl.create_default_context(cafile=cafile)


def local_copy(filename, pip):
    for place in (pip.get("find-links") or "").split():
        if place.startswith("file://"):
            place = urllib.parse.unquote(urllib.parse.urlparse(place).path)
        candidate = Path(place) / filename
        if "://" not in place and candidate.is_file():
            return candidate
    return None


def _ask_pip(python, pythonpath=None):
    """The index ``python``'s pip uses by default (its own default: the kit names none), or
    None. ``pythonpath``: a pip wheel to import pip from, installed nowhere."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    try:
        proc = subprocess.run([python, "-c", PIP_DEFAULT_QUERY], capture_output=True,
                              text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    url = proc.stdout.strip()
    return url if proc.returncode == 0 and url.startswith(("https://", "http://")) else None


def _bundled_pip(python):
    """The pip wheel ensurepip carries (importable from the wheel itself), where it has one."""
    query = ("import ensurepip, glob, os; print('\\n'.join(glob.glob(os.path.join("
             "os.path.dirname(ensurepip.__file__), '_bundled', 'pip-*.whl'))))")
    try:
        proc = subprocess.run([python, "-c", query], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    wheels = proc.stdout.split() if proc.returncode == 0 else []
    return wheels[-1] if wheels else None


# The distribution's pip, per package manager (stock Debian and Ubuntu images lack it).
DISTRIBUTION_PIP = (
    ("apt-get", [["apt-get", "update", "-qq"],
                 ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq",
                  "--no-install-recommends", "python3-pip"]]),
    ("dnf", [["dnf", "install", "-y", "-q", "python3-pip"]]),
    ("yum", [["yum", "install", "-y", "-q", "python3-pip"]]),
)


def _as_root():
    """The prefix that runs a command as root without a password ([] as root), or None."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") is None:
        return None
    try:
        asked = subprocess.run(["sudo", "-n", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return ["sudo", "-n"] if asked.returncode == 0 else None


def _install_distribution_pip():
    """The distribution's python3-pip, installed where this user may (root, or sudo with no
    password, as cloud images give their user), said in one line before it runs. Whether it
    installed."""
    prefix = _as_root()
    manager = next(((name, commands) for name, commands in DISTRIBUTION_PIP
                    if shutil.which(name)), None)
    if prefix is None or manager is None:
        return False
    name, commands = manager
    say("no pip here to name the package index: installing the distribution's python3-pip "
        "(%s)" % " && ".join(" ".join(prefix + c) for c in commands))
    for command in commands:
        try:
            proc = subprocess.run(prefix + command, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            say("%s failed (%s)" % (name, exc))
            return False
        if proc.returncode != 0:
            say("%s failed: %s" % (name, " ".join(proc.stdout.split())[-300:]))
            return False
    return True


def pip_default_index():
    """The index pip itself would use here, asked of pip: this python's or python3's, else
    the pip wheel ensurepip carries (nothing installed), else the distribution's pip,
    installed where this user may (stock Debian and Ubuntu images have none). None where no
    pip can be had."""
    pythons = list(dict.fromkeys(p for p in (sys.executable, shutil.which("python3")) if p))
    for python in pythons:
        url = _ask_pip(python)
        if url:
            return url
    for python in pythons:
        wheel = _bundled_pip(python)
        url = _ask_pip(python, wheel) if wheel else None
        if url:
            return url
    if _install_distribution_pip():
        for python in pythons + ["/usr/bin/python3"]:
            url = _ask_pip(python)
            if url:
                return url
    return None


def configured_index(pip):
    return (os.environ.get("ENVBENCH_INDEX_URL") or os.environ.get("UV_DEFAULT_INDEX")
            or os.environ.get("UV_INDEX_URL") or pip.get("index-url"))


def indexes(pip):
    if no_index(pip):
        return []
    named = os.environ.get("ENVBENCH_INDEX_URL")
    if named and not http_url(named):
        # Quoted without its user:password@, which may be a token.
        raise NoxwError("ENVBENCH_INDEX_URL=%r is not an http(s) URL: give the package "
                        "index's simple URL (https://…/simple)"
                        % without_credentials(named[:200]))
    first = configured_index(pip) or pip_default_index()
    extra = (pip.get("extra-index-url") or "").split()
    return [u for u in [first, *extra] if u and http_url(u)]


def credentials(url):
    """``url`` without its user:password@, and the Basic Authorization header they make
    (None without): urllib sends no userinfo, and reads "tok@host" as a host and port."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    pair = "%s:%s" % (urllib.parse.unquote(user), urllib.parse.unquote(password))
    return (urllib.parse.urlunsplit(parts._replace(netloc=host)),
            "Basic " + base64.b64encode(pair.encode()).decode())


def shown(url):
    """``url`` as it may be printed: no user:password@, and only the host (an index's path
    may carry a token)."""
    parts = urllib.parse.urlsplit(credentials(url)[0])
    return "%s://%s/…" % (parts.scheme, parts.netloc)


# What urllib raises for a URL, a connection or an answer it cannot use.
FETCH_ERRORS = (urllib.error.URLError, OSError, ValueError, http.client.HTTPException)


def file_url(index, filename, context):
    """The download URL of ``filename`` in ``index``'s page for uv (PEP 691 JSON, else the
    PEP 503 HTML page)."""
    index, authorization = credentials(index)
    page = index.rstrip("/") + "/uv/"
    headers = {"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"}
    if authorization:
        headers["Authorization"] = authorization
    request = urllib.request.Request(page, headers=headers)
    with urllib.request.urlopen(request, timeout=60, context=context) as response:
        kind = response.headers.get("Content-Type", "")
        body = response.read(8 * 1024 * 1024).decode("utf-8", "replace")
        base = response.geturl()
    if "json" in kind:
        for entry in json.loads(body).get("files", []):
            if entry.get("filename") == filename:
                return urllib.parse.urljoin(base, entry["url"])
    else:
        for href in re.findall(r'href="([^"]+)"', body):
            if urllib.parse.unquote(href.split("#")[0].rsplit("/", 1)[-1]) == filename:
                return urllib.parse.urljoin(base, href.replace("&amp;", "&"))
    return None


def download(url, dest, size, context, authorization=None):
    """``url`` into ``dest``: retried, resumed with a Range request, never past ``size``.
    ``authorization``: the index's, sent only where the file is on the index's own host."""
    part = dest.with_name(dest.name + ".part")
    last = None
    for attempt in range(ATTEMPTS):
        have = part.stat().st_size if part.exists() else 0
        if have > size:
            part.unlink()
            have = 0
        headers = {"Range": "bytes=%d-" % have} if have else {}
        if authorization:
            headers["Authorization"] = authorization
        try:
            request = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(request, timeout=60, context=context) as response:
                if have and response.status != 206:
                    have = 0  # the server sent the whole file again
                with open(part, "ab" if have else "wb") as sink:
                    while True:
                        chunk = response.read(1 << 20)
                        if not chunk:
                            break
                        have += len(chunk)
                        if have > size:
                            raise NoxwError("%s is larger than the pinned %d bytes"
                                            % (shown(url), size))
                        sink.write(chunk)
            if have == size:
                os.replace(str(part), str(dest))
                return
            last = "the connection ended after %d of %d bytes" % (have, size)
        except FETCH_ERRORS as exc:
            last = str(getattr(exc, "reason", exc)).replace(url, shown(url))
        if attempt + 1 < ATTEMPTS:
            say("download interrupted (%s); resuming (attempt %d of %d)"
                % (last, attempt + 2, ATTEMPTS))
            time.sleep(min(2 ** attempt, 10))
    raise NoxwError("could not download %s after %d attempts: %s"
                    % (shown(url), ATTEMPTS, last))


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_uv(pip):
    filename, sha256, size = wheel_for_platform()
    folder = cache_root() / ("uv-%s" % UV_VERSION)
    binary = folder / "uv"
    stamp = folder / "FROM-WHEEL-SHA256"
    if binary.is_file() and stamp.is_file() and stamp.read_text().strip() == sha256:
        return binary
    folder.mkdir(parents=True, exist_ok=True)
    wheel = local_copy(filename, pip)
    if wheel is None:
        wheel = folder / filename
        context = ssl_context(pip)
        url, problems = None, []
        authorization = None
        for index in indexes(pip):
            try:
                url = file_url(index, filename, context)
            except FETCH_ERRORS as exc:
                reason = str(getattr(exc, "reason", exc))
                problems.append("%s: %s" % (shown(index), reason.replace(index, shown(index))
                                            if "@" not in reason else type(exc).__name__))
                continue
            if url:
                bare, header = credentials(index)
                same_host = urllib.parse.urlsplit(url).netloc == urllib.parse.urlsplit(bare).netloc
                authorization = header if same_host else None
                break
            problems.append("%s: no %s" % (shown(index), filename))
        if not url and not problems:
            raise NoxwError("no package index is configured here, and no pip is installed to "
                            "name its default (nor could this user install the "
                            "distribution's python3-pip without a password): set "
                            "ENVBENCH_INDEX_URL to your package index's simple URL (where pip "
                            "would install from) and run again, install python3-pip, or put "
                            "%s in a find-links folder" % filename)
        if not url:
            raise NoxwError("uv %s not found on the package index (%s). Set ENVBENCH_INDEX_URL "
                            "to an index that has it, or put %s in a find-links folder"
                            % (UV_VERSION, "; ".join(problems), filename))
        say("fetching uv %s (%.1f MB)" % (UV_VERSION, size / 1e6))
        download(url, wheel, size, context, authorization)
    actual = sha256_of(wheel)
    if actual != sha256:
        if wheel.parent == folder:
            wheel.unlink()
        raise NoxwError("%s has sha256 %s, not the pinned %s: refused" % (filename, actual,
                                                                          sha256))
    member = "uv-%s.data/scripts/uv" % UV_VERSION
    with zipfile.ZipFile(str(wheel)) as archive, \
            tempfile.NamedTemporaryFile(dir=str(folder), delete=False) as out:
        with archive.open(member) as source:
            shutil.copyfileobj(source, out)
    os.chmod(out.name, 0o755)
    os.replace(out.name, str(binary))
    stamp.write_text(sha256 + "\n")
    if wheel.parent == folder:
        wheel.unlink()
    return binary


# --- nox

def python_for_nox():
    """This interpreter where it is >= 3.10, else a version request for uv to satisfy."""
    return sys.executable if sys.version_info >= (3, 10) else ">=3.10"


def ensure_nox(uv, env):
    locked = REQUIREMENTS.read_bytes()
    python = python_for_nox()
    key = hashlib.sha256(locked + python.encode()).hexdigest()[:16]
    venv = cache_root() / ("nox-%s" % key)
    nox = venv / "bin" / "nox"
    marker = venv / "COMPLETE"
    if nox.exists() and marker.exists():
        return nox
    say("installing nox (bootstrap/noxw-requirements.txt, hashes checked) for Python %s"
        % ("%d.%d" % sys.version_info[:2] if python == sys.executable else python))
    # The lock pins every version and hash: constraints meant for other installs (pip.conf's,
    # say) would only make --require-hashes refuse it.
    env = {k: v for k, v in env.items() if k not in ("UV_CONSTRAINT", "UV_OVERRIDE")}
    for command in ([str(uv), "venv", "--quiet", "--clear", "--python", python, str(venv)],
                    [str(uv), "pip", "install", "--quiet", "--python",
                     str(venv / "bin" / "python"), "--require-hashes", "-r",
                     str(REQUIREMENTS)]):
        proc = subprocess.run(command, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        if proc.returncode != 0:
            tail = " ".join(proc.stdout.split())[-600:]
            hint = ""
            if python != sys.executable and "download" in tail.lower():
                hint = (" (this python3 is %d.%d; install Python >= 3.10, or allow uv to "
                        "download one: unset UV_PYTHON_DOWNLOADS)" % sys.version_info[:2])
            raise NoxwError("`uv %s` failed: %s%s" % (command[1], tail, hint))
    marker.write_text("ok\n")
    return nox


def main(argv):
    # ./noxw chose a python3 >= 3.8 (vermin checks this file against 3.8 in `./noxw -s tests`).
    pip = pip_settings(warn=say)  # no pip needed to read it: a stock VM has none
    folder = cache_root()
    folder.mkdir(parents=True, exist_ok=True)
    # One set-up at a time: two ./noxw started together share the cache.
    with open(str(folder / ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            uv = ensure_uv(pip)
            env = uv_environment(pip)
            nox = ensure_nox(uv, env)
        except NoxwError as exc:
            print("noxw: %s" % exc, file=sys.stderr)
            return 1
    # nox finds uv on PATH; its sessions' venvs are uv's (no ensurepip, no pip needed).
    env["PATH"] = str(uv.parent) + os.pathsep + env.get("PATH", "")
    os.chdir(str(ROOT))
    args = [str(nox), "--default-venv-backend", "uv", *argv]
    os.execve(str(nox), args, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
