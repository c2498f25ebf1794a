from rypsok.cli import main

raise SystemExit(main())
