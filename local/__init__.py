"""Run turnstile on this machine: DynamoDB Local, tables from the synthesized template, the same
Lambda handlers behind a threaded HTTP server, and (with streams) a pump feeding the consumers."""
