"""`manage.py karp`'s verbs: each parses kubectl's words, calls the service the API and the dashboard call, prints."""
