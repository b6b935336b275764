from dlltrace.cli import main

raise SystemExit(main())
