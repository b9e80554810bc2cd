"""`patchkit new`: a new patch folder from the commented manifest template shipped in the package.

The template (patchkit/templates/manifest.toml, package data read with importlib.resources) is filled in,
checked by load_manifest exactly as any manifest is, and only then moved into the registry under its id, so a
bad argument leaves nothing behind. An id that exists is refused. Writes only inside the patches folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import string
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from patchkit.errors import BadInputError, ManifestError, RegistryError
from patchkit.input.manifest import MANIFEST_NAME, PatchSpec, load_manifest, patch_id_problem, quote_short

TEMPLATE = "templates/manifest.toml"


@dataclass(frozen=True)
class NewPatch:
    """What `patchkit new` is asked to create."""

    id: str
    target: str
    title: str | None = None
    repo: str | None = None
    prs: tuple[str, ...] = ()  # each a number (a PR of repo) or owner/repo#N
    local_reason: str | None = None  # origin = "local": no upstream PR
    diff_name: str | None = None
    introduced_by: int | None = None
    prefix: str | None = None  # prefix = "..." (where the diff's paths live under the root)
    paths: tuple[tuple[str, str], ...] = ()  # [paths] "from/" = "to/"
    after: tuple[str, ...] = ()


def read_template() -> str:
    return resources.files("patchkit").joinpath(TEMPLATE).read_text(encoding="utf-8")


def render_manifest(new: NewPatch, vendor_hint: str) -> str:
    """The template with the values filled in (TOML strings quoted). Pure; load_manifest checks the result."""
    q = json.dumps  # a JSON string of plain text is a valid TOML basic string
    if new.local_reason is not None:
        upstream = [
            "# A local fix: no upstream PR exists. The waiver must say so, and why.",
            'origin = "local"',
            f"reason = {q(new.local_reason)}",
            f"repo = {q(new.repo)}" if new.repo else '# repo = "owner/name"   # the repository it patches',
        ]
    else:
        upstream = ["# Where the fix comes from. The waiver must cite every PR (a link, or owner/repo#N)."]
        upstream.append(f"repo = {q(new.repo or '')}")
        numbers = [_toml_pr(p) for p in new.prs]
        one = len(numbers) == 1 and numbers[0].isdigit()
        upstream.append(f"pr = {numbers[0]}" if one else f"prs = [{', '.join(numbers)}]")
    waiver = f"[waiver]\nintroduced_by = {new.introduced_by}\n" if new.introduced_by else (
        "# [waiver]\n# introduced_by = 1234\n")
    placement = f"prefix = {q(new.prefix)}\n" if new.prefix else '# prefix = "aiter_meta/"\n'
    if new.after:
        placement = f"after = [{', '.join(q(a) for a in new.after)}]\n" + placement
    folders = "".join(f"{q(a)} = {q(b)}\n" for a, b in new.paths)
    values = {
        "placement": placement,
        "paths": f"[paths]\n{folders}" if folders else '# [paths]\n# "csrc/" = "aiter_meta/csrc/"\n',
        "id": q(new.id),
        "title": q(new.title or new.id),
        "diff": q(new.diff_name or f"{new.id}.diff"),
        "target": q(new.target),
        "upstream": "\n".join(upstream) + "\n",
        "waiver": waiver,
        "vendor_hint": vendor_hint,
    }
    return string.Template(read_template()).substitute(values)


def _toml_pr(text: str) -> str:
    return text if text.isdigit() else json.dumps(text)


def create_patch(patches_dir: Path, new: NewPatch) -> PatchSpec:
    """Write `<patches>/<id>/manifest.toml` from the template; refuse an id that exists or a bad value."""
    problem = patch_id_problem(new.id)
    if problem is not None:
        raise BadInputError(
            f"{quote_short(new.id)} is not a patch id: it {problem}",
            hint="for example: patchkit new vllm-pr12345 --target vllm --repo vllm-project/vllm --pr 12345",
        )
    if new.local_reason is None and (not new.repo or not new.prs):
        raise BadInputError(
            "an upstream patch needs --repo OWNER/NAME and at least one --pr",
            hint='or, for a fix with no upstream PR, --local "why no upstream PR exists"',
        )
    if new.local_reason is not None and new.prs:
        raise BadInputError("--local and --pr exclude each other: a local patch has no upstream PR")
    if not patches_dir.is_dir():
        raise RegistryError(
            "the patches folder does not exist", where=str(patches_dir),
            hint="create it, or pass --patches DIR / set PATCHKIT_PATCHES",
        )
    final = patches_dir / new.id
    if final.exists() or final.is_symlink():
        raise RegistryError(
            f"patch {new.id!r} exists already", where=str(final),
            hint=f"pick another id, or re-vendor it: patchkit vendor {new.id} --from SOURCE",
        )
    hint = f"patchkit vendor {new.id} --patches {patches_dir} --from SOURCE   (or --from-git REPO --range A..B)"
    text = render_manifest(new, hint)
    staging = Path(tempfile.mkdtemp(prefix=".patchkit-new-", dir=patches_dir))
    try:
        folder = staging / new.id
        folder.mkdir()
        (folder / MANIFEST_NAME).write_text(text, encoding="utf-8")
        try:
            load_manifest(folder)  # the same checks as every manifest: a bad --repo or --pr fails here
        except ManifestError as exc:  # the rendered file is ours, not the user's: name the options instead
            raise BadInputError(
                exc.message, hint=exc.hint or "check --repo, --pr, --local, --target and --title"
            ) from None
        os.rename(folder, final)  # refuses (ENOTEMPTY / EEXIST) if someone made it meanwhile, unless empty
    except OSError as exc:
        raise RegistryError(f"cannot create the patch folder: {exc.strerror}", where=str(final)) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return load_manifest(final.resolve())


def remove_new_patch(spec: PatchSpec) -> None:
    """Undo create_patch after a failed vendor in the same step: the folder is this run's, so are its files
    (the manifest and the diff; vendor removes its own temporary copies); anything else keeps the folder."""
    for path in (spec.manifest_path, spec.diff_path):
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        spec.folder.rmdir()
