"""Corpus manifests (TOML, one per project): a pinned source, tier, build system, the artifacts a strict success must
contain, and an optional functional check under qemu. Debian sources are verified against the pinned .dsc checksum
and the checksums the .dsc lists: a missing or changed source is an error, never a silent skip."""

from __future__ import annotations

import hashlib
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from crossbuild.env import workspace
from crossbuild.foundation import host


class FunctionalCheck(BaseModel):
    model_config = {"extra": "forbid"}
    program: str = Field(description="Glob of the program (relative to the output folder or workspace).")
    args: list[str] = Field(default_factory=list)
    expect_exit: int = 0
    expect_output: str | None = Field(None, description="Regular expression the output must match.")


class Project(BaseModel):
    model_config = {"extra": "forbid"}
    name: str
    source: str  # debian:NAME=VERSION, or a folder relative to the manifest
    version: str = ""
    dsc_sha256: str | None = None
    tier: Literal["easy", "medium", "hard"]
    build_system: str
    language: str = "C"
    expected: list[str] = Field(min_length=1, description="Globs of artifact file names a strict success needs.")
    functional: FunctionalCheck | None = None
    needs: list[str] = Field(default_factory=list, description="Dependencies it needs cross-built first.")
    notes: str = ""
    manifest: Path | None = None

    def source_spec(self) -> str:
        if self.source.startswith("debian:") or self.manifest is None:
            return self.source
        return str((self.manifest.parent / self.source).resolve())


class CorpusError(ValueError):
    """The corpus cannot be used as asked; the message says which project and why."""


def load(path: str | Path, only: list[str] | None = None) -> list[Project]:
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path} does not exist: give a corpus folder of project manifests (*.toml) or one manifest")
    files = sorted(path.glob("*.toml")) if path.is_dir() else [path]
    if not files:
        raise CorpusError(f"no manifests (*.toml) in {path}")
    projects = []
    for f in files:
        try:
            p = Project(**tomllib.loads(f.read_text()), manifest=f.resolve())
        except (tomllib.TOMLDecodeError, ValueError, UnicodeDecodeError, OSError) as e:
            raise CorpusError(f"{f}: {e}") from None
        projects.append(p)
    names = [p.name for p in projects]
    if len(set(names)) != len(names):
        raise CorpusError(f"duplicate project names in {path}")
    if only:
        missing = sorted(set(only) - set(names))
        if missing:
            raise CorpusError(f"no such projects in {path}: {', '.join(missing)}")
        projects = [p for p in projects if p.name in only]
    return projects


def dsc_path(name: str, version: str) -> Path | None:
    cache = host.cache_root() / "debian-src" / f"{name}_{version}"
    found = sorted(cache.glob("*.dsc")) if cache.exists() else []
    return found[-1] if found else None


def fetch(project: Project) -> Path:
    """Download (once, cached) and verify a pinned Debian source; returns its .dsc."""
    if not project.source.startswith("debian:"):
        return Path(project.source_spec())
    spec = project.source.removeprefix("debian:")
    name, _, version = spec.partition("=")
    if not version:
        raise CorpusError(f"{project.name}: pin the Debian version (debian:{name}=VERSION)")
    dsc = dsc_path(name, version)
    if dsc is None:
        host.cache_root().mkdir(parents=True, exist_ok=True)
        # a scratch folder of this process's own: two evaluations may fetch the same project at once
        with tempfile.TemporaryDirectory(prefix="fetch-", dir=host.cache_root()) as tmp:
            try:
                workspace.prepare(project.source, Path(tmp) / name)  # downloads into the shared cache, then unpacks
            except workspace.SourceError as e:
                raise CorpusError(f"{project.name}: pinned source {project.source} is not available: {e}") from None
        dsc = dsc_path(name, version)
        if dsc is None:
            raise CorpusError(f"{project.name}: {project.source} downloaded no .dsc")
    verify_dsc(project, dsc)
    return dsc


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_dsc(project: Project, dsc: Path) -> None:
    if project.dsc_sha256 and sha256(dsc) != project.dsc_sha256:
        raise CorpusError(f"{project.name}: {dsc.name} changed (sha256 {sha256(dsc)[:16]}..., manifest pins "
                          f"{project.dsc_sha256[:16]}...): the archive now serves different content")
    text = dsc.read_text(errors="replace")
    block = re.search(r"^Checksums-Sha256:\n((?: .+\n?)+)", text, re.MULTILINE)
    if not block:
        raise CorpusError(f"{project.name}: {dsc.name} lists no SHA-256 checksums")
    for line in block.group(1).splitlines():
        digest, _, fname = line.split()
        f = dsc.parent / fname
        if not f.is_file():
            raise CorpusError(f"{project.name}: {fname} (listed in {dsc.name}) is missing from the cache")
        if sha256(f) != digest:
            raise CorpusError(f"{project.name}: {fname} does not match the checksum in {dsc.name}")
