"""Filesystem probes that never hang the scheduler: statvfs, the newest file of a glob,
heartbeat records, a parallel directory scan and the site's quota tools, each run in a
child process with a deadline (a dead NFS/Lustre mount blocks a process in the kernel; a
child can be abandoned, a thread of ours could not), plus the pure parsers and the
forecast."""
