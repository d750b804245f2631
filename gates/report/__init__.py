"""Reading a history for people: the report model, the text / Markdown / HTML / JSON
renderings, the GitHub summary, CI health, trim, owners, notify and compare."""
