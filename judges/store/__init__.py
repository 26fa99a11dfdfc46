"""Stored things: the database (SQLite or PostgreSQL), judge agents and the guideline documents
of each agent (parsed, chunked and embedded through rag/).

May import: judges.reading, judges.patches, judges.inputs, judges.models, judges.errors, rag, prompts.
"""
