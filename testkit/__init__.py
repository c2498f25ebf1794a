"""Fakes shared by the tests, the tools and the conformance harness: the MediaWiki-shaped
fixture engine, the fixture web site, the scraping fixture, an engine answering from
memory, and the TLS fronts that carry the engines' production stack to plain fixtures."""
