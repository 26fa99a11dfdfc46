"""Guideline documents: parse, chunk, embed, store and search. Imports nothing of ours."""
