from watchdogs.cli import main

raise SystemExit(main())
