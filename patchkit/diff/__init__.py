"""diff: parse bytes (the only unidiff user) into frozen records, drop the excludes: the HunkSet.
"""
