"""input: load and validate manifests and the registry; every bound, path rule and glob in one place each; the
engine root opened once per command (tree.Root) and its files as read (snapshots).
"""
