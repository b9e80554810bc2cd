"""judge: locate one hunk as git would; the verdict records; rewrite a section; combine and round-trip them into a
tree's state (docs/judgement.md); the folder that decides.
"""
