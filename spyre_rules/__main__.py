from spyre_rules.cli import main

raise SystemExit(main())
