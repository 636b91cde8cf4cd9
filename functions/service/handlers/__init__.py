"""Lambda entry points: thin adapters from events to one domain call each."""
