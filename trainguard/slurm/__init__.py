"""What the training asks Slurm: the job's environment and EndTime, and the bounded runner
every Slurm client command goes through (argument lists, never a shell string).
"""
