"""Filesystem probes that never hang the scheduler: statvfs, the newest file of a glob,
heartbeat records, a parallel directory scan and the site's quota tools, each run in a
child process with a deadline (a dead NFS/Lustre mount blocks a process in the kernel; a
child can be abandoned, a thread of ours could not), plus the pure parsers and the
forecast."""

DEFAULT_WORKERS = 2
"""The scan's `find` processes by default: fastest on this project's reference machine (2
cores, local disk): see docs/benchmarks.md. Defined here, not in `scan`, so the disk check's
option table (which `status` and `validate` build) does not load the scan."""
