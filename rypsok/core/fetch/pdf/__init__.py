"""The reading of a PDF document into Markdown, for web_fetch (REQ-PDF-001..012)."""
