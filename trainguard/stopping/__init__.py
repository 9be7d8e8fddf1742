"""Stopping: what asks a training to stop (signals, switch files, memory, the deadline), how
the ranks agree on it, and how the process leaves (exit codes, the forced and the fast exit).
"""
