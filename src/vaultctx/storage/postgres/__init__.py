"""The index on PostgreSQL: one database that any number of servers read, for a team.

SQLite stays the analysis engine: the indexer indexes a vault into its local SQLite index as
always, and `sync.publish` copies what changed into PostgreSQL in one transaction, with each
term's blocks as FTS5 itself counts them (`postings.py`: a row per term and segment of
notes). `reads.PostgresReads` then answers select's questions from PostgreSQL alone, with
FTS5's own bm25 computed over those posting lists, so rankings match the SQLite index's
(PostgreSQL's `ts_rank` does not come close).

psycopg is imported here only: the `postgres` extra (`pip install 'vaultctx[postgres]'`).
"""

import logging

# A COPY cut off by a lost connection makes psycopg warn on its own logger as well as raise;
# storage maps the error, and each door says it once. A library's logger with no handler
# would reach stderr through Python's last resort, a second raw line; with this one the
# warning goes only where the user's own logging configuration sends it.
logging.getLogger("psycopg").addHandler(logging.NullHandler())
