"""cli: the click group (main.py, the one error boundary) and one module per command (commands/): options → one call
→ report → exit code.
"""
