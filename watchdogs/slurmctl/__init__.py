"""Talking to Slurm through its command-line tools, always with a timeout."""
