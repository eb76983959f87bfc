"""The CIFAR-10 download path, against a local archive: md5 checked, nothing corrupt kept."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from cifar_fixture import write_cifar

from bench import datasets as data
from envbench.cells import dataset
from envbench.user_errors import UserError


@pytest.fixture
def archive(tmp_path) -> Path:
    write_cifar(str(tmp_path / "src"), per_batch=20, test_count=20)
    path = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(str(tmp_path / "src" / dataset.FOLDER), arcname=dataset.FOLDER)
    return path


def test_fetch_downloads_checks_md5_and_unpacks(tmp_path, archive):
    out = io.StringIO()
    root = dataset.fetch(tmp_path / "cache", url=archive.as_uri(), md5=dataset.md5sum(archive),
                         out=out)
    assert dataset.is_ready(root)
    (train_x, _), (test_x, _) = data.load_cifar(str(root))
    assert len(train_x) == 100 and len(test_x) == 20
    assert "100.0%" in out.getvalue()  # the progress bar reached the end
    again = io.StringIO()
    dataset.fetch(tmp_path / "cache", url="file:///nowhere", md5="0", out=again)
    assert "downloading" not in again.getvalue()  # cached: no second download


def test_a_wrong_md5_is_refused_and_nothing_is_kept(tmp_path, archive):
    cache = tmp_path / "cache"
    with pytest.raises(UserError, match="md5 .* expected 0123"):
        dataset.fetch(cache, url=archive.as_uri(), md5="0123", out=io.StringIO())
    # Nothing but the (empty) lock that keeps two downloads from racing.
    assert not dataset.is_ready(cache) and [p.name for p in cache.iterdir()] == [".fetch.lock"]
    assert (cache / ".fetch.lock").stat().st_size == 0


def test_an_unreachable_source_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match=r"downloading file:///no/such/file.tar.gz failed .* "
                                        r"Offline: put cifar-10-python.tar.gz \(md5 [0-9a-f]+\) "
                                        r"at .*cifar-10-python.tar.gz and run again"):
        dataset.fetch(tmp_path, url="file:///no/such/file.tar.gz", out=io.StringIO())


def test_the_data_digest_names_the_data_set(tmp_path):
    one = Path(write_cifar(str(tmp_path / "one"), per_batch=20, test_count=20))
    same = Path(write_cifar(str(tmp_path / "same"), per_batch=20, test_count=20))
    assert dataset.digest(one) == dataset.digest(same)
    test_batch = one / dataset.FOLDER / "test_batch"
    raw = bytearray(test_batch.read_bytes())
    raw[-20] ^= 1  # one bit of one image
    test_batch.write_bytes(bytes(raw))
    assert dataset.digest(one) != dataset.digest(same)


def test_two_fetches_at_once_download_once_and_both_get_the_data(tmp_path, archive):
    """Two runs starting together (two processes: flock is per open file) on one cache."""
    import subprocess
    import sys
    script = ("import sys; from pathlib import Path; from envbench.cells import dataset; "
              "dataset.fetch(Path(sys.argv[1]), url=sys.argv[2], md5=sys.argv[3])")
    args = [str(tmp_path / "cache"), archive.as_uri(), dataset.md5sum(archive)]
    runs = [subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert sum(out.count("downloading ") for out in outputs) == 1, outputs
    assert all("CIFAR-10 is in %s" % (tmp_path / "cache") in out for out in outputs)
    assert dataset.is_ready(tmp_path / "cache")
