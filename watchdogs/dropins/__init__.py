"""cron.d drop-ins: discovery and run-parts safety rules (`discovery`, `safety`), the
crontab file (`crontab`), running executables (`execute`) and submitting *.slurm files
(`submit`)."""
