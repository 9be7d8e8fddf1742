"""Checkpoints: complete-or-absent checkpoint folders (the marker), keeping the last N, and the
saver that owns the step saved last and the measured save time.
"""
