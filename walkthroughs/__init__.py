"""The README's walkthroughs (tools/first-search, tools/first-fetch): Tutorial 1 and 3 end
to end against local fixtures."""
