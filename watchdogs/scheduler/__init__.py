"""The crontab emulation: an APScheduler-driven loop over built-in checks and cron.d
drop-ins (`loop`), their schedules and catch-up (`schedules`), run records in the state
database (`records`), and the self-perpetuating Slurm job chain (`chain`)."""
