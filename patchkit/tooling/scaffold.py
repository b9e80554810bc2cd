"""`patchkit new`: a new patch folder from the commented manifest template shipped in the package.

The template (patchkit/templates/manifest.toml, package data read with importlib.resources) is filled in,
checked by load_manifest exactly as any manifest is, and only then moved into the registry under its id, so a
bad argument leaves nothing behind. An id that exists is refused. Writes only inside the patches folder.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import string
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from patchkit.errors import BadInputError, ManifestError, RegistryError
from patchkit.input.excludes import Exclude
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
    strip: int = 1
    excludes: tuple[Exclude, ...] = ()  # --exclude PATH=REASON, --hunks PATH:N,M=REASON
    waivers: str = "waivers"  # the configured waivers folder, as the template names it
    moved_in: int | None = None  # [waiver] moved_in: the PR moving an already waived patch here
    patches_shown: str | None = None  # the patches folder as the template's comment names it (project-relative)


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
    moved = f"moved_in = {new.moved_in}\n" if new.moved_in else ""
    waiver = f"[waiver]\nintroduced_by = {new.introduced_by}\n{moved}" if new.introduced_by else (
        "# [waiver]\n# introduced_by = 1234\n")
    placement = f"prefix = {q(new.prefix)}\n" if new.prefix else '# prefix = "aiter_meta/"\n'
    if new.after:
        placement = f"after = [{', '.join(q(a) for a in new.after)}]\n" + placement
    folders = "".join(f"{q(a)} = {q(b)}\n" for a, b in new.paths)
    excludes = "".join(
        f"{q(e.pattern)} = {q(e.reason)}\n" if e.hunks is None
        else f"{q(e.pattern)} = {{ hunks = [{', '.join(str(n) for n in e.hunks)}], reason = {q(e.reason)} }}\n"
        for e in new.excludes
    )
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
        "strip": str(new.strip),
        "excludes": excludes,
        "waivers": new.waivers.replace("$", "$$"),
    }
    return string.Template(read_template()).substitute(values)


def _toml_pr(text: str) -> str:
    return text if text.isdigit() else json.dumps(text)


def create_patch(patches_dir: Path, new: NewPatch, *, create_registry: bool = False) -> PatchSpec:
    """Write `<patches>/<id>/manifest.toml` from the template; refuse an id that exists or a bad value. With
    create_registry, a missing patches folder is created once the values are checked."""
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
    if len({e.pattern for e in new.excludes}) != len(new.excludes):
        raise BadInputError("an exclude is given twice", hint="one --exclude or --hunks per path")
    if create_registry:
        ensure_registry(patches_dir)  # only now: a bad argument above leaves no empty registry folder behind
    if not patches_dir.is_dir():
        raise RegistryError(
            "the patches folder does not exist", where=str(patches_dir),
            hint="create it, or pass --patches DIR / set PATCHKIT_PATCHES",
        )
    final = patches_dir / new.id
    if final.exists() or final.is_symlink():
        raise RegistryError(
            f"patch {new.id!r} exists already", where=str(final),
            hint=f"pick another id, or re-vendor it: patchkit vendor {new.id} --patches "
            f"{shlex.quote(os.path.abspath(patches_dir))} --from SOURCE",
        )
    shown = new.patches_shown or str(patches_dir)
    hint = f"patchkit vendor {new.id} --patches {shown} --from SOURCE   (or --from-git REPO --range A..B)"
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


def ensure_registry(patches_dir: Path) -> bool:
    """Create the patches folder (and its missing parents) for a first `new`; True when it was created."""
    if patches_dir.is_dir():
        return False
    if patches_dir.exists() or patches_dir.is_symlink():
        raise RegistryError("the patches folder is not a folder", where=str(patches_dir),
                            hint="pass --patches DIR / set PATCHKIT_PATCHES to the registry folder")
    try:
        patches_dir.mkdir(parents=True)
    except OSError as exc:
        raise RegistryError(f"cannot create the patches folder: {exc.strerror}", where=str(patches_dir)) from None
    return True


def parse_exclude_option(text: str, hunks: bool) -> Exclude:
    """`--exclude PATH=REASON` or `--hunks PATH:N[,N...]=REASON` as the manifest's exclude."""
    option = "--hunks" if hunks else "--exclude"
    shape = "PATH:N,M=REASON" if hunks else "PATH=REASON"
    target, sep, reason = text.partition("=")
    numbers: tuple[int, ...] | None = None
    if hunks:
        target, colon, listed = target.rpartition(":")
        parts = listed.split(",") if colon else []
        if not parts or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
            raise BadInputError(f"{option} {text!r} must be {shape}: hunk numbers from 1, as `status -v` lists them",
                                hint='for example: --hunks "vllm/model.py:2,3=targets code this image lacks"')
        numbers = tuple(sorted({int(p) for p in parts}))
    if not sep or not target or not reason.strip():
        raise BadInputError(f"{option} {text!r} must be {shape} with a reason (why it is not ported)",
                            hint=f'for example: {option} "{"vllm/x.py:2" if hunks else "vllm/x.so"}=shipped by the '
                            'image build"')
    return Exclude(target, reason.strip(), numbers)
