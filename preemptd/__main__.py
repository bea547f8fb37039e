from preemptd.daemon.cli import main

raise SystemExit(main())
