"""Built-in checks. Each module holds one check type, registered in `watchdogs.checks`."""
