"""Every bound patchkit puts on its input, in one place, with the reason for each number.

Hostile input must fail fast with a clear error, never hang, exhaust memory or crash the interpreter. Each
bound is far above what a real engine tree, diff or manifest needs (the reasons say how far), and each is
enforced where the input is read: paths by patchkit.input.paths, diffs by patchkit.diff.diffs and
PatchSpec.read_diff, manifests by patchkit.input.manifest, globs by patchkit.input.globs, tree files by
patchkit.input.tree (checked with fstat on the opened descriptor, then read with the bound: never read first and
checked after), placed paths by patchkit.diff.filtering, patch ids by patchkit.input.manifest and compiled hunk
sets by patchkit.diff.compiled.
"""

from __future__ import annotations

from patchkit.errors import DiffError

# Paths (bytes of the UTF-8 encoding). Linux PATH_MAX is 4096 and NAME_MAX 255: a longer path or name cannot
# be created there at all, so a diff naming one can only be broken or hostile.
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
# The deepest file of vLLM, SGLang or ATOM is about 10 folders down; git, tar and most tools cope with a few
# hundred. 64 leaves ample room, and keeps every walk over a path's folders trivially cheap (a walk that opens
# each ancestor once per folder costs at most 64 * 64 opens).
MAX_PATH_DEPTH = 64
# A manifest's `prefix` or `[paths]` target is a folder that diff paths are placed under: the placed path must
# still fit every bound above, so a folder at MAX_PATH_DEPTH (which leaves no room for a file name) or longer
# than a path may be is refused where the manifest names it, and each placed path is checked again in full.

# Patch ids: a folder name in the registry and part of state names (`.patchkit/applied/<id>.json`) and labels.
# Real ids are 10-30 characters (`atom-pr2106`); 128 leaves room for every suffix patchkit adds within NAME_MAX.
MAX_PATCH_ID_CHARS = 128

# Diffs. The largest benchmark diff (xlarge: ~2,000 files) is ~10 MB and ~250,000 lines; upstream pull requests
# are far smaller. Parsing costs ~10 objects a line, so 2 M lines stays within a few GB.
MAX_DIFF_BYTES = 64 << 20
MAX_DIFF_LINES = 2_000_000
# A hunk header line number or count of more digits than this is no real file position (a billion lines).
MAX_HEADER_DIGITS = 9
# A compiled hunk set (patchkit.diff.compiled) holds each hunk's old and new image, so a context line twice:
# at most twice the diff, plus a header of a few dozen bytes a hunk. Checked with fstat before it is read.
MAX_COMPILED_BYTES = 3 * MAX_DIFF_BYTES

# Manifests are a few dozen lines; one with thousands of [exclude] or [base] entries is still under 1 MiB.
MAX_MANIFEST_BYTES = 1 << 20
# Brackets/braces nested deeper than this: the schema nests at most two levels (a table of strings, a list).
MAX_MANIFEST_NESTING = 32
# Length of one exclude pattern (a path, so PATH_MAX) and of its [...] classes.
MAX_GLOB_CHARS = MAX_PATH_BYTES
# Wildcards (`*`, `**`, `**/`, `?`, `[...]`) in one pattern, after a run of stars counts as one. Real excludes
# have one to three. Matching costs at most (2 x wildcards + 1) states per path character, so this bounds
# the worst pattern against the longest path to well under a second.
MAX_GLOB_WILDCARDS = 64

# Engine tree files patchkit reads (to judge, plan and journal them). The largest source files of vLLM, SGLang
# or ATOM are well under 1 MiB; generated sources (register headers, kernel tables) reach a few tens of MiB.
# A file is held in memory with its planned content, and matching costs a few bytes of overhead per byte, so
# 64 MiB per file and 1 GiB over all files one command reads (the xlarge benchmark reads ~120 MB) keep a
# hostile tree from exhausting memory: a 4 GiB sparse file planted at a patched path is refused after one
# fstat, in milliseconds, instead of being read. A file the diff creates or deletes is not bounded tighter by
# what the diff expects there: any other size is a conflict already, judged cheaply under these bounds, and a
# modification's diff says nothing about the length of the lines it does not show.
MAX_TREE_FILE_BYTES = 64 << 20
MAX_TREE_READ_BYTES = 1 << 30
# The journal holds the original bytes of every file a transaction rewrites (all read under the bounds above)
# and of the state files it replaces: it is read back within those bounds plus a margin for its header.
MAX_JOURNAL_BYTES = MAX_TREE_READ_BYTES + (64 << 20)

# git on a repository patchkit does not trust (input.sealedgit): HEAD and a loose ref are a line each;
# packed-refs and a shallow file of a large engine's clone (tens of thousands of tags) are a few MiB; the
# loose refs walked for lint --base are bounded in number; each git run in time (a merge-base over an
# engine's whole history takes well under a second).
MAX_GIT_REF_BYTES = 4096
MAX_PACKED_REFS_BYTES = 64 << 20
MAX_GIT_REFS = 100_000
GIT_TIMEOUT = 60.0


def check_diff_size(size: int, source: str) -> None:
    """Refuse a diff too large to be a real upstream change before it is read (PatchSpec.read_diff) or parsed."""
    if size > MAX_DIFF_BYTES:
        raise DiffError(
            f"the diff is {size} bytes, over the limit of {MAX_DIFF_BYTES} ({MAX_DIFF_BYTES >> 20} MiB)",
            where=source,
            hint="split the change into several patches (see patchkit.input.limits for why the bound is there)",
        )
