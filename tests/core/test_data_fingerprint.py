"""``lra.data_fingerprint``: a fingerprint covers the data, never a file a reader makes (issue 52,
item 4). A copy staged the way a cluster stages data to a node (new mtimes, another path, no cache,
a killed writer's temporary) has the original's fingerprint before and after a read; every task
declares the files its reader writes; a fingerprint recorded before the change (Pathfinder's
``decoded/`` cache hashed with the images) still matches the data it was made on."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest
from helpers import TINY_LISTOPS_OPTIONS
from lra.tasks import pathfinder

from lra import data_fingerprint, tasks

NUM_IMAGES = 20
FOLDER = Path("pathfinder") / "pathfinder32" / "curv_contour_length_14"


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """A data directory with 20 generated Pathfinder-32 images, never read (no ``decoded/``)."""
    data = tmp_path_factory.mktemp("fp") / "data"
    pathfinder.generate(data / FOLDER.parent, num_images=NUM_IMAGES, workers=1, progress=False)
    return data


def staged(src: Path, dest: Path) -> Path:
    """``src`` copied as a cluster stages data to a node: new mtimes (times not preserved), the
    reader's cache and the digest cache left behind."""
    shutil.copytree(src, dest, copy_function=shutil.copyfile)
    shutil.rmtree(dest / FOLDER / "decoded", ignore_errors=True)
    (dest / data_fingerprint.CACHE_FILE).unlink(missing_ok=True)
    return dest


def task(data: Path):
    return tasks.build("pathfinder", data, num_images=NUM_IMAGES)


def fingerprint(data: Path) -> dict:
    return data_fingerprint.fingerprint(task(data).provenance(), data)


def read(data: Path) -> None:
    for split in ("train", "val", "test"):
        task(data).source(split)


def test_a_staged_copy_has_the_fingerprint_of_the_original_before_and_after_a_read(images, tmp_path):
    """Fails on main: the read's decoded/0.npz (whose bytes hold the metadata file's mtime) entered
    the folder's digest, so the copy differed from the original after a read, and either from
    itself before one."""
    original = staged(images, tmp_path / "original")
    before = fingerprint(original)
    read(original)
    assert (original / FOLDER / "decoded" / "0.npz").is_file()
    assert fingerprint(original) == before
    copy = staged(original, tmp_path / "node")
    (copy / FOLDER / "imgs" / "0" / ".sample_3.png.4242.tmp").write_bytes(b"half a png")  # killed writer
    assert fingerprint(copy) == before
    read(copy)
    assert fingerprint(copy) == before
    # what is hashed: the PNGs, metadata/0.npy and generator.json
    assert before["files"][FOLDER.as_posix()]["count"] == NUM_IMAGES + 2


def test_a_changed_image_still_changes_the_fingerprint(images, tmp_path):
    copy = staged(images, tmp_path / "copy")
    before = fingerprint(copy)
    png = copy / FOLDER / "imgs" / "0" / "sample_0.png"
    png.write_bytes(png.read_bytes()[:-1] + b"\0")
    now = fingerprint(copy)
    assert "same size, sha256" in data_fingerprint.difference(before, now)


def _as_recorded_before(data: Path) -> dict:
    """The fingerprint lra recorded before 2026-12-06: every file of the folder hashed, the reader's
    cache included (written out here, independently of the module)."""
    folder, h, total, count = data / FOLDER, hashlib.sha256(), 0, 0
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        rel = p.relative_to(folder).as_posix()
        h.update(f"{rel}\0{p.stat().st_size}\0{hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
        total, count = total + p.stat().st_size, count + 1
    files = {FOLDER.as_posix(): {"bytes": total, "sha256": h.hexdigest(), "count": count}}
    generator = task(data).provenance().generator
    return {"sha256": data_fingerprint.digest(files, generator), "files": files, "generator": generator}


def test_a_fingerprint_recorded_with_the_cache_still_matches_its_data(images, tmp_path):
    """A result or checkpoint made before the change (its fingerprint hashed decoded/) resumes,
    evaluates and counts as done on the same folder; on changed images it is still refused.
    Fails on main in its first assert (main's fingerprint is the old one)."""
    data = staged(images, tmp_path / "data")
    read(data)
    old = _as_recorded_before(data)
    now = fingerprint(data)
    assert now["sha256"] != old["sha256"]
    assert data_fingerprint.difference(old, now) is None
    assert data_fingerprint.difference(old, fingerprint(data), absent_ok_if_generated=True) is None
    assert json.loads(json.dumps(now)) == dict(now)  # recorded as a plain dict
    node = staged(data, tmp_path / "node")  # the copy's read writes a decoded/ of other bytes
    read(node)
    assert "recorded before 2026-12-06 it also hashed the reader's cache" in data_fingerprint.difference(
        old, fingerprint(node))
    png = data / FOLDER / "imgs" / "0" / "sample_0.png"
    png.write_bytes(png.read_bytes()[:-1] + b"\0")
    assert data_fingerprint.difference(old, fingerprint(data)).startswith(f"{FOLDER.as_posix()}: ")


# ----------------------------------------------------------------------------------------------
# Every task declares what its reader writes


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != data_fingerprint.CACHE_FILE}


def _listops(data: Path, tiny_listops: Path):
    shutil.copytree(tiny_listops / "data", data, copy_function=shutil.copyfile)
    for cache in data.rglob("*.npz"):
        cache.unlink()
    return tasks.build("listops", data, **TINY_LISTOPS_OPTIONS)


def _retrieval(data: Path, tiny_listops: Path):
    (data / "retrieval").mkdir(parents=True)
    for name in ("new_aan_pairs.train.tsv", "new_aan_pairs.eval.tsv", "new_aan_pairs.test.tsv"):
        (data / "retrieval" / name).write_bytes(b"1\tA\tB\tsome text\tother text\n"
                                                b"0\tC\tD\tmore\ttext\n")
    return tasks.build("retrieval", data, max_length=16)


def _pathfinder(data: Path, tiny_listops: Path, images: Path):
    staged(images, data)
    return task(data)


@pytest.mark.parametrize("make", [_listops, _retrieval, _pathfinder], ids=["listops", "retrieval",
                                                                           "pathfinder"])
def test_every_file_a_reader_writes_is_declared_derived(make, tmp_path, tiny_listops, request):
    """Fails on main: Provenance had no ``derived``, and Pathfinder's decoded/ was hashed."""
    data = tmp_path / "data"
    extra = (request.getfixturevalue("images"),) if make is _pathfinder else ()
    t = make(data, tiny_listops, *extra)
    before = _files(data)
    with contextlib.redirect_stderr(io.StringIO()):
        t.prepare()
        for split in ("train", "val", "test"):
            t.source(split)
    written = sorted(rel for rel, digest in _files(data).items() if before.get(rel) != digest)
    derived = [Path(d).as_posix() for d in t.provenance().derived]
    assert written, "the reader wrote no cache: nothing is tested"
    for rel in written:
        assert any(rel == d or rel.startswith(d + "/") for d in derived), (rel, derived)
    assert fingerprint_of(t, data) == fingerprint_of(make(tmp_path / "again", tiny_listops, *extra),
                                                     tmp_path / "again")


def fingerprint_of(t, data: Path) -> str:
    return data_fingerprint.fingerprint(t.provenance(), data)["sha256"]
