"""run: one patch, a series, the restart fast path, the pinned base and the applied records (their format:
records.py), the phases a run reports.
"""
