from asyncz.local.servers.provision import main

raise SystemExit(main())
