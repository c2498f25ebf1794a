from rypsok._entry import main

raise SystemExit(main())
