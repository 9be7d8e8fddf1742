"""Alert channels for slurm-watchdogs. One module per channel, registered in the
`watchdogs.notifiers` entry-point group."""
