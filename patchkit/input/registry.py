"""Where patch folders and waivers live, and how a PATCH argument becomes a PatchSpec.

Precedence for the patches folder: `--patches DIR`, then env PATCHKIT_PATCHES, then `[tool.patchkit] patches`
in the nearest pyproject.toml (walking up from the current directory), then `./patches`. The waivers folder
follows the same order with `--waivers`, PATCHKIT_WAIVERS and `[tool.patchkit] waivers`, default `./waivers`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from patchkit.display import closest
from patchkit.errors import RegistryError
from patchkit.input.limits import MAX_NAME_BYTES, MAX_PATCH_ID_CHARS, MAX_PATH_BYTES
from patchkit.input.manifest import MANIFEST_NAME, PatchSpec, load_manifest, quote_short
from patchkit.input.tomlcompat import tomllib


class Locations(NamedTuple):  # immutable and compared by value, ~5x cheaper to create than a frozen dataclass
    """The registry folders a run uses: the patches and the waivers."""

    patches: Path
    waivers: Path


def find_locations(patches: str | None = None, waivers: str | None = None, cwd: Path | None = None) -> Locations:
    """Resolve the registry folders from options, environment and pyproject.toml, in that order."""
    here = cwd or Path.cwd()
    project = find_project_config(here)
    config, config_dir = project.table, project.root

    def pick(option: str | None, env: str, key: str, default: str) -> Path:
        if option:
            return Path(option)
        if os.environ.get(env):
            return Path(os.environ[env])
        value = config.get(key)
        if value is not None:
            if not isinstance(value, str):
                raise RegistryError(
                    f"[tool.patchkit] {key} must be a string path", where=str(config_dir / "pyproject.toml")
                )
            return project_path(project, key, value)
        return here / default

    return Locations(
        patches=pick(patches, "PATCHKIT_PATCHES", "patches", "patches"),
        waivers=pick(waivers, "PATCHKIT_WAIVERS", "waivers", "waivers"),
    )


MAX_PROJECT_BYTES = 4 << 20  # a pyproject.toml is a few KiB


class ProjectConfig(NamedTuple):  # a NamedTuple, as Locations
    """The nearest pyproject.toml's `[tool.patchkit]` table and the folder it is in (the project root)."""

    root: Path
    table: Mapping[str, object]
    source: Path | None  # the pyproject.toml, None when there is none


def project_path(project: ProjectConfig, key: str, value: str) -> Path:
    """`[tool.patchkit] key = value` as a path under the project root, refused (exit 2) when it leaves it.

    The repository's own pyproject.toml is input like any other (lint runs on forks' pull requests): an
    absolute path, a `..` or a link out of the project would make patchkit read or write another folder of
    the machine. Checked on the path as written and once links are resolved."""
    path = project.root / value
    root = project.root.resolve()
    lexical = Path(os.path.normpath(os.path.abspath(path)))
    if Path(value).is_absolute() or not lexical.is_relative_to(Path(os.path.abspath(project.root))):
        why = "is outside"
    elif not path.resolve().is_relative_to(root):
        why = f"is a link to {path.resolve()}, outside"
    else:
        return path
    raise RegistryError(
        f"[tool.patchkit] {key} = {value!r} {why} the project {project.root}; patchkit reads and writes only "
        "inside it", where=str(project.source or project.root / "pyproject.toml"),
        hint=f"give {key} as a path relative to the folder of pyproject.toml, inside it, or pass the option "
        "on the command line",
    )


