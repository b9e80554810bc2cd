"""plan: every new file content in memory, re-judged; stale .pyc removals.
"""
