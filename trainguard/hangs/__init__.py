"""Hangs: the progress watchdog thread, what the guard does when it fires (stacks, suspects, the
exit), and the hang record the cluster-side checks read.
"""
