"""What every command line shares, agentloom's own and each pack's: options, settings and error lines
(common.py), help and suggestions (help.py), the progress bar with Ctrl-C (progress.py).

It sits below both: the ``agentloom`` command (``cli/``) finds the packs' commands through entry points,
and a pack's command imports these, never ``cli``.
"""
