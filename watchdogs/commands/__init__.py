"""CLI subcommands: each module has `register(subparsers)` and a handler returning a
CommandResult. The CLI discovers every module in this package."""
