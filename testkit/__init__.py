"""Fakes shared by the tests, the tools and the conformance harness: the local HTTP server,
the MediaWiki-shaped fixture engine, keyless.toml's recorded answers, the fixture web site,
the scraping fixture, an engine answering from memory, and the TLS fronts that carry the
engines' production stack to plain fixtures."""