def find_project_config(start: Path) -> ProjectConfig:
    """The one reader of `[tool.patchkit]`, for the registry locations and for lint's scan settings."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        try:
            found = candidate.is_file()
        except OSError as exc:  # a folder on the way this user cannot search (a private 0700 home)
            raise RegistryError(f"cannot read pyproject.toml: {exc.strerror}", where=str(candidate)) from None
        if found:
            real = candidate.resolve()
            if not real.is_relative_to(folder.resolve()):  # a repository's file, a link out of it: not read
                raise RegistryError(
                    f"pyproject.toml is a link to {real}, outside its folder; patchkit reads nothing through it",
                    where=str(candidate), hint="replace the link by the file itself",
                )
            try:
                with real.open("rb") as handle:
                    raw = handle.read(MAX_PROJECT_BYTES + 1)  # bounded: sized by reading at most this much
                if len(raw) > MAX_PROJECT_BYTES:
                    raise ValueError(f"over the limit of {MAX_PROJECT_BYTES >> 20} MiB")
                data = tomllib.loads(raw.decode("utf-8"))
            except (OSError, ValueError, RecursionError) as exc:  # TOMLDecodeError, int digit limit, deep nesting
                raise RegistryError(f"cannot read pyproject.toml: {exc}", where=str(candidate)) from None
            tool = data.get("tool", {})
            section = tool.get("patchkit", {}) if isinstance(tool, dict) else {}
            if not isinstance(section, dict):
                raise RegistryError("[tool.patchkit] must be a table", where=str(candidate))
            return ProjectConfig(folder, section, candidate)
    return ProjectConfig(start, {}, None)


def resolve_patch(arg: str, patches_dir: Path) -> PatchSpec:
    """PATCH is a folder holding manifest.toml, a manifest.toml path, or an id inside the registry."""
    check_patch_arg(arg, patches_dir)
    as_path = Path(arg)
    if as_path.name == MANIFEST_NAME and as_path.is_file():
        return load_manifest(as_path.parent.resolve())
    if (as_path / MANIFEST_NAME).is_file() and (os.sep in arg or arg.startswith(".")):
        return load_manifest(as_path.resolve())
    if "/" in arg or os.sep in arg or arg in ("", ".", ".."):
        raise RegistryError(f"{arg!r} is not a patch folder (no {MANIFEST_NAME} in it)", where=arg)
    folder = patches_dir / arg
    if (folder / MANIFEST_NAME).is_file():
        return load_manifest(folder.resolve())
    check_registry_folder(patches_dir)
    if folder.is_dir():
        raise RegistryError(
            f"the folder of patch {arg!r} has no {MANIFEST_NAME}, so it is not a patch", where=str(folder.absolute()),
            hint=f"a patch folder holds {MANIFEST_NAME} and its diff: restore its {MANIFEST_NAME} (e.g. from version "
            "control), or move the folder out of the registry",
        )
    ids = list_patch_ids(patches_dir)
    close = closest(arg, ids)
    known = ", ".join(ids) or "none"
    raise RegistryError(
        f"no patch {arg!r} in the registry {patches_dir}" + (f"; did you mean {close!r}?" if close else ""),
        hint=f"known patches: {known}; pass --patches DIR or set PATCHKIT_PATCHES to use another registry",
    )


def check_patch_arg(arg: str, patches_dir: Path) -> None:
    """Refuse a PATCH argument no file system could hold, before it is looked up (ENAMETOOLONG is no answer)."""
    if "/" not in arg and os.sep not in arg and len(arg) > MAX_PATCH_ID_CHARS:
        raise RegistryError(
            f"{quote_short(arg)} is not a patch id: it is {len(arg)} characters long, and a patch id may have at "
            f"most {MAX_PATCH_ID_CHARS}",
            hint=f"`patchkit list --patches {_shell_word(str(patches_dir))}` shows the patches",
        )
    names = [len(os.fsencode(part)) for part in arg.split("/")]
    if len(os.fsencode(arg)) > MAX_PATH_BYTES or max(names) > MAX_NAME_BYTES:
        raise RegistryError(
            f"{quote_short(arg)} is not a patch folder: a path may have at most {MAX_PATH_BYTES} bytes and each "
            f"name in it {MAX_NAME_BYTES}",
            hint=f"pass a patch id or folder; `patchkit list --patches {_shell_word(str(patches_dir))}` shows "
            "the patches",
        )


def _shell_word(text: str) -> str:
    """`text` as one word of a shell command, as shlex.quote makes it (status must not load shlex)."""
    return text if re.fullmatch(r"[\w@%+=:,./-]+", text, re.ASCII) else "'" + text.replace("'", "'\"'\"'") + "'"


def list_patch_ids(patches_dir: Path) -> list[str]:
    if not patches_dir.is_dir():
        return []
    return sorted(p.name for p in patches_dir.iterdir() if (p / MANIFEST_NAME).is_file())


def load_registry(patches_dir: Path) -> list[PatchSpec]:
    """Every patch in the registry, sorted by id. A missing folder is an error: it is usually a typo."""
    check_registry_folder(patches_dir)
    return [load_manifest((patches_dir / pid).resolve()) for pid in list_patch_ids(patches_dir)]


REGISTRY_HINT = (
    "pass --patches DIR (the folder holding one folder per patch), set PATCHKIT_PATCHES, or set "
    "[tool.patchkit] patches in pyproject.toml"
)


def check_registry_folder(patches_dir: Path) -> None:
    """The registry must be a folder. Missing, it is usually a typo or the wrong working folder: say so, with
    the path (absolute: a relative default is relative to a folder the user may not know they are in)."""
    where = str(patches_dir.absolute())
    try:
        if patches_dir.is_dir():
            return
        exists = patches_dir.exists()
    except OSError as exc:  # e.g. a folder on the way that cannot be searched
        raise RegistryError(
            f"cannot read the patches folder: {exc.strerror}", where=where, hint=REGISTRY_HINT
        ) from None
    what = "the patches folder is a file, not a folder" if exists else "the patches folder does not exist"
    raise RegistryError(what, where=where, hint=REGISTRY_HINT)


def stray_folders(patches_dir: Path) -> list[Path]:
    """Folders of the registry that look like patches and are not (no manifest.toml): `list` warns of them.
    Hidden ones (`.git`, patchkit's own staging folders) are not looked at."""
    try:
        entries = sorted(patches_dir.iterdir())
    except OSError:
        return []
    return [p for p in entries if not p.name.startswith(".") and p.is_dir() and not (p / MANIFEST_NAME).exists()]
